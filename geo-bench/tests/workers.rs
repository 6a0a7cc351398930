//! geo-bench as several client machines of one run (two or three worker processes' worth,
//! in-process, on loopback) against the real Redis: every window opened by the barrier, every
//! event inserted exactly once across workers, `merge` adding their figures exactly; a worker
//! that never comes stopping the others with the barrier's code; and a worker interrupted
//! (Ctrl-C) stopping every worker at the next meeting as an interrupted run stops, its data
//! dropped all the same.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::results::{Report, Status};
use common::testing::workers::{
    assert_exact_sum, assert_interrupted_and_unmerged, assert_stopped_and_unmerged, in_threads,
    merge_in_process, with_one_interrupted,
};
use geo_bench::report::GeoReport;
use support::*;

/// Runs workers `indexes` of `count` in threads of their own, `rounds` measured rounds each,
/// worker `i` under the interrupt flag `flags[i]` (a flag of its own that nothing sets when
/// there is none); each result with its folder.
fn workers(
    root: &Path,
    redis: &str,
    (count, indexes): (u32, &[u32]),
    rounds: u32,
    flags: &[Arc<AtomicBool>],
) -> Vec<(PathBuf, anyhow::Result<geo_bench::Summary>)> {
    let settings = format!(
        "--target {redis} --workloads insert,query --batch-sizes 10 --clients 4 --connections 4 \
         --rounds {rounds} --duration 300ms --barrier-timeout 3s"
    );
    in_threads(
        root,
        (count, indexes),
        "geo-test-1",
        &settings,
        flags,
        |out, a, flag| run_with(&args(out, a), flag),
    )
}

fn cell<'a>(report: &'a Report, workload: &str) -> &'a common::results::Cell {
    common::testing::cell(report, workload, "redis-volatile")
}

#[test]
fn two_workers_make_one_run_whose_figures_are_the_exact_sum() {
    let Some((redis, dir)) = on_server("FAIRBENCH_TEST_REDIS_URL") else {
        return;
    };
    let parts = workers(dir.path(), &redis, (2, &[0, 1]), 3, &[]);
    let mut reports = Vec::new();
    for (out, result) in &parts {
        let summary = result.as_ref().unwrap_or_else(|e| panic!("{e:#}"));
        assert_matches_schema(out);
        let worker = summary.report.worker.as_ref().expect("a worker block");
        let barrier = worker.barrier.as_ref().unwrap();
        // 5 workloads (insert, id lookup, 2 radii, polygon) × (1 warm-up + 3 rounds), a
        // second meeting after each of the 4 insert windows, and the closing one.
        assert_eq!(barrier.windows, 5 * 4 + 4 + 1, "{barrier:?}");
        reports.push(summary.report.clone());
    }
    // One clock on one host: the windows opened together.
    common::testing::workers::assert_opened_together(&[&reports[0], &reports[1]]);
    for w in ["insert b10 c4", "id lookup c4"] {
        let connections: Vec<u32> = reports.iter().map(|r| cell(r, w).connections).collect();
        assert_eq!(connections, [2, 2], "{w}: the 4 clients are shared");
    }
    // Worker 0 counted the events after each insert window against both workers'
    // acknowledgements: equal, or the cell would be invalid. Every key exactly once.
    let insert = cell(&reports[0], "insert b10 c4");
    assert_eq!(insert.status, Status::Ok, "{:?}", insert.reason);
    let (merged_dir, merged) = merge_in_process(&parts, "geo-bench", &GeoReport);
    assert_matches_schema(&merged_dir);
    assert_eq!(merged.workers.len(), 2);
    assert!(merged.worker.is_none());
    for (i, c) in merged.cells.iter().enumerate() {
        assert_exact_sum(c, &[&reports[0].cells[i], &reports[1].cells[i]]);
    }
}

#[test]
fn a_worker_that_never_comes_stops_the_others_with_the_barrier_code() {
    let Some((redis, dir)) = on_server("FAIRBENCH_TEST_REDIS_URL") else {
        return;
    };
    // Worker 2 of 3 is never started (its pod was killed before the barrier).
    let parts = workers(dir.path(), &redis, (3, &[0, 1]), 3, &[]);
    assert_stopped_and_unmerged(&parts, "worker(s) 2", 3, "geo-bench", &GeoReport);
}

/// Worker 1 is interrupted once it has measured a round of inserts (whose windows have a
/// second meeting, for worker 0's count of the events): at the next meeting every worker stops
/// as an interrupted run does, keeping what it measured, and `merge` refuses the parts.
#[test]
fn a_worker_interrupted_stops_every_worker_as_an_interrupted_run_and_nothing_is_merged() {
    let Some((redis, dir)) = on_server("FAIRBENCH_TEST_REDIS_URL") else {
        return;
    };
    let (parts, seen) = with_one_interrupted(dir.path(), (2, 1), "insert b10 c4", |flags| {
        workers(dir.path(), &redis, (2, &[0, 1]), 40, flags)
    });
    assert_interrupted_and_unmerged(&parts, &seen, "geo-bench", &GeoReport);
    // Stopped at the barrier, worker 0 still drops the keys it made.
    let left = redis_cli(&redis, &["--scan", "--pattern", "fairbench:geo:*"]);
    assert_eq!(left, "", "fairbench's keys are left behind");
}
