//! What the integration tests share: the real servers the test command started, a lock so
//! tests that use the same server do not run at once, and running geo-bench in-process.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use geo_bench::{Opts, Summary};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{lock_servers, server_url};

/// A database with PostGIS enabled on the test PostgreSQL, created once per test binary.
pub fn postgis_url() -> Option<String> {
    let url = server_url("FAIRBENCH_TEST_POSTGRES_URL")?;
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    let database = "fairbench_geo_test";
    let exists = psql(
        &url,
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{database}'"),
    );
    if exists == "0" {
        psql(&url, &format!("CREATE DATABASE {database}"));
    }
    let own = format!("{base}/{database}");
    psql(&own, "CREATE EXTENSION IF NOT EXISTS postgis");
    Some(own)
}

/// Runs SQL with the `psql` the server package installs.
pub fn psql(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([
            url,
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Runs `geo-bench ARGS…` in-process.
pub fn run(args: &[&str]) -> anyhow::Result<Summary> {
    run_with(args, Arc::new(AtomicBool::new(false)))
}

/// Runs `geo-bench ARGS…` in-process with an interrupt flag the test controls.
pub fn run_with(args: &[&str], interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let mut argv = vec!["geo-bench"];
    argv.extend_from_slice(args);
    let opts = Opts::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    geo_bench::run_with_interrupt(opts, interrupt)
}

/// Short windows and a few thousand events, so a run takes seconds.
pub const QUICK: &[&str] = &[
    "--duration",
    "150ms",
    "--rounds",
    "1",
    "--warmup",
    "1",
    "--connections",
    "2",
    "--events",
    "3000",
    "--queries",
    "25",
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

pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json exists");
    serde_json::from_str(&text).expect("results.json parses")
}
