//! `geo-bench` end to end, in-process, against the embedded SQLite R*Tree store and the real
//! PostGIS, Redis and Valkey servers the test command starts on loopback.

mod support;

use common::exit::Exit;
use common::results::Status;
use common::testing::{assert_all_ok, cell, system_names};
use support::*;

#[test]
fn the_embedded_default_measures_the_curve_and_the_query_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let summary = run(&args(&out, &[])).unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, &out);
    let workloads: Vec<&str> = report.cells.iter().map(|c| c.workload.as_str()).collect();
    assert_eq!(
        workloads,
        [
            "insert b1 c1",
            "insert b10 c1",
            "insert b100 c1",
            "insert b1000 c1",
            "insert b8000 c1",
            "insert b1 c8",
            "insert b10 c8",
            "insert b100 c8",
            "insert b1000 c8",
            "insert b8000 c8",
            "id lookup c2",
            "radius 1 km c2",
            "radius 10 km c2",
            "polygon c2",
        ]
    );
    for c in &report.cells {
        assert_eq!(
            (c.status, c.system.as_str()),
            (Status::Ok, "sqlite"),
            "{c:?}"
        );
        assert!(c.throughput.as_ref().unwrap().median > 0.0);
        assert!(c.latency_ns.unwrap().p99 >= c.latency_ns.unwrap().p50);
        assert_eq!(c.counts.error, 0);
    }
    let b8000 = cell(report, "insert b8000 c8", "sqlite");
    assert_eq!((b8000.unit.as_str(), b8000.connections), ("events/s", 8));
    let requests = b8000.extra["requests_per_s"].as_f64().unwrap();
    let events = b8000.throughput.as_ref().unwrap().median;
    assert!(
        (events / requests - 8_000.0).abs() < 1e-6,
        "events/s = requests/s × 8,000"
    );
    assert!(
        cell(report, "radius 10 km c2", "sqlite").extra["mean_results_per_query"]
            .as_f64()
            .unwrap()
            > 1.0
    );

    let sqlite = &report.systems[0];
    assert_eq!(sqlite.verified["journal_mode"], "wal");
    assert_eq!(sqlite.verified["synchronous"], "2");
    assert!(sqlite.verified["durability"].starts_with("durable"));
    assert!(sqlite.verified["events.spatial_index"].contains("R*Tree"));
    assert_eq!(sqlite.labels, ["durable"]);
    assert!(sqlite.durable_write_floor_ns.is_some());
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("batch size 1") && n.contains("durable-write floor"))
    );

    let json = read_json(&out);
    assert_eq!(
        (json["tool"].as_str(), json["suite"].as_str()),
        (Some("geo-bench"), Some("geo"))
    );
    assert_eq!(
        json["options"]["batch_sizes"],
        serde_json::json!([1, 10, 100, 1000, 8000])
    );
    assert_eq!(
        json["options"]["radii_m"],
        serde_json::json!([1000.0, 10000.0])
    );
    assert!(
        json["extra"]["insert_curve"]["sqlite"]["8"]["8000"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(json["data"]["checksum"].as_str().unwrap().len(), 16);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("Insert throughput") && markdown.contains("| radius 1 km c2 (≈"),
        "{markdown}"
    );
    let svg = std::fs::read_to_string(out.join("insert-curve.svg")).unwrap();
    assert_eq!(
        svg.matches("<polyline").count(),
        2,
        "one line per client count"
    );
}

#[test]
fn every_target_agrees_with_the_oracle_and_is_measured_in_one_round() {
    let Some(([postgres, redis, redis_durable, valkey, valkey_durable], dir)) = on_servers([
        "FAIRBENCH_TEST_POSTGRES_URL",
        "FAIRBENCH_TEST_REDIS_URL",
        "FAIRBENCH_TEST_REDIS_DURABLE_URL",
        "FAIRBENCH_TEST_VALKEY_URL",
        "FAIRBENCH_TEST_VALKEY_DURABLE_URL",
    ]) else {
        return;
    };
    let pg = postgis_database(&postgres);
    let durable = format!("{redis_durable}?durability=durable");
    let volatile = format!("{valkey}?durability=volatile");
    let summary = run(&args(
        dir.path(),
        &[
            "--batch-sizes",
            "1,100",
            "--clients",
            "1,4",
            "--workloads",
            "insert,query,geoadd",
            "--pipeline",
            "16",
            "--target",
            "sqlite",
            "--target",
            &pg,
            "--target",
            &redis,
            "--target",
            &durable,
            "--target",
            &volatile,
            "--target",
            &valkey_durable,
        ],
    ))
    .unwrap();
    let report = &summary.report;
    assert_eq!(
        summary.exit,
        Exit::AllOk,
        "{:#?}",
        report
            .cells
            .iter()
            .filter(|c| c.status != Status::Ok)
            .collect::<Vec<_>>()
    );
    let names = system_names(report);
    assert_eq!(
        names,
        [
            "sqlite",
            "postgis",
            "redis-volatile",
            "redis-durable",
            "valkey-volatile",
            "valkey-durable"
        ]
    );
    let system = |name: &str| report.systems.iter().find(|s| s.name == name).unwrap();
    assert!(
        system("postgis").version.contains("PostGIS 3"),
        "{}",
        system("postgis").version
    );
    assert_eq!(system("postgis").verified["fsync"], "on");
    assert!(system("postgis").verified["events.spatial_index"].starts_with("GIST"));
    for name in ["redis-durable", "valkey-durable"] {
        let s = system(name);
        assert_eq!(
            (
                s.verified["appendonly"].as_str(),
                s.verified["appendfsync"].as_str()
            ),
            ("yes", "always"),
            "{name}"
        );
        assert_eq!(s.labels, ["durable"]);
        assert!(
            s.durable_write_floor_ns.is_some(),
            "{name} runs on this machine"
        );
    }
    for name in ["redis-volatile", "valkey-volatile"] {
        assert_eq!(system(name).verified["appendonly"], "no");
        assert_eq!(system(name).labels, ["not durable"]);
    }
    assert!(system("valkey-volatile").version.starts_with("Valkey 8"));
    assert!(system("redis-volatile").version.starts_with("Redis 7"));
    for name in &names {
        for workload in [
            "insert b1 c1",
            "insert b100 c4",
            "id lookup c2",
            "radius 1 km c2",
            "radius 10 km c2",
            "polygon c2",
        ] {
            let c = cell(report, workload, name);
            assert_eq!(c.status, Status::Ok, "{c:?}");
        }
    }
    let geoadd = cell(report, "geoadd P16 c2", "redis-volatile");
    assert_eq!(geoadd.unit, "commands/s");
    assert!(
        !report
            .cells
            .iter()
            .any(|c| c.workload.starts_with("geoadd") && c.system == "sqlite")
    );
    assert!(report.notes.iter().any(
        |n| n.contains("redis-volatile") && n.contains("post-filter")
            || n.contains("exact point-in-polygon")
    ));
    let pg_data = psql(
        &pg,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench_geo'",
    );
    assert_eq!(pg_data, "0", "fairbench's tables are dropped after the run");
}

#[test]
fn durable_is_refused_when_appendfsync_is_not_always() {
    let Some((redis, dir)) = on_server("FAIRBENCH_TEST_REDIS_URL") else {
        return;
    };
    let asked = format!("{redis}?durability=durable");
    let summary = run(&args(
        dir.path(),
        &[
            "--workloads",
            "query",
            "--target",
            "sqlite",
            "--target",
            &asked,
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let refused = cell(&summary.report, "radius 1 km c2", "redis-volatile");
    assert_eq!(refused.status, Status::Refused);
    let reason = refused.reason.as_deref().unwrap();
    assert!(
        reason.contains("appendfsync") && reason.contains("always"),
        "{reason}"
    );
    assert_eq!(
        cell(&summary.report, "radius 1 km c2", "sqlite").status,
        Status::Ok
    );

    let alone = tempfile::tempdir().unwrap();
    let out = alone.path().join("run");
    let error = run(&args(&out, &["--target", &asked]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("no system can be measured") && error.contains("appendfsync"),
        "{error}"
    );
    assert!(!out.exists(), "nothing measured leaves no results folder");
}

#[test]
fn a_wrong_answer_makes_the_cell_invalid_with_an_example() {
    let Some((redis, dir)) = on_server("FAIRBENCH_TEST_REDIS_URL") else {
        return;
    };
    // With no boundary tolerance, Redis's spherical distances and 52-bit geohash coordinates
    // disagree with the geodesic oracle near the edge of the circle (the data is seeded, so
    // the same events sit there on every machine).
    let summary = run(&args(
        dir.path(),
        &[
            "--workloads",
            "query",
            "--tolerance-m",
            "0",
            "--tolerance-pct",
            "0",
            "--events",
            "20000",
            "--radii",
            "10km",
            "--target",
            &redis,
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let c = cell(&summary.report, "radius 10 km c2", "redis-volatile");
    assert_eq!(c.status, Status::Invalid);
    assert!(
        c.throughput.is_none() || c.counts.ok == 0,
        "a wrong answer is not timed"
    );
    let reason = c.reason.as_deref().unwrap();
    assert!(
        reason.contains("disagree with the exact oracle")
            && reason.contains("e.g.")
            && reason.contains("m from the centre"),
        "{reason}"
    );
    assert_eq!(
        cell(&summary.report, "id lookup c2", "redis-volatile").status,
        Status::Ok
    );
}

#[test]
fn bad_input_is_one_clear_error_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let queries = dir.path().join("queries.txt");
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "radius 48.85 2.35 1000\nradius 91 2.35 1000\n",
            vec![],
            "line 2: latitude 91 is out of range",
        ),
        (
            "polygon 48.8 2.3, 48.9 2.4, 48.8 2.4, 48.9 2.3\n",
            vec![],
            "self-intersection",
        ),
        ("polygon\n", vec![], "the polygon is empty"),
        (
            "radius 48.85 2.35 0\n",
            vec![],
            "radius 0 m must be greater than 0",
        ),
    ];
    for (text, extra, expected) in cases {
        std::fs::write(&queries, text).unwrap();
        let out = dir.path().join("run");
        let mut all = args(&out, &["--query-file", queries.to_str().unwrap()]);
        all.extend(extra);
        let error = format!("{:#}", run(&all).unwrap_err());
        assert!(error.contains(expected), "{text:?}: {error}");
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(!out.exists());
    }
    for (flags, expected) in [
        (vec!["--radii", "0km"], "must be greater than 0"),
        (vec!["--radii=-1km"], "must be greater than 0"),
        (vec!["--cities", "atlantis"], "unknown city `atlantis`"),
        (
            vec!["--target", "redis://127.0.0.1:1"],
            "cannot connect to redis at redis://127.0.0.1:1",
        ),
        (
            vec!["--target", "archerdb://127.0.0.1:3001"],
            "ArcherDB has no Rust client",
        ),
    ] {
        let out = dir.path().join("run");
        let error = format!("{:#}", run(&args(&out, &flags)).unwrap_err());
        assert!(error.contains(expected), "{flags:?}: {error}");
        assert!(!out.exists(), "{flags:?} left a results folder");
    }
}

#[test]
fn an_interrupted_run_still_writes_what_it_measured() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let interrupt = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = interrupt.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let summary = run_with(
        &args(
            &out,
            &[
                "--duration",
                "400ms",
                "--batch-sizes",
                "1,10,100",
                "--rounds",
                "2",
            ],
        ),
        interrupt,
    )
    .unwrap();
    stopper.join().unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let report = &summary.report;
    assert!(report.notes.iter().any(|n| n.contains("interrupted")));
    assert!(
        report.cells.iter().any(|c| c.status == Status::Error
            && c.reason.as_deref().unwrap_or("").contains("incomplete"))
    );
    let json = read_json(&out);
    assert!(json["finished_at"].is_string());
    assert!(out.join("report.md").exists());
}
