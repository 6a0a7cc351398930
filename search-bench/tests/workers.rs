//! search-bench as several client machines of one run (two or three worker processes' worth,
//! in-process, on loopback) against the real OpenSearch: worker 0 alone creates the index and
//! verifies the answers, each worker sends its share of the documents, every window opens at
//! the barrier, the connections are shared and `merge` adds the workers' figures exactly; a worker that never comes stops the others with the barrier's
//! error; what several workers cannot share is refused with one line and exit 2.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::results::{Report, Status};
use common::testing::free_port;
use common::testing::workers::{
    assert_exact_sum, assert_stopped_and_unmerged, in_threads, merge_in_process,
};
use support::*;

/// Runs workers `indexes` of `count` in threads of their own; each result with its folder.
fn workers(
    root: &Path,
    url: &str,
    count: u32,
    indexes: &[u32],
    extra: &[&str],
) -> Vec<(PathBuf, anyhow::Result<search_bench::Summary>)> {
    let settings = format!(
        "--target {url} --index fairbench_workers {}",
        extra.join(" ")
    );
    in_threads(
        root,
        (count, indexes),
        "search-test-1",
        &settings,
        &[],
        |out, a, _| run(&args(out, a)),
    )
}

#[test]
fn two_workers_make_one_run_whose_figures_are_the_exact_sum() {
    let Some((url, dir)) = on_server(OPENSEARCH) else {
        return;
    };
    let extra = ["--batch", "250", "--barrier-timeout", "30s"];
    let parts = workers(dir.path(), &url, 2, &[0, 1], &extra);
    let mut reports = Vec::new();
    for (out, result) in &parts {
        let summary = result.as_ref().unwrap_or_else(|e| panic!("{e:#}"));
        assert_matches_schema(out);
        let barrier = summary.report.worker.as_ref().unwrap().barrier.clone();
        // 5 workloads × (1 warm-up + 2 rounds), a second meeting after each of the 3 ingest
        // windows (worker 0 counts), and the closing one.
        assert_eq!(barrier.unwrap().windows, 5 * 3 + 3 + 1);
        reports.push(summary.report.clone());
    }
    // One clock on one host: the windows opened together.
    common::testing::workers::assert_opened_together(&[&reports[0], &reports[1]]);
    // Only worker 0 created the index (its settings read back) and verified the answers.
    let verified = |r: &Report| r.systems[0].verified.contains_key("mapping.body");
    assert!(verified(&reports[0]) && !verified(&reports[1]));
    for c in reports[0].cells.iter().skip(1) {
        assert_eq!(c.extra["queries_verified"], 48, "{}", c.workload);
    }
    let part = &reports[1];
    assert!(
        part.cells
            .iter()
            .all(|c| !c.extra.contains_key("queries_verified"))
    );
    assert!(
        part.notes
            .iter()
            .any(|n| n.contains("only sent its share of the load"))
    );
    // Each worker sent half the 12 bodies of each round (2 measured rounds of 3,000
    // documents); worker 0 counted every round's index against both workers' documents.
    let ingest: Vec<u64> = reports.iter().map(|r| r.cells[0].counts.ok).collect();
    assert_eq!(ingest, [3_000, 3_000], "{}", reports[0].cells[0].workload);
    for (r, report) in reports.iter().enumerate() {
        for c in &report.cells {
            assert_eq!(
                c.connections, 2,
                "worker {r} {}: 4 connections shared",
                c.workload
            );
            assert_eq!(c.status, Status::Ok, "worker {r}: {:?}", c.reason);
        }
    }
    let report = &search_bench::report::SearchReport;
    let (merged_dir, merged) = merge_in_process(&parts, "search-bench", report);
    assert_matches_schema(&merged_dir);
    assert_eq!((merged.workers.len(), merged.cells.len()), (2, 5));
    assert_eq!(
        merged.cells[0].counts.ok,
        2 * 3_000,
        "every document once a round"
    );
    for (i, c) in merged.cells.iter().enumerate() {
        assert_exact_sum(c, &[&reports[0].cells[i], &reports[1].cells[i]]);
        assert_eq!(c.connections, 4);
    }
    let (status, _) = http("GET", &format!("{url}/fairbench_workers"), None);
    assert_eq!(
        status, 404,
        "worker 0 deletes the index after the closing meeting"
    );
}

#[test]
fn a_worker_that_never_comes_stops_the_others_with_the_barrier_error() {
    let Some((url, dir)) = on_server(OPENSEARCH) else {
        return;
    };
    // Worker 2 of 3 is never started (its pod was killed before the barrier).
    let quick = [
        "--docs",
        "500",
        "--queries",
        "16",
        "--barrier-timeout",
        "4s",
    ];
    let parts = workers(dir.path(), &url, 3, &[0, 1], &quick);
    let report = &search_bench::report::SearchReport;
    assert_stopped_and_unmerged(&parts, "worker(s) 2", 3, "search-bench", report);
}

/// The binary with `extra` as one of two workers: its exit code and its stderr.
fn refused(out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let barrier = format!("127.0.0.1:{}", free_port());
    let output = Command::new(env!("CARGO_BIN_EXE_search-bench"))
        .args(["--quiet", "--output", out.to_str().unwrap()])
        .args(["--worker-count", "2", "--worker-index", "0"])
        .args(["--run-id", "r1", "--barrier", &barrier])
        .args(extra)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn what_several_workers_cannot_share_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    // The default target is the embedded tantivy index: each process would hold its own.
    let (code, stderr) = refused(&out, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("embedded tantivy index"), "{stderr}");
    let server = ["--target", "http://127.0.0.1:9"];
    let (code, stderr) = refused(&out, &[&server[..], &["--ingest-threads", "1"]].concat());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("1 ingest threads cannot be shared by 2 workers"),
        "{stderr}"
    );
    let (code, stderr) = refused(
        &out,
        &[
            "--target",
            "http://127.0.0.1:9",
            "--workloads",
            "bool",
            "--connections",
            "1",
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("1 connections cannot be shared by 2 workers"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is made");
}
