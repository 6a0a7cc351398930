//! What the integration tests share: the real servers the test command started (each test
//! holding them to itself: `on_server`), and running geo-bench in-process.

#![allow(dead_code)]

use std::path::Path;

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{assert_matches_schema, on_server, on_servers, psql, read_json};

/// The URL of a database with PostGIS enabled on the test PostgreSQL at `url` (made the first
/// time, then kept).
pub fn postgis_database(url: &str) -> String {
    let database = "fairbench_geo_test";
    let exists = psql(
        url,
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{database}'"),
    );
    if exists == "0" {
        psql(url, &format!("CREATE DATABASE {database}"));
    }
    let own = common::testing::with_database(url, database);
    psql(&own, "CREATE EXTENSION IF NOT EXISTS postgis");
    own
}

common::in_process_runs!("geo-bench", geo_bench);

/// Short windows and a few thousand events, so a run takes seconds.
pub const QUICK: &str =
    "--duration 150ms --rounds 1 --warmup 1 --connections 2 --events 3000 --queries 25";

/// `--output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    common::testing::quick_args(&[], output, &common::testing::words(QUICK), extra)
}

/// `redis-cli` against the Redis of `url` (its host and port); its answer.
pub fn redis_cli(url: &str, command: &[&str]) -> String {
    let (host, port) = common::urlparts::host_port(url).expect("a host");
    let port = port.expect("a port").to_string();
    common::testing::client_output(
        std::process::Command::new("redis-cli")
            .args(["-h", &host, "-p", &port])
            .args(command),
    )
}
