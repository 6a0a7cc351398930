//! What the integration tests share: the real servers the test command started, a lock so
//! tests that use the same server do not run at once, and running geo-bench in-process.

#![allow(dead_code)]

use std::path::Path;

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{assert_matches_schema, lock_servers, psql, read_json, server_url};

/// A database with PostGIS enabled on the test PostgreSQL, created once per test binary.
pub fn postgis_url() -> Option<String> {
    let url = server_url("FAIRBENCH_TEST_POSTGRES_URL")?;
    let database = "fairbench_geo_test";
    let exists = psql(
        &url,
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{database}'"),
    );
    if exists == "0" {
        psql(&url, &format!("CREATE DATABASE {database}"));
    }
    let own = common::testing::with_database(&url, database);
    psql(&own, "CREATE EXTENSION IF NOT EXISTS postgis");
    Some(own)
}

common::in_process_runs!("geo-bench", geo_bench);

/// Short windows and a few thousand events, so a run takes seconds.
pub const QUICK: &str =
    "--duration 150ms --rounds 1 --warmup 1 --connections 2 --events 3000 --queries 25";

/// `--output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    common::testing::quick_args(&[], output, &common::testing::words(QUICK), extra)
}
