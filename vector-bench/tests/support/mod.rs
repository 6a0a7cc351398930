//! What the integration tests share: the servers the test command started, a lock so tests
//! that use the same server do not run at once, and running vector-bench in-process.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use vector_bench::{Opts, Summary};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{assert_matches_schema, cell, lock_servers, read_json, server_url};

/// Runs `vector-bench ARGS…` in-process.
pub fn run(args: &[&str]) -> anyhow::Result<Summary> {
    let interrupt = Arc::new(AtomicBool::new(false));
    common::testing::run_args::<Opts>(
        "vector-bench",
        args,
        interrupt,
        vector_bench::run_with_interrupt,
    )
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

/// `--cache-dir CACHE --output DIR --quiet`, the quick settings, then `extra` (which overrides
/// them).
pub fn args<'a>(output: &'a Path, cache: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let prefix = ["--cache-dir", cache.to_str().expect("a UTF-8 path")];
    common::testing::quick_args(&prefix, output, QUICK, extra)
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn recall(cell: &common::results::Cell) -> f64 {
    cell.extra["recall"].as_f64().expect("a recall")
}
