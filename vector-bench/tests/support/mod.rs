//! What the integration tests share: the servers the test command started (each test holding
//! them to itself: `on_server`), running vector-bench in-process, and the folders a run writes
//! to.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{
    assert_matches_schema, cell, on_server, on_servers, read_json, server_url,
};

common::in_process_runs!("vector-bench", vector_bench);

/// A small, quick sweep: a few thousand × 32, short windows, two measured rounds.
pub const QUICK: &str = "--rows 3000 --dims 32 --clusters 16 --queries 60 --ef 16,32,64 \
                         --duration 200ms --rounds 2 --warmup 1 --connections 4";

/// `--cache-dir CACHE --output DIR --quiet`, the quick settings, then `extra` (which overrides
/// them).
pub fn args<'a>(output: &'a Path, cache: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let prefix = ["--cache-dir", cache.to_str().expect("a UTF-8 path")];
    common::testing::quick_args(&prefix, output, &common::testing::words(QUICK), extra)
}

/// A folder of the test's own (removed when it goes), and in it where the run writes its
/// results and where the dataset is cached (neither made yet).
pub fn run_folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    (dir, out, cache)
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn recall(cell: &common::results::Cell) -> f64 {
    cell.extra["recall"].as_f64().expect("a recall")
}

/// A sweep a server answers in seconds: 2,000 × 24 rows, 40 queries, ef 16 and 48, two
/// connections.
pub const SMALL: &[&str] = &[
    "--rows",
    "2000",
    "--dims",
    "24",
    "--queries",
    "40",
    "--ef",
    "16,48",
    "--connections",
    "2",
];

/// The pairs of [`SMALL`] that `extra` does not set, then `extra` (which so overrides them).
pub fn with_small<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = SMALL
        .chunks(2)
        .filter(|pair| !extra.contains(&pair[0]))
        .flatten()
        .copied()
        .collect();
    all.extend_from_slice(extra);
    all
}

/// Runs `--target NAME=URL` on [`SMALL`], f32 without filters, with `--ceiling 1us`, so that
/// every search is past the ceiling, and checks what any target must show then: the run exits `NotAllOk`; both ef points were tried, each a `timeout` (no error,
/// no throughput) whose reason names the ceiling; the build ran to its end and was read back.
/// Returns the run's summary for the target's own checks, and the folder that holds it.
pub fn run_past_the_ceiling(
    name: &str,
    url: &str,
    namespace: &str,
) -> (common::run::Summary, tempfile::TempDir, PathBuf) {
    let (dir, out, cache) = run_folders();
    let target = format!("{name}={url}");
    let extra = with_small(&[
        "--target",
        &target,
        "--namespace",
        namespace,
        "--variants",
        "f32",
        "--filters",
        "none",
        "--ceiling",
        "1us",
    ]);
    let summary = run(&args(&out, &cache, &extra)).unwrap();
    assert_eq!(summary.exit, common::exit::Exit::NotAllOk);
    let report = &summary.report;
    let cells: Vec<_> = report.cells.iter().filter(|c| c.system == name).collect();
    assert_eq!(cells.len(), 2, "both ef points were tried: {cells:#?}");
    for cell in &cells {
        assert_eq!(cell.status, common::results::Status::Timeout, "{cell:?}");
        let reason = cell.reason.as_deref().unwrap();
        // Tokio's timer rounds the ceiling up to a millisecond, within which a loopback search
        // of 2,000 rows may end: the first search past it need not be query 0's.
        assert!(
            reason.starts_with("warm-up 1: latency pass: the search of query ")
                && reason.contains("was still running at the ceiling (--ceiling 1µs)"),
            "{reason}"
        );
        assert_eq!(cell.counts.error, 0, "{cell:?}");
        assert!(cell.throughput.is_none(), "{cell:?}");
    }
    // The build's requests are not searches: it ran to the end and was read back.
    assert_eq!(report.systems[0].verified["f32.rows"], "2000");
    (summary, dir, out)
}
