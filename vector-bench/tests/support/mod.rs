//! What the integration tests share: the servers the test command started, a lock so tests
//! that use the same server do not run at once, and running vector-bench in-process.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use vector_bench::{Opts, Summary};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{lock_servers, server_url};

/// Runs `vector-bench ARGS…` in-process.
pub fn run(args: &[&str]) -> anyhow::Result<Summary> {
    let mut argv = vec!["vector-bench"];
    argv.extend_from_slice(args);
    let opts = Opts::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    vector_bench::run_with_interrupt(opts, Arc::new(AtomicBool::new(false)))
}

/// A small, quick sweep: a few thousand × 32, short windows, two measured rounds.
pub const QUICK: &[&str] = &[
    "--rows",
    "3000",
    "--dims",
    "32",
    "--clusters",
    "16",
    "--queries",
    "60",
    "--ef",
    "16,32,64",
    "--duration",
    "200ms",
    "--rounds",
    "2",
    "--warmup",
    "1",
    "--connections",
    "4",
];

/// `--output DIR --cache-dir CACHE --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(output: &'a Path, cache: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "--output",
        output.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--quiet",
    ];
    for pair in QUICK.chunks(2) {
        if !extra.contains(&pair[0]) {
            all.extend_from_slice(pair);
        }
    }
    all.extend_from_slice(extra);
    all
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json exists");
    serde_json::from_str(&text).expect("results.json parses")
}

/// The cell of `workload` on `system`.
pub fn cell<'a>(
    report: &'a common::results::Report,
    workload: &str,
    system: &str,
) -> &'a common::results::Cell {
    report
        .cells
        .iter()
        .find(|c| c.workload == workload && c.system == system)
        .unwrap_or_else(|| panic!("no cell {workload} × {system}"))
}

pub fn recall(cell: &common::results::Cell) -> f64 {
    cell.extra["recall"].as_f64().expect("a recall")
}
