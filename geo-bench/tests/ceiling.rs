//! The per-operation ceiling on the embedded SQLite: an insert still running at `--ceiling` is
//! interrupted (its transaction rolled back), counted as a timeout, and the same worker goes on
//! with the next one; the cell ends as `timeout`, the run goes on to the next workload and
//! exits 1 with everything written.

mod support;

use std::time::{Duration, Instant};

use common::exit::Exit;
use common::results::Status;
use common::testing::scratch::{Scratch, on_create};
use support::*;

/// A warm-up window of 100,000-event inserts on one client under a 50 ms ceiling, then the
/// queries. The ceiling passes while the rows go in: `sqlite3_interrupt` stops the statement
/// running and SQLite rolls the transaction back. (One that passes while the batch is still
/// being filled is the unit test beside the target: here it would be a matter of timing.)
#[test]
fn an_insert_past_the_ceiling_is_interrupted_and_the_worker_carries_on() {
    let ceiling = "50ms";
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // One request of 100,000 events takes far longer than the ceiling (seconds in a debug
    // build); with one client, a 300 ms warm-up window holds several of them only if each is
    // stopped at the ceiling and the worker goes on with the same session.
    let started = Instant::now();
    let summary = run(&args(
        &out,
        &[
            "--workloads",
            "insert,query",
            "--batch-sizes",
            "100000",
            "--clients",
            "1",
            "--duration",
            "300ms",
            "--ceiling",
            ceiling,
        ],
    ))
    .unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::NotAllOk);
    let insert = &report.cells[0];
    assert_eq!(insert.workload, "insert b100000 c1");
    assert_eq!(insert.status, Status::Timeout, "{insert:?}");
    let reason = insert.reason.as_deref().unwrap();
    let suffix = format!(" operations still running {ceiling} after they started were cancelled");
    let cancelled: u64 = reason
        .strip_prefix("warm-up 1: ")
        .and_then(|r| r.strip_suffix(suffix.as_str()))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{reason}"));
    assert!(
        cancelled >= 3,
        "one worker, one insert stopped after another: {reason}"
    );
    // The cell ended there: no measured round was run on it. Every stopped insert was rolled
    // back (the window's count of the insert set would have marked the cell invalid).
    assert!(insert.throughput.is_none(), "{insert:?}");
    assert_eq!(insert.counts.ok, 0, "{insert:?}");
    // The run went on: the queries ran on the same sessions, the interrupted one included,
    // with no error (a query of a loaded host may pass the ceiling too: a timeout).
    let queries: Vec<_> = report.cells[1..].iter().collect();
    assert_eq!(queries.len(), 4, "{queries:#?}");
    for cell in queries {
        assert!(
            matches!(cell.status, Status::Ok | Status::Timeout),
            "{cell:?}"
        );
        assert_eq!(cell.counts.error, 0, "{cell:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // Everything is written: the timeout with its reason, in results.json and report.md.
    assert_matches_schema(&out);
    let json = read_json(&out);
    assert_eq!(json["options"]["ceiling_s"], 0.05);
    assert_eq!(json["cells"][0]["status"], "timeout");
    assert_eq!(json["cells"][0]["reason"], reason);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains(reason), "{markdown}");
}

const SLOW_DATABASE: &str = "fairbench_geo_slow";

/// PostGIS, and a 30 s sleep in every insert into geo-bench's insert table.
fn slow_inserts() -> String {
    let attach = on_create(
        "CREATE TABLE",
        "IF obj = 'fairbench_geo.inserts' THEN
           EXECUTE 'CREATE TRIGGER slow BEFORE INSERT ON fairbench_geo.inserts FOR EACH STATEMENT EXECUTE FUNCTION public.slow_insert()';
         END IF;",
    );
    format!(
        "CREATE EXTENSION postgis;
         CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$;
         {attach}"
    )
}

/// On PostGIS an insert still running at the ceiling is stopped on the server with
/// PostgreSQL's cancel request: the cell is `timeout`, the queries after it run, and no insert
/// of the run is left sleeping in the server once the run is over.
#[test]
fn a_postgis_insert_past_the_ceiling_is_cancelled_on_the_server() {
    let Some((admin, dir)) = on_server("FAIRBENCH_TEST_POSTGRES_URL") else {
        return;
    };
    let slow = Scratch::new(&admin, SLOW_DATABASE, &slow_inserts());
    let out = dir.path().join("run");
    let summary = run(&args(
        &out,
        &[
            "--workloads",
            "insert,query",
            "--batch-sizes",
            "1",
            "--clients",
            "1",
            "--ceiling",
            "1s",
            "--target",
            &slow.url,
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let insert = &summary.report.cells[0];
    assert_eq!(
        (insert.system.as_str(), insert.workload.as_str()),
        ("postgis", "insert b1 c1")
    );
    assert_eq!(insert.status, Status::Timeout, "{insert:?}");
    let reason = insert.reason.as_deref().unwrap();
    assert!(
        reason.contains("operations still running 1s after they started were cancelled"),
        "{reason}"
    );
    for cell in &summary.report.cells[1..] {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
    }
    let sleeping = psql(
        &admin,
        &format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '{SLOW_DATABASE}' \
             AND state = 'active' AND query LIKE 'INSERT INTO fairbench_geo.inserts%'"
        ),
    );
    assert_eq!(sleeping.trim(), "0", "a cancelled insert is still running");
}
