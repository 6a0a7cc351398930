//! vector-bench as several client machines of one run (two worker processes' worth, in
//! threads, on loopback) against the real pgvector: worker 0 alone builds each index and runs
//! the latency pass, the other reads the index back and searches it, every round opens at the
//! barrier, and `merge` adds their figures exactly; a worker that never comes stops the others
//! with the barrier's code; an embedded index is refused.

mod support;

use std::path::{Path, PathBuf};

use common::histogram::decode_histogram;
use common::results::{Cell, Report, Status};
use common::testing::workers::{assert_stopped_and_unmerged, in_threads, merge_in_process};
use support::*;

/// Runs workers `indexes` of `count` in threads of their own; each result with its folder.
fn workers(
    root: &Path,
    target: &str,
    count: u32,
    indexes: &[u32],
) -> Vec<(PathBuf, anyhow::Result<vector_bench::Summary>)> {
    let cache = root.join("cache");
    let settings = format!(
        "--target {target} --rows 2000 --dims 24 --queries 40 --ef 16,48 --variants f32,binary \
         --filters none --connections 4 --barrier-timeout 5s"
    );
    in_threads(
        root,
        (count, indexes),
        "vector-test-1",
        &settings,
        &[],
        |out, a, _| run(&args(out, &cache, a)),
    )
}

fn histogram(text: &str) -> hdrhistogram::Histogram<u64> {
    decode_histogram(text).unwrap()
}

/// The window's latency at --connections, which vector-bench keeps in `extra`.
fn at_connections(cell: &Cell) -> hdrhistogram::Histogram<u64> {
    histogram(
        cell.extra["latency_at_connections_histogram_b64"]
            .as_str()
            .unwrap(),
    )
}

fn builds(report: &Report) -> &Vec<serde_json::Value> {
    report.extra["builds"].as_array().unwrap()
}

#[test]
fn two_vector_workers_make_one_run_built_and_scored_once() {
    let Some((pg, dir)) = on_server("FAIRBENCH_TEST_PGVECTOR_URL") else {
        return;
    };
    let target = format!("pgvector={pg}");
    let parts = workers(dir.path(), &target, 2, &[0, 1]);
    let mut reports = Vec::new();
    for (out, result) in &parts {
        let summary = result.as_ref().unwrap_or_else(|e| panic!("{e:#}"));
        assert_matches_schema(out);
        reports.push(summary.report.clone());
    }
    let (first, second) = (&reports[0], &reports[1]);
    // Worker 0 built both variants; worker 1 read each back and searched it.
    assert!(builds(first).iter().all(|b| b.get("build").is_some()));
    assert!(builds(second).iter().all(|b| b["built_by_worker"] == 0
        && b.get("build").is_none()
        && b["verified"]["rows"] == "2000"));
    common::testing::workers::assert_opened_together(&[first, second]);
    let (merged_dir, merged) =
        merge_in_process(&parts, "vector-bench", &vector_bench::report::VectorReport);
    assert_matches_schema(&merged_dir);
    assert_eq!(merged.cells.len(), first.cells.len());
    for (i, c) in merged.cells.iter().enumerate() {
        let (a, b) = (&first.cells[i], &second.cells[i]);
        let w = format!("{} · {}", c.workload, c.system);
        assert_eq!(c.status, Status::Ok, "{w}: {:?}", c.reason);
        assert_eq!(
            (a.connections, b.connections, c.connections),
            (2, 2, 4),
            "{w}"
        );
        // The latency pass (concurrency 1) and its recall are worker 0's alone.
        assert!(b.latency_ns.is_none() && b.extra["recall"].is_null(), "{w}");
        let pass = |x: &Cell| histogram(x.histogram_b64.as_ref().unwrap());
        assert_eq!(pass(c), pass(a), "{w}");
        assert_eq!(c.extra["recall"], a.extra["recall"], "{w}");
        // The QPS windows: every worker's queries, added exactly.
        assert_eq!(c.counts.ok, a.counts.ok + b.counts.ok, "{w}");
        assert!(a.counts.ok > 0 && b.counts.ok > 0, "{w}");
        let mut expected = at_connections(a);
        expected.auto(true);
        expected.add(at_connections(b)).unwrap();
        assert_eq!(at_connections(c), expected, "{w}");
        assert_eq!(
            c.extra["latency_at_connections_ns"]["p99"],
            expected.value_at_quantile(0.99),
            "{w}"
        );
    }
}

#[test]
fn a_vector_worker_that_never_comes_stops_the_others_and_an_embedded_index_is_refused() {
    let Some((pg, dir)) = on_server("FAIRBENCH_TEST_PGVECTOR_URL") else {
        return;
    };
    let target = format!("pgvector={pg}");
    // Worker 1 of 2 is never started (its pod was killed before the barrier).
    let parts = workers(dir.path(), &target, 2, &[0]);
    let report = &vector_bench::report::VectorReport;
    assert_stopped_and_unmerged(&parts, "worker(s) 1", 2, "vector-bench", report);
    let embedded = workers(&dir.path().join("embedded"), "usearch", 2, &[0]);
    let Err(error) = embedded[0].1.as_ref() else {
        panic!("an embedded index was to be refused")
    };
    let error = format!("{error:#}");
    assert!(
        error.starts_with("usearch: an embedded index lives inside each worker's process"),
        "{error}"
    );
    assert!(!error.contains('\n'));
    assert!(!embedded[0].0.exists(), "nothing left behind");
}
