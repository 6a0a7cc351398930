//! `vector-bench` against the real servers the test command starts on loopback (PostgreSQL with
//! pgvector, Chroma), compared in one run with the embedded usearch index; and Qdrant when
//! `QDRANT_URL` names one (none can be installed where these tests were written).

mod support;

use common::exit::Exit;
use common::results::{Location, Status};
use common::testing::assert_verified;
use support::*;

const PGVECTOR: &str = "FAIRBENCH_TEST_PGVECTOR_URL";
const CHROMA: &str = "FAIRBENCH_TEST_CHROMA_URL";

#[test]
fn pgvector_chroma_and_usearch_compare_in_one_run_with_parameters_read_back() {
    let Some(([pg, chroma], _servers)) = on_servers([PGVECTOR, CHROMA]) else {
        return;
    };
    let (_dir, out, cache) = run_folders();
    let pg_target = format!("pgvector={pg}");
    let chroma_target = format!("chroma={chroma}");
    let mut pid_args = Vec::new();
    let pg_pid = std::env::var("FAIRBENCH_TEST_PGVECTOR_PID")
        .ok()
        .map(|p| format!("pgvector={p}"));
    if let Some(pid) = &pg_pid {
        pid_args.extend(["--server-pid", pid.as_str()]);
    }
    let mut extra = with_small(&[
        "--target",
        "usearch",
        "--target",
        &pg_target,
        "--target",
        &chroma_target,
        "--variants",
        "f32,binary",
        "--filters",
        "none,1pct",
    ]);
    extra.extend(pid_args);
    let summary = run(&args(&out, &cache, &extra)).unwrap();
    let report = &summary.report;
    assert_eq!(
        summary.exit,
        Exit::NotAllOk,
        "chroma's binary cells are refused"
    );
    assert_matches_schema(&out);
    let names: Vec<&str> = report.systems.iter().map(|s| s.name.as_str()).collect();
    // pgvector's iterative scans are lanes of their own; the exact scan is every run's baseline.
    assert_eq!(
        names,
        [
            "usearch",
            "pgvector",
            "pgvector+relaxed_order",
            "pgvector+strict_order",
            "chroma",
            "exact-scan"
        ]
    );
    let pg = &report.systems[1];
    assert!(
        pg.version.contains("PostgreSQL 18") && pg.version.contains("pgvector 0.8"),
        "{}",
        pg.version
    );
    assert_verified(
        pg,
        &[
            ("f32.m", "16"),
            ("f32.ef_construction", "200"),
            ("f32.rows", "2000"),
        ],
    );
    for (setting, part) in [
        ("f32.payload_index", "(category)"),
        ("f32.plan", "Index Scan"),
    ] {
        assert!(
            pg.verified[setting].contains(part),
            "{setting}: {:?}",
            pg.verified
        );
    }
    // A local server's durable-write floor is measured in its own data directory, when it says
    // where that is (pgvector to a role that may read data_directory); Chroma does not say.
    assert_eq!(pg.location, Location::Local);
    if let Some(dir) = &pg.data_dir {
        assert!(
            pg.durable_write_floor_ns.is_some() || !pg.not_measured.is_empty(),
            "{dir}: neither a floor nor why not"
        );
    }
    assert_eq!(report.systems[0].location, Location::Embedded);
    let ch = &report.systems[4];
    assert_eq!(
        (ch.location, ch.data_dir.as_deref()),
        (Location::Local, None)
    );
    assert_verified(
        ch,
        &[
            ("f32.m", "16"),
            ("f32.ef_construction", "200"),
            ("f32.rows", "2000"),
            ("f32.space", "cosine"),
        ],
    );
    for system in ["usearch", "pgvector", "chroma"] {
        for workload in [
            "f32 · unfiltered · k 10 · ef 48",
            "f32 · filter 1% · k 10 · ef 48",
        ] {
            let c = cell(report, workload, system);
            assert_eq!(c.status, Status::Ok, "{c:?}");
            assert_eq!(c.extra["ef_reported"], "48", "{system}: ef read back");
            assert_eq!(c.extra["score"]["filter_violations"], 0);
        }
        assert!(
            recall(cell(report, "f32 · unfiltered · k 10 · ef 48", system)) > 0.8,
            "{system}"
        );
    }
    // The iterative scans run the filtered families only, each with its setting read back from
    // the session.
    for (lane, order) in [
        (&report.systems[2], "relaxed_order"),
        (&report.systems[3], "strict_order"),
    ] {
        assert_eq!(
            lane.verified["f32.hnsw.iterative_scan"], order,
            "{:?}",
            lane.verified
        );
        let c = cell(report, "f32 · filter 1% · k 10 · ef 48", &lane.name);
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert_eq!(c.extra["score"]["filter_violations"], 0);
        assert!(
            !report
                .cells
                .iter()
                .any(|c| c.system == lane.name && c.workload.contains("unfiltered")),
            "{}: an unfiltered cell",
            lane.name
        );
    }
    for workload in [
        "binary · unfiltered · k 10 · ef 16",
        "binary · filter 1% · k 10 · ef 48",
    ] {
        let c = cell(report, workload, "chroma");
        assert_eq!(c.status, Status::Refused);
        assert!(
            c.reason.as_deref().unwrap().contains("not offered"),
            "{c:?}"
        );
        assert_eq!(cell(report, workload, "pgvector").status, Status::Ok);
    }
    let json = read_json(&out);
    let builds = json["extra"]["builds"].as_array().unwrap();
    let pg_build = builds
        .iter()
        .find(|b| b["system"] == "pgvector" && b["variant"] == "f32")
        .unwrap();
    assert!(
        pg_build["build"]["build_s"].as_f64().unwrap()
            >= pg_build["build"]["insert_s"].as_f64().unwrap()
    );
    if pg_pid.is_some() {
        assert!(pg_build["server_rss_bytes"].as_u64().unwrap() > 0);
    }
    // Matched-recall verdicts compare the servers with usearch, the reference.
    common::testing::assert_judged_against(report, "usearch");
    assert!(
        std::fs::read_to_string(out.join("recall-qps-f32-unfiltered-k-10.svg"))
            .unwrap()
            .contains(">chroma</text>")
    );
}

#[test]
fn an_existing_collection_of_another_dimension_is_refused_in_one_line() {
    let Some(([pg, chroma], _servers)) = on_servers([PGVECTOR, CHROMA]) else {
        return;
    };
    let (dir, _, cache) = run_folders();
    for target in [format!("pgvector={pg}"), format!("chroma={chroma}")] {
        let quick = |dims: &'static str, out: &std::path::Path, keep: bool| {
            let mut extra = vec![
                "--target",
                target.as_str(),
                "--namespace",
                "fbdims",
                "--variants",
                "f32",
                "--filters",
                "none",
                "--ef",
                "16",
                "--rounds",
                "1",
                "--rows",
                "300",
                "--dims",
                dims,
                "--queries",
                "10",
            ];
            if keep {
                extra.push("--keep-data");
            }
            run(&args(out, &cache, &extra))
        };
        quick("16", &dir.path().join("a"), true).unwrap();
        let out = dir.path().join("b");
        let error = format!("{:#}", quick("24", &out, false).unwrap_err());
        assert!(
            error.contains("holds 16-dimension vectors, the dataset has 24"),
            "{error}"
        );
        assert!(!error.contains('\n'));
        assert!(!out.exists());
        // A run with the matching dimension replaces fairbench's own collection and drops it.
        quick("16", &dir.path().join("c"), false).unwrap();
    }
}

/// A search past `--ceiling` is dropped (its HTTP request with it) and is a `timeout` naming
/// the ceiling, never an `error`; the build's and the control path's requests are not cut by
/// the per-search ceiling; the run goes on to the next ef point.
#[test]
fn chroma_searches_past_the_ceiling_are_timeouts_and_the_run_goes_on() {
    let Some((chroma, _servers)) = on_server(CHROMA) else {
        return;
    };
    let (_summary, _dir, out) = run_past_the_ceiling("chroma", &chroma, "fbceiling");
    let json = read_json(&out);
    let builds = json["extra"]["builds"].as_array().unwrap();
    assert!(
        builds
            .iter()
            .all(|b| b["system"] != "chroma" || b["problem"].is_null()),
        "{builds:#?}"
    );
    let written = json["cells"].as_array().unwrap();
    let timeouts = written
        .iter()
        .filter(|c| c["system"] == "chroma" && c["status"] == "timeout")
        .count();
    assert_eq!(timeouts, 2, "results.json holds them as written");
}

/// A pgvector build stopped at `--build-ceiling` is stopped on the server too: its `COPY` or
/// `CREATE INDEX` is cancelled, not left running (and taking the server's CPU) while the run
/// goes on. A poller watches the server's own list of running statements.
#[test]
fn a_pgvector_build_stopped_at_its_bound_is_cancelled_on_the_server() {
    let Some((pg, _servers)) = on_server(PGVECTOR) else {
        return;
    };
    let (_dir, out, cache) = run_folders();
    let target = format!("pgvector={pg}");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (pg, done) = (pg.clone(), done.clone());
        std::thread::spawn(move || {
            // When fairbench's build statements were first and last seen running.
            let (mut first, mut last) = (None, None);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let seen = std::process::Command::new("psql")
                    .args([pg.as_str(), "-Atc"])
                    .arg(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fairbench' \
                         AND state = 'active' AND (query LIKE '%CREATE INDEX%' OR query LIKE 'COPY%')",
                    )
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&seen.stdout);
                if text.trim().parse::<u32>().unwrap_or(0) > 0 {
                    let now = std::time::Instant::now();
                    first.get_or_insert(now);
                    last = Some(now);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            first.zip(last).map(|(a, b)| b - a)
        })
    };
    // 30,000 × 128 with m 32 and ef_construction 400: the COPY takes a second or two, the
    // CREATE INDEX far longer than the bound (it ran on for over 30 s when not cancelled).
    let extra = [
        "--target",
        &target,
        "--namespace",
        "fbcancel",
        "--rows",
        "30000",
        "--dims",
        "128",
        "--m",
        "32",
        "--ef-construction",
        "400",
        "--queries",
        "10",
        "--variants",
        "f32",
        "--filters",
        "none",
        "--ef",
        "16",
        "--build-ceiling",
        "4s",
    ];
    let summary = run(&args(&out, &cache, &extra));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let running = poller.join().unwrap();
    let summary = summary.unwrap();
    let cell = summary
        .report
        .cells
        .iter()
        .find(|c| c.system == "pgvector")
        .unwrap();
    assert_eq!(cell.status, Status::Timeout, "{cell:?}");
    let running = running.expect("the build's statements were seen running");
    assert!(
        running < std::time::Duration::from_secs(7),
        "the build's statements ran on for {running:?} on the server, past the 4 s bound"
    );
}

/// Runs only when `QDRANT_URL` names a Qdrant gRPC endpoint (`qdrant://127.0.0.1:6334`); no
/// Qdrant server can be installed where these tests normally run.
#[test]
fn qdrant_builds_verifies_and_answers_when_a_server_is_given() {
    let Ok(url) = std::env::var("QDRANT_URL") else {
        eprintln!("skipped: QDRANT_URL is not set (no Qdrant server is installable here)");
        return;
    };
    let url = url.replacen("http://", "qdrant://", 1);
    let (_dir, out, cache) = run_folders();
    let target = format!("qdrant={url}");
    let summary = run(&args(
        &out,
        &cache,
        &with_small(&[
            "--target",
            &target,
            "--variants",
            "f32,int8,binary",
            "--filters",
            "none,10pct",
        ]),
    ))
    .unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", report.cells);
    assert_matches_schema(&out);
    let q = &report.systems[0];
    assert!(q.version.starts_with("Qdrant "), "{}", q.version);
    assert_eq!(q.verified["f32.m"], "16");
    assert_eq!(q.verified["f32.ef_construction"], "200");
    assert_eq!(
        q.verified["int8.quantization"].split(' ').next(),
        Some("scalar")
    );
    assert_eq!(q.verified["binary.quantization"], "binary");
    assert!(recall(cell(report, "f32 · unfiltered · k 10 · ef 48", "qdrant")) > 0.8);
}
