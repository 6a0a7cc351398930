//! What the integration tests share: the real servers the test command started, a lock so
//! tests that use the same server do not run at once, and running sql-bench in-process.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use sql_bench::{Opts, Summary};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{lock_servers, server_url, servers_required};

pub fn postgres_url() -> Option<String> {
    server_url("FAIRBENCH_TEST_POSTGRES_URL")
}

pub fn mysql_url() -> Option<String> {
    server_url("FAIRBENCH_TEST_MYSQL_URL")
}

/// FerretDB (MongoDB wire protocol) on a PostgreSQL of its own.
pub fn ferretdb_url() -> Option<String> {
    server_url("FAIRBENCH_TEST_FERRETDB_URL")
}

/// Apache Cassandra (CQL).
pub fn cassandra_url() -> Option<String> {
    server_url("FAIRBENCH_TEST_CASSANDRA_URL")
}

/// pouchdb-server (the CouchDB HTTP API).
pub fn pouchdb_url() -> Option<String> {
    server_url("FAIRBENCH_TEST_POUCHDB_URL")
}

/// Replaces the database of a URL (`…/postgres` → `…/other`).
pub fn with_database(url: &str, database: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{base}/{database}")
}

/// Replaces the password of a URL.
pub fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

/// Runs `future` to completion on a runtime of its own (for a test's own client calls; a
/// client lives on the runtime it was made on, so make and use it inside one call).
pub fn block_on<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Runs `sql-bench ARGS…` in-process.
pub fn run(args: &[&str]) -> anyhow::Result<Summary> {
    run_with(args, Arc::new(AtomicBool::new(false)))
}

pub fn run_with(args: &[&str], interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let mut argv = vec!["sql-bench"];
    argv.extend_from_slice(args);
    let opts = Opts::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    sql_bench::run_with_interrupt(opts, interrupt)
}

/// Short windows so a whole suite takes seconds.
pub const QUICK: &[&str] = &[
    "--duration",
    "300ms",
    "--rounds",
    "2",
    "--warmup",
    "1",
    "--connections",
    "4",
];

/// `SUITE --output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(suite: &'a str, output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![suite, "--output", output.to_str().unwrap(), "--quiet"];
    for pair in QUICK.chunks(2) {
        if !extra.contains(&pair[0]) {
            all.extend_from_slice(pair);
        }
    }
    all.extend_from_slice(extra);
    all
}

/// `app` on `rows` records with one round of two measured iterations after one warm-up (the
/// smallest run that still verifies every scenario), then `extra`.
pub fn small_app<'a>(output: &'a Path, rows: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "app",
        "--output",
        output.to_str().unwrap(),
        "--quiet",
        "--rows",
        rows,
        "--iterations",
        "2",
        "--warmup",
        "1",
        "--rounds",
        "1",
    ];
    all.extend_from_slice(extra);
    all
}

/// Runs SQL against a PostgreSQL server with the `psql` the server package installs.
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

/// Runs SQL against a MariaDB/MySQL server with the `mariadb` client.
pub fn mariadb(url: &str, sql: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let (userinfo, hostpart) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let hostport = hostpart.split('/').next().unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    let out = std::process::Command::new("mariadb")
        .args([
            "--no-defaults",
            "-h",
            host,
            "-P",
            port,
            "-u",
            user,
            &format!("-p{password}"),
            "-N",
            "-B",
            "-e",
            sql,
        ])
        .output()
        .expect("the mariadb client runs");
    assert!(
        out.status.success(),
        "mariadb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json exists");
    serde_json::from_str(&text).expect("results.json parses")
}
