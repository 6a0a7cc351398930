//! `sql-bench app` end to end, in-process, against the embedded SQLite and the real PostgreSQL
//! and MariaDB servers the test command starts: answers verified against the generator, index
//! parity read from each catalog, and the engines that lie, lose an index or hang caught.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::results::{Location, Report, Status};
use common::testing::scratch::{Scratch, on_create};
use common::testing::{assert_all_ok, cell};
use support::*;

/// Small but shaped like the seed: enough rows for every scenario to return something, and
/// batches enough that each write has timed ones after its warm-up batch.
const SMALL: &[&str] = &[
    "--rows",
    "3000",
    "--batch",
    "1000",
    "--iterations",
    "2",
    "--warmup",
    "1",
    "--rounds",
    "2",
];

/// `sql-bench app` with the small settings, which `extra` overrides.
fn app(output: &Path, extra: &[&str]) -> anyhow::Result<sql_bench::Summary> {
    let mut argv = vec!["app", "--output", output.to_str().unwrap(), "--quiet"];
    for pair in SMALL.chunks(2) {
        if !extra.contains(&pair[0]) {
            argv.extend_from_slice(pair);
        }
    }
    argv.extend_from_slice(extra);
    run(&argv)
}

/// SQL that has the row trigger function `public.NAME()` (the test defines it) run before
/// every insert into fairbench.app_records, once the tool creates that table.
fn before_each_insert(name: &str) -> String {
    on_create(
        "CREATE TABLE",
        &format!(
            "IF obj = 'fairbench.app_records' THEN EXECUTE 'CREATE TRIGGER {name} BEFORE INSERT \
             ON fairbench.app_records FOR EACH ROW EXECUTE FUNCTION public.{name}()'; END IF;"
        ),
    )
}

#[test]
fn sqlite_answers_every_scenario_exactly_and_the_report_has_the_seed_shape() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let summary = app(&out, &[]).unwrap();
    assert_all_ok(&summary, &out);
    let report = &summary.report;
    let scenarios: Vec<&str> = report.cells.iter().map(|c| c.workload.as_str()).collect();
    assert_eq!(
        scenarios,
        [
            "fill",
            "append",
            "point-read",
            "inspection",
            "first-page",
            "deep-page",
            "flag-scan",
            "range-scan",
            "count",
            "load-all"
        ]
    );
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
        let latency = cell.latency_ns.unwrap();
        assert!(latency.p95 >= latency.p50 && latency.p50 > 0);
        if cell.workload == "fill" || cell.workload == "append" {
            let throughput = cell.throughput.as_ref().unwrap();
            assert_eq!(throughput.rounds.len(), 2);
            // The median of two rounds: `throughput` is over rounds, as in every tool.
            assert_eq!(
                throughput.median,
                (throughput.rounds[0] + throughput.rounds[1]) / 2.0
            );
            assert_eq!(cell.extra["rows"], 3000);
            // One warm-up batch of 1,000 written untimed per round; two timed.
            assert_eq!(cell.extra["warmup_rows"], 1000);
            assert_eq!(cell.extra["batch_rows_per_s"]["batches"], 4);
            assert_eq!(cell.counts.ok, 4, "{cell:?}");
        } else {
            // Two rounds × two measured iterations, pooled.
            assert_eq!(cell.counts.ok, 4, "{cell:?}");
            assert_eq!(cell.extra["round_medians_ns"].as_array().unwrap().len(), 2);
            assert!(cell.extra["digest"].as_str().unwrap().len() == 16);
        }
    }
    assert_eq!(cell(report, "point-read", "sqlite").extra["rows"], 200);
    assert_eq!(cell(report, "first-page", "sqlite").extra["rows"], 50);
    let sqlite = &report.systems[0];
    assert_eq!(sqlite.location, Location::Embedded);
    assert!(
        sqlite.durable_write_floor_ns.is_some(),
        "the app suite measures the floor where the database file lives"
    );
    assert!(
        !out.join("throughput.svg").exists(),
        "the app suite draws no chart"
    );
    assert_eq!(sqlite.verified["app_records.extra_indexes"], "none");
    for field in [
        "_inspection_id",
        "_system_id",
        "_valve_id",
        "_room_id",
        "_remark_id",
        "_type_group_id",
    ] {
        assert!(
            sqlite.verified["app_records.indexes"].contains(&format!("({field})")),
            "{field}"
        );
    }
    assert!(report.extra["summary"][0]["won"].is_number());
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("| Point read by identifier, 200 requests | 200 |"),
        "{markdown}"
    );
    assert!(markdown.contains("What this run does not establish"));
    assert!(markdown.contains("Every request was sequential"));
}

/// Every cell says how its server's CPU was read over the timed part of its rounds, as crud's
/// do: SQLite's is the client's own (`in process`, no figure); a local PostgreSQL's is its
/// process tree, per iteration or row and in cores. The report shows the shared CPU table.
#[test]
fn the_cells_carry_the_servers_cpu_beside_the_clients() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let pg = server_url(POSTGRES);
    let _servers = pg.as_ref().map(|_| lock_servers());
    let mut extra = vec!["--target", "sqlite"];
    if let Some(pg) = &pg {
        extra.extend(["--target", pg.as_str()]);
    }
    let summary = app(&out, &extra).unwrap();
    assert_all_ok(&summary, &out);
    let report = &summary.report;
    for cell in report.cells.iter().filter(|c| c.system == "sqlite") {
        assert_eq!(
            cell.server_cpu_source.as_deref(),
            Some("in process"),
            "{cell:?}"
        );
        assert_eq!(cell.server_cpu_ns_per_op, None, "{cell:?}");
    }
    if pg.is_some() {
        let postgres: Vec<_> = report
            .cells
            .iter()
            .filter(|c| c.system != "sqlite")
            .collect();
        let sqlite = report.cells.iter().filter(|c| c.system == "sqlite");
        assert_eq!(postgres.len(), sqlite.count());
        for cell in postgres {
            let source = cell.server_cpu_source.as_deref().unwrap_or_default();
            assert!(source.starts_with("process tree of PID "), "{cell:?}");
            // The kernel counts CPU in 10 ms ticks: a read scenario of a few millisecond-long
            // iterations may see none (0 is a reading, not a missing one); the fill and the
            // append, thousands of rows, always see some.
            let (per_op, cores) = (cell.server_cpu_ns_per_op, cell.server_cpu_cores);
            assert!(per_op.unwrap() >= 0.0 && cores.unwrap() >= 0.0, "{cell:?}");
            if cell.unit == "rows/s" {
                assert!(per_op.unwrap() > 0.0 && cores.unwrap() > 0.0, "{cell:?}");
            }
        }
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("CPU per operation: client / server") && markdown.contains("in process"),
        "{markdown}"
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.contains(",in process,"), "{csv}");
}

#[test]
fn postgres_mariadb_and_sqlite_return_the_same_answers_with_the_same_indexes() {
    let Some(([pg, my], dir)) = on_servers([POSTGRES, MYSQL]) else {
        return;
    };
    let summary = app(
        dir.path(),
        &["--target", &pg, "--target", &my, "--target", "sqlite"],
    )
    .unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, dir.path());
    for system in &report.systems[..2] {
        assert_eq!(system.location, Location::Local, "{}", system.name);
        assert!(system.durable_write_floor_ns.is_some(), "{}", system.name);
    }
    for system in &report.systems {
        assert_eq!(
            system.verified["app_records.extra_indexes"], "none",
            "{}",
            system.name
        );
        assert!(
            system.verified["app_records.indexes"].contains("(_room_id)"),
            "{}",
            system.name
        );
    }
    // Two rounds: every pair says why it has no verdict; each engine still has a standing.
    assert!(report.verdicts.is_empty());
    assert_eq!(report.no_verdicts.len(), 10 * 2);
    assert!(
        report
            .no_verdicts
            .iter()
            .all(|v| v.reason == "2 measured rounds (a verdict needs 3 a side)"),
        "{:?}",
        report.no_verdicts
    );
    let summary_rows = report.extra["summary"].as_array().unwrap();
    assert_eq!(summary_rows.len(), 3);
    // Everything fairbench created is gone.
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench' AND tablename = 'app_records'"
        ),
        "0"
    );
    assert_eq!(
        mariadb(
            &my,
            "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'fairbench' AND TABLE_NAME = 'app_records'"
        ),
        "0"
    );
}

#[test]
fn an_engine_that_moves_records_to_another_inspection_is_invalid_wherever_it_returns_them() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let setup = format!(
        "CREATE FUNCTION misfile() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN
             IF right(NEW.id, 1) = '0' THEN
               NEW.doc := jsonb_set(NEW.doc, '{{_inspection_id}}', '\"insp-elsewhere\"');
             END IF;
             RETURN NEW;
           END $$;
         {}",
        before_each_insert("misfile")
    );
    let db = Scratch::new(&pg, "fairbench_misfiled", &setup);
    let target = format!("misfiled={}", db.url);
    let summary = app(dir.path(), &["--target", &target, "--rounds", "1"]).unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::NotAllOk);
    let inspection = cell(report, "inspection", "misfiled");
    assert_eq!(inspection.status, Status::Invalid, "{inspection:?}");
    assert!(
        inspection
            .reason
            .as_deref()
            .unwrap()
            .contains("the generated data gives"),
        "{:?}",
        inspection.reason
    );
    assert!(
        inspection.latency_ns.is_none(),
        "an invalid cell gets no time"
    );
    // Every answer is digested record by record, every field: the right rows with a wrong
    // inspection are wrong wherever they are returned, and only a count does not see them.
    for scenario in ["first-page", "flag-scan", "load-all"] {
        assert_eq!(
            cell(report, scenario, "misfiled").status,
            Status::Invalid,
            "{scenario}"
        );
    }
    assert_eq!(cell(report, "count", "misfiled").status, Status::Ok);
}

#[test]
fn an_engine_missing_a_declared_index_is_refused() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let setup = on_create(
        "CREATE INDEX",
        "IF obj = 'fairbench.app_records__room_id' THEN EXECUTE 'DROP INDEX fairbench.app_records__room_id'; END IF;",
    );
    let db = Scratch::new(&pg, "fairbench_unindexed", &setup);
    let target = format!("unindexed={}", db.url);
    let summary = app(dir.path(), &["--target", &target, "--rounds", "1"]).unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    for cell in summary.report.cells.iter().filter(|c| c.workload != "fill") {
        assert_eq!(cell.status, Status::Refused, "{cell:?}");
        assert!(
            cell.reason
                .as_deref()
                .unwrap()
                .contains("index parity: no index on _room_id"),
            "{:?}",
            cell.reason
        );
    }
}

#[test]
fn a_request_past_the_ceiling_is_a_timeout_and_is_cancelled_on_the_server() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let setup = format!(
        "CREATE FUNCTION crawl() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.01); RETURN NEW; END $$;
         {}",
        before_each_insert("crawl")
    );
    let db = Scratch::new(&pg, "fairbench_crawling", &setup);
    let target = format!("crawling={}", db.url);
    let started = Instant::now();
    let summary = app(
        dir.path(),
        &["--target", &target, "--rounds", "1", "--ceiling", "1s"],
    )
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the batch was not left running"
    );
    let fill = cell(&summary.report, "fill", "crawling");
    assert_eq!(fill.status, Status::Timeout, "{fill:?}");
    assert!(
        fill.reason
            .as_deref()
            .unwrap()
            .contains("no answer before the ceiling"),
        "{:?}",
        fill.reason
    );
    let active = psql(
        &pg,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'fairbench_crawling' AND state = 'active'",
    );
    assert_eq!(active, "0", "the server is not still inserting");
}

/// Watches for the app's table on MariaDB and, the moment it exists, gives it a trigger that
/// sleeps 20 ms per inserted row and counts the row, per connection, in a table outside any
/// transaction (Aria), so a statement's rows stay counted when it is killed and rolled back.
/// Every batch of the fill then runs far past the ceiling. MariaDB has no event trigger, so
/// this races the fill; with 12 batches to write, some batch always starts after the trigger is
/// in place. Returns whether the trigger was made (within 20 s).
fn slow_down_the_fill_when_its_table_appears(url: String) -> std::thread::JoinHandle<bool> {
    use mysql_async::prelude::Queryable;
    std::thread::spawn(move || {
        block_on(async move {
            let mut conn = mysql_async::Conn::from_url(url.as_str()).await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                let exists: Option<u64> = conn
                    .query_first(
                        "SELECT COUNT(*) FROM information_schema.TABLES \
                         WHERE TABLE_SCHEMA = 'fairbench' AND TABLE_NAME = 'app_records'",
                    )
                    .await
                    .unwrap();
                if exists == Some(1) {
                    conn.query_drop(
                        "CREATE TRIGGER fairbench.crawl BEFORE INSERT ON fairbench.app_records \
                         FOR EACH ROW BEGIN SET @slept = SLEEP(0.02); \
                         INSERT INTO fairbench_probe.slept VALUES (CONNECTION_ID()); END",
                    )
                    .await
                    .unwrap();
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            false
        })
    })
}

#[test]
fn a_mariadb_request_past_the_ceiling_is_a_timeout_and_is_killed_on_the_server() {
    let Some((my, dir)) = on_server(MYSQL) else {
        return;
    };
    mariadb(
        &my,
        "DROP TABLE IF EXISTS fairbench.app_records; CREATE DATABASE IF NOT EXISTS fairbench_probe; \
         CREATE OR REPLACE TABLE fairbench_probe.slept (connection BIGINT) ENGINE=Aria TRANSACTIONAL=0",
    );
    let watcher = slow_down_the_fill_when_its_table_appears(my.clone());
    let target = format!("crawling={my}");
    let summary = app(
        dir.path(),
        &[
            "--target",
            &target,
            "--rounds",
            "1",
            "--batch",
            "250",
            "--ceiling",
            "1s",
        ],
    )
    .unwrap();
    assert!(watcher.join().unwrap(), "the app's table never appeared");
    // A batch the client only gave up on would go on to insert all its 250 rows (5 s): wait,
    // bounded, until no insert is left on the server, then count what each statement did.
    let deadline = Instant::now() + Duration::from_secs(30);
    while mariadb(
        &my,
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
         WHERE INFO LIKE 'INSERT INTO fairbench.app_records%'",
    ) != "0"
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let most_rows_one_statement_slept: u64 = mariadb(
        &my,
        "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM fairbench_probe.slept GROUP BY connection) AS per",
    )
    .parse()
    .unwrap();
    mariadb(
        &my,
        "DROP TABLE IF EXISTS fairbench.app_records; DROP DATABASE fairbench_probe",
    );
    let fill = cell(&summary.report, "fill", "crawling");
    assert_eq!(fill.status, Status::Timeout, "{fill:?}");
    assert!(
        fill.reason
            .as_deref()
            .unwrap()
            .contains("no answer before the ceiling"),
        "{:?}",
        fill.reason
    );
    assert!(
        (1..250).contains(&most_rows_one_statement_slept),
        "a batch inserted {most_rows_one_statement_slept} of its 250 rows: KILL QUERY did not stop it on the server"
    );
}

#[test]
fn bad_input_is_refused_before_anything_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    for (extra, expected) in [
        (
            vec!["--scenarios", "point-read,teleport"],
            "unknown scenario `teleport`",
        ),
        (
            vec!["--rate", "100"],
            "--rate does not apply to sql-bench app",
        ),
        (vec!["--batch", "100000"], "--batch 100000"),
        (
            vec!["--batch", "5000"],
            "--rows 3000 in batches of 5000 makes 1 batch, and `fill` writes its first 1 untimed (--warmup 1): none would be timed",
        ),
        (
            vec!["--append-rows", "2000", "--warmup", "2"],
            "--append-rows 2000 in batches of 1000 makes 2 batches, and `append` writes its first 2 untimed",
        ),
    ] {
        let error = format!("{:#}", app(&out, &extra).unwrap_err());
        assert!(error.contains(expected), "{extra:?}: {error}");
        assert!(!out.exists());
    }
    assert!(app(&out, &["--rows", "0"]).is_err());
    let Some((pg, _servers)) = on_server(POSTGRES) else {
        return;
    };
    psql(
        &pg,
        "CREATE SCHEMA IF NOT EXISTS fairbench; CREATE TABLE fairbench.app_records (theirs int)",
    );
    let result = app(&out, &["--target", &pg]);
    let still_there = psql(
        &pg,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench' AND tablename = 'app_records'",
    );
    psql(&pg, "DROP TABLE fairbench.app_records");
    let error = format!("{:#}", result.unwrap_err());
    assert!(
        error.contains("fairbench.app_records exists but was not created by fairbench"),
        "{error}"
    );
    assert_eq!(still_there, "1");
    assert!(!out.exists());
}

#[test]
fn a_server_lost_mid_run_is_a_recorded_error_and_the_other_engines_carry_on() {
    let Some(server) = DoomedPostgres::start(56532) else {
        return;
    };
    let out = server.run_dir();
    let watcher = server.crash_when(Duration::from_secs(120), |results| {
        any_cell(results, "doomed", Some("inspection"), |c| {
            c["counts"]["ok"].as_u64() > Some(0)
        })
    });
    let target = format!("doomed={}", server.url);
    let summary = app(
        &out,
        &["--target", &target, "--target", "sqlite", "--rounds", "3"],
    );
    assert!(
        watcher.join().unwrap(),
        "the server was crashed during the run"
    );
    server.stop();
    let summary = summary.expect("a lost server is a recorded cell, not a failed run");
    assert_eq!(summary.exit, Exit::NotAllOk);
    let report = &summary.report;
    assert!(
        report
            .cells
            .iter()
            .filter(|c| c.system == "sqlite")
            .all(|c| c.status == Status::Ok)
    );
    let doomed: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.system == "doomed")
        .collect();
    assert!(
        doomed.iter().all(|c| c.status == Status::Error),
        "{doomed:#?}"
    );
    let inspection = cell(report, "inspection", "doomed");
    assert!(
        inspection.counts.ok > 0,
        "what was measured before the loss is kept"
    );
    assert!(out.join("report.md").exists());
}

/// Runs the `sql-bench` binary on its own (a process of its own, so its peak resident memory is
/// the run's alone) and reads back what it wrote.
fn app_process(output: &Path, args: &[&str]) -> (Report, serde_json::Value) {
    let status = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args(["app", "--output", output.to_str().unwrap(), "--quiet"])
        .args(args)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "sql-bench app {args:?}");
    let json = read_json(output);
    (serde_json::from_value(json.clone()).unwrap(), json)
}

/// The two sizes the client's memory is compared at: ten times the data (a debug build
/// fills and reads the larger in a minute or two).
const SIZES: [&str; 2] = ["10000", "100000"];

#[test]
fn the_client_s_memory_does_not_grow_with_the_rows_and_every_answer_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut peaks = Vec::new();
    for rows in SIZES {
        let out = dir.path().join(rows);
        let (report, json) = app_process(
            &out,
            &[
                "--rows",
                rows,
                "--iterations",
                "1",
                "--warmup",
                "0",
                "--rounds",
                "1",
            ],
        );
        assert_matches_schema(&out);
        // Every scenario verified exactly at both sizes (an answer that differs is `invalid`).
        for cell in &report.cells {
            assert_eq!(cell.status, Status::Ok, "{rows}: {cell:?}");
        }
        let memory = &json["extra"]["client_memory"];
        let peak = memory["peak_rss_bytes"].as_u64().unwrap();
        let sqlite = memory["engine_heap_peak_bytes"]["sqlite"].as_u64().unwrap();
        let data = json["data"]["description"].as_str().unwrap().to_owned();
        eprintln!("{rows} rows: peak RSS {peak} bytes, SQLite's own heap {sqlite} bytes ({data})");
        peaks.push((rows.parse::<u64>().unwrap(), peak, sqlite));
    }
    let ((small_rows, small, _), (large_rows, large, _)) = (peaks[0], peaks[1]);
    // What the records themselves add between the two sizes (fill and append, about 565 bytes
    // a document): the client that held them grew by about 2.7 KB a record.
    let data_growth = 2 * (large_rows - small_rows) * 565;
    let growth = large.saturating_sub(small);
    assert!(
        growth < 16 << 20 && growth * 8 < data_growth,
        "the client grew by {growth} bytes from {small_rows} to {large_rows} rows ({small} → {large}); the data grew by {data_growth}"
    );
}

#[test]
fn a_record_moved_in_the_listing_or_swapped_out_of_view_is_invalid_at_the_larger_size() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    // The first visible record inserted is moved to the top of the sorted listing; the next
    // visible one is soft-deleted and the first deleted one restored, which leaves the count
    // as it was and changes which records the account sees.
    let setup = format!(
        "CREATE TABLE public.tampered (what text PRIMARY KEY);
         CREATE FUNCTION tamper() RETURNS trigger LANGUAGE plpgsql AS $$
           DECLARE visible boolean := NEW.doc->>'_account_id' = 'acct-main';
           BEGIN
             IF visible AND (NEW.doc->>'_deleted')::boolean THEN
               IF NOT EXISTS (SELECT 1 FROM public.tampered WHERE what = 'restored') THEN
                 INSERT INTO public.tampered VALUES ('restored');
                 NEW.doc := jsonb_set(NEW.doc, '{{_deleted}}', 'false');
               END IF;
             ELSIF visible THEN
               IF NOT EXISTS (SELECT 1 FROM public.tampered WHERE what = 'moved') THEN
                 INSERT INTO public.tampered VALUES ('moved');
                 NEW.doc := jsonb_set(NEW.doc, '{{_created_at}}', '\"2099-01-01T00:00:00.000Z\"');
               ELSIF NOT EXISTS (SELECT 1 FROM public.tampered WHERE what = 'hidden') THEN
                 INSERT INTO public.tampered VALUES ('hidden');
                 NEW.doc := jsonb_set(NEW.doc, '{{_deleted}}', 'true');
               END IF;
             END IF;
             RETURN NEW;
           END $$;
         {}",
        before_each_insert("tamper")
    );
    let db = Scratch::new(&pg, "fairbench_tampered", &setup);
    let target = format!("tampered={}", db.url);
    let summary = app(
        dir.path(),
        &[
            "--target",
            &target,
            "--rows",
            SIZES[1],
            "--batch",
            "5000",
            "--rounds",
            "1",
            "--iterations",
            "1",
            "--scenarios",
            "first-page,deep-page,count,load-all",
        ],
    )
    .unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::NotAllOk);
    assert_eq!(psql(&db.url, "SELECT count(*) FROM public.tampered"), "3");
    // The count cannot see it: one record out of view, one into it.
    assert_eq!(cell(report, "count", "tampered").status, Status::Ok);
    for scenario in ["first-page", "deep-page", "load-all"] {
        let tampered = cell(report, scenario, "tampered");
        assert_eq!(tampered.status, Status::Invalid, "{scenario}: {tampered:?}");
        // As many rows as expected, other ids: only the digest tells.
        let rows = tampered.extra["rows"].as_u64().unwrap();
        let reason = tampered.reason.as_deref().unwrap();
        assert!(
            reason.contains(&format!("returned {rows} rows"))
                && reason.contains(&format!("gives {rows} (digest")),
            "{scenario}: {reason}"
        );
        assert!(
            tampered.latency_ns.is_none(),
            "an invalid cell gets no time"
        );
    }
}
