//! What the integration tests share: the servers the test command started, a lock so tests
//! that use the same server do not run at once, running vector-bench in-process, and the
//! folders a run writes to.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{assert_matches_schema, cell, lock_servers, read_json, server_url};

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
