//! `sql-bench crud` as several client machines of one run (two workers' worth, in-process, on
//! loopback) against the real PostgreSQL (an embedded SQLite cannot be shared by workers): a
//! worker interrupted (Ctrl-C) stops every worker at the next meeting as an interrupted run
//! stops, whose parts `merge` refuses, and whose tables worker 0 drops all the same.

mod support;

use common::testing::workers::{assert_interrupted_and_unmerged, in_threads, with_one_interrupted};
use support::*;

/// Worker 1 is interrupted once it has measured a round of the write workload (whose windows
/// have a second meeting, for worker 0's count of the rows): at the next meeting every worker
/// stops as an interrupted run does, keeping what it measured, and `merge` refuses the parts.
#[test]
fn a_worker_interrupted_stops_every_worker_as_an_interrupted_run_and_nothing_is_merged() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let settings = format!(
        "--target {pg} --workloads write-2c,read-2c --warmup 1 --rounds 40 --duration 200ms \
         --barrier-timeout 20s"
    );
    let (parts, seen) = with_one_interrupted(dir.path(), (2, 1), "write 2c", |flags| {
        in_threads(
            dir.path(),
            (2, &[0, 1]),
            "crud-test-1",
            &settings,
            flags,
            |out, a, flag| run_with(&args("crud", out, a), flag),
        )
    });
    assert_interrupted_and_unmerged(&parts, &seen, "sql-bench", &sql_bench::REPORT);
    // Stopped at the barrier, worker 0 still drops the tables it made.
    let left = psql(
        &pg,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench' AND tablename LIKE 'crud_%'",
    );
    assert_eq!(left, "0", "fairbench's crud tables are left behind");
}
