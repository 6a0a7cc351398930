//! What the integration tests share: the OpenSearch server the test command started, a lock so
//! tests that use it do not run at once, running search-bench in-process, and plain HTTP calls
//! to set the server up the way a test needs.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use search_bench::{Opts, Summary};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::lock_servers as lock_server;

/// The OpenSearch URL the test command exported, or `None` (with a note) outside CI.
pub fn opensearch_url() -> Option<String> {
    common::testing::server_url("FAIRBENCH_TEST_OPENSEARCH_URL")
}

/// Runs `search-bench ARGS…` in-process.
pub fn run(args: &[&str]) -> anyhow::Result<Summary> {
    run_with(args, Arc::new(AtomicBool::new(false)))
}

/// Runs `search-bench ARGS…` in-process with an interrupt flag the test controls.
pub fn run_with(args: &[&str], interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let mut argv = vec!["search-bench"];
    argv.extend_from_slice(args);
    let opts = Opts::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    search_bench::run_with_interrupt(opts, interrupt)
}

/// A small corpus and short windows, so a whole run takes seconds.
pub const QUICK: &[&str] = &[
    "--docs",
    "3000",
    "--queries",
    "48",
    "--duration",
    "300ms",
    "--rounds",
    "2",
    "--warmup",
    "1",
    "--connections",
    "4",
    "--ingest-threads",
    "4",
];

/// `--output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--output", output.to_str().unwrap(), "--quiet"];
    for pair in QUICK.chunks(2) {
        if !extra.contains(&pair[0]) {
            all.extend_from_slice(pair);
        }
    }
    all.extend_from_slice(extra);
    all
}

/// One HTTP call with curl (the OpenSearch install brings it): status and body.
pub fn http(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    let mut command = std::process::Command::new("curl");
    command.args(["-s", "-X", method, "-w", "\n%{http_code}", url]);
    if let Some(body) = body {
        command.args(["-H", "content-type: application/json", "-d", body]);
    }
    let out = command.output().expect("curl runs");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json exists");
    serde_json::from_str(&text).expect("results.json parses")
}

pub fn cell<'a>(
    report: &'a common::results::Report,
    workload_prefix: &str,
    system: &str,
) -> &'a common::results::Cell {
    report
        .cells
        .iter()
        .find(|c| c.workload.starts_with(workload_prefix) && c.system == system)
        .unwrap_or_else(|| panic!("no cell {workload_prefix}… × {system}"))
}
