//! `sql-bench ycsb` as several client machines of one run (three workers' worth, in-process,
//! on loopback) against the real PostgreSQL: each worker loads its range of the records and
//! worker 0 counts them all, workload d's inserts are every worker's own keys (none inserted
//! twice, the table counted against every worker's acknowledgements after each window), every
//! window opened by the barrier, and `merge` adding the figures exactly, per operation too;
//! and a worker interrupted (Ctrl-C) stopping every worker at the next meeting as an
//! interrupted run stops, whose parts `merge` refuses.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::histogram::{add, decode_histogram, new_histogram};
use common::results::{Cell, Report, Status};
use common::testing::workers::{
    assert_exact_sum, assert_interrupted_and_unmerged, assert_opened_together, in_threads,
    merge_in_process, with_one_interrupted,
};
use serde_json::Value;
use support::*;

const RECORDS: u64 = 3_000;

type Part = (PathBuf, anyhow::Result<common::run::Summary>);

/// Runs workers `0..count` in threads of their own, each with its interrupt flag (`flags`,
/// by index) and the run's `settings`; each result with its folder.
fn workers(root: &Path, postgres: &str, flags: &[Arc<AtomicBool>], settings: &[&str]) -> Vec<Part> {
    let indexes: Vec<u32> = (0..flags.len() as u32).collect();
    let settings = format!(
        "--target {postgres} --barrier-timeout 20s {}",
        settings.join(" ")
    );
    in_threads(
        root,
        (flags.len() as u32, &indexes),
        "ycsb-test-1",
        &settings,
        flags,
        |out, a, flag| run_with(&args("ycsb", out, a), flag),
    )
}

fn cell<'a>(report: &'a Report, workload: &str) -> &'a Cell {
    common::testing::cell(report, workload, "postgres")
}

fn op<'a>(cell: &'a Cell, kind: &str) -> &'a Value {
    &cell.extra["operations"][kind]
}

fn count(value: &Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {value}"))
}

#[test]
fn three_workers_load_and_insert_each_key_once_and_merge_into_the_exact_sum() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let flags: Vec<Arc<AtomicBool>> = (0..3).map(|_| Arc::default()).collect();
    let records = RECORDS.to_string();
    let settings = [
        ["--workload", "a,d"],
        ["--records", &records],
        ["--batch", "100"],
        ["--connections", "6"],
        ["--warmup", "0"],
        ["--rounds", "2"],
        ["--duration", "300ms"],
    ];
    let parts = workers(dir.path(), &pg, &flags, settings.as_flattened());
    let mut reports = Vec::new();
    for (out, result) in &parts {
        let summary = result.as_ref().unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
        assert_matches_schema(out);
        let barrier = summary.report.worker.as_ref().unwrap().barrier.clone();
        // The table's meeting; the load, its count and its verdict; 2 workloads × 2 rounds,
        // a second meeting after each of d's 2 windows (it inserts); the closing one.
        assert_eq!(barrier.unwrap().windows, 1 + 3 + 4 + 2 + 1);
        reports.push(summary.report.clone());
    }
    let spread_ns = assert_opened_together(&reports.iter().collect::<Vec<_>>());
    eprintln!("three ycsb workers: windows opened at most {spread_ns} ns apart");
    for w in ["load", "a", "d"] {
        let connections: Vec<u32> = reports.iter().map(|r| cell(r, w).connections).collect();
        assert_eq!(connections, [2, 2, 2], "{w}: the 6 connections are shared");
    }
    // Worker 0 counted the whole table after the load: every key loaded exactly once, and
    // the workers' acknowledged records add up to it.
    let loaded: u64 = reports.iter().map(|r| cell(r, "load").counts.ok).sum();
    assert_eq!(loaded, RECORDS);
    assert_eq!(cell(&reports[0], "load").extra["records_counted"], RECORDS);
    assert!(
        reports
            .iter()
            .all(|r| cell(r, "load").counts.ok == RECORDS / 3)
    );
    // Workload d: no insert failed anywhere (two workers on the same key would fail one with
    // a duplicate key), and after its last window worker 0 counted the loaded records plus
    // every worker's acknowledged inserts (no warm-up: every window is in the figures).
    let inserted: u64 = reports
        .iter()
        .map(|r| count(op(cell(r, "d"), "insert"), "ok"))
        .sum();
    for (i, report) in reports.iter().enumerate() {
        let d = cell(report, "d");
        assert_eq!(
            count(op(d, "insert"), "error"),
            0,
            "worker {i}: {}",
            op(d, "insert")
        );
        assert!(count(op(d, "insert"), "ok") > 0, "worker {i} inserted");
        // `latest` reads this worker's own inserts.
        assert!(d.extra["keys"]["inserted_by_run_share"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(
        cell(&reports[0], "d").extra["records_counted"].as_u64(),
        Some(RECORDS + inserted),
        "worker 0's count is the loaded records and every worker's inserts"
    );

    let (merged_dir, merged) = merge_in_process(&parts, "sql-bench", &sql_bench::REPORT);
    assert_matches_schema(&merged_dir);
    for (i, c) in merged.cells.iter().enumerate() {
        let of_parts: Vec<&Cell> = reports.iter().map(|r| &r.cells[i]).collect();
        assert_exact_sum(c, &of_parts);
    }
    // Each operation's figures are the sum of the workers' too, its histogram exactly.
    let d = cell(&merged, "d");
    assert_eq!(count(op(d, "insert"), "ok"), inserted);
    for kind in ["read", "insert"] {
        let ops: Vec<&Value> = reports.iter().map(|r| op(cell(r, "d"), kind)).collect();
        let ok: u64 = ops.iter().map(|o| count(o, "ok")).sum();
        assert_eq!(count(op(d, kind), "ok"), ok, "{kind}");
        let histogram = |o: &Value| decode_histogram(o["histogram_b64"].as_str().unwrap()).unwrap();
        // Added as the merge adds them: into a histogram that grows to every worker's range.
        let mut expected = new_histogram();
        for o in &ops {
            add(&mut expected, &histogram(o));
        }
        assert_eq!(histogram(op(d, kind)), expected, "{kind}: the exact sum");
        assert_eq!(
            op(d, kind)["latency_ns"]["p99"].as_u64(),
            Some(expected.value_at_quantile(0.99))
        );
    }
    let chosen: u64 = reports
        .iter()
        .map(|r| count(&cell(r, "d").extra["keys"], "chosen"))
        .sum();
    assert_eq!(count(&d.extra["keys"], "chosen"), chosen);
    let shares: f64 = ["read", "insert"]
        .iter()
        .map(|k| op(d, k)["share"].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    assert!(merged.cells.iter().all(|c| c.status == Status::Ok));
    let left = psql(
        &pg,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench' AND tablename = 'ycsb'",
    );
    assert_eq!(
        left, "0",
        "worker 0 dropped the table once every worker was done"
    );
}

/// Worker 1 is interrupted once it has measured a round of workload c: at the next meeting
/// every worker stops as an interrupted run does (no barrier error: the cells measured are
/// kept, the note names worker 1, every export is written, the exit code is the cells'), and
/// `merge` refuses the parts as incomplete.
#[test]
fn a_worker_interrupted_stops_every_worker_as_an_interrupted_run_and_nothing_is_merged() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let settings = [
        ["--workload", "c"],
        ["--records", "1000"],
        ["--connections", "2"],
        ["--rounds", "40"],
        ["--duration", "200ms"],
    ];
    let (parts, seen) = with_one_interrupted(dir.path(), (2, 1), "c", |flags| {
        workers(dir.path(), &pg, flags, settings.as_flattened())
    });
    assert_interrupted_and_unmerged(&parts, &seen, "sql-bench", &sql_bench::REPORT);
    // Stopped at the barrier, worker 0 still drops the table it made.
    let left = psql(
        &pg,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench' AND tablename = 'ycsb'",
    );
    assert_eq!(left, "0", "fairbench's ycsb table is left behind");
}
