//! What the integration tests share: the real servers the test command started (common's
//! test support: their URLs with the servers held for one test, the servers-required check,
//! psql, the schema check), running sql-bench in-process, the MariaDB client calls tests make,
//! the app's collection opened on a server and the indexes it must show, and a PostgreSQL of a
//! test's own that it crashes mid-run ([`DoomedPostgres`]).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sql_bench::suites::app::COLLECTION;

mod doomed;

#[allow(unused_imports)]
pub use doomed::{DoomedPostgres, any_cell};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::exit::Exit;
#[allow(unused_imports)]
pub use common::testing::{
    assert_matches_schema, block_on, lock_servers, on_server, on_servers, psql, read_json,
    server_url, servers_required, with_database,
};

/// Where the test command exports the URL of each server (for [`on_server`]).
pub const POSTGRES: &str = "FAIRBENCH_TEST_POSTGRES_URL";
pub const MYSQL: &str = "FAIRBENCH_TEST_MYSQL_URL";
/// FerretDB (MongoDB wire protocol) on a PostgreSQL of its own.
pub const FERRETDB: &str = "FAIRBENCH_TEST_FERRETDB_URL";
/// Apache Cassandra (CQL).
pub const CASSANDRA: &str = "FAIRBENCH_TEST_CASSANDRA_URL";
/// pouchdb-server (the CouchDB HTTP API).
pub const POUCHDB: &str = "FAIRBENCH_TEST_POUCHDB_URL";

/// The target at `url` opened as `sql-bench app` opens it (described at C0) with the app's
/// collection made: for a test that then changes the collection behind fairbench's back.
pub async fn open_app_collection(url: &str) -> Box<dyn sql_bench::targets::Target> {
    let spec = common::options::TargetSpec::parse(url).unwrap();
    let reach = sql_bench::targets::Reach::local(Path::new("/tmp"));
    let mut target = sql_bench::targets::open(&spec, &reach).await.unwrap();
    target
        .describe(sql_bench::durability::Durability::C0)
        .await
        .unwrap();
    target.create_collection(&COLLECTION).await.unwrap();
    target
}

/// Fails the test unless `system` read back an index on each field the app's collection
/// declares indexed, and no index besides.
pub fn assert_declared_indexes(system: &common::results::SystemInfo) {
    assert_eq!(system.verified["app_records.extra_indexes"], "none");
    let indexes = &system.verified["app_records.indexes"];
    for field in COLLECTION.indexed {
        assert!(
            indexes.contains(&format!("({field})")),
            "{field}: {indexes}"
        );
    }
}

/// Replaces the password of a URL.
pub fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

common::in_process_runs!("sql-bench", sql_bench);

/// Short windows so a whole suite takes seconds.
pub const QUICK: &str = "--duration 300ms --rounds 2 --warmup 1 --connections 4";

/// `SUITE --output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(suite: &'a str, output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    common::testing::quick_args(&[suite], output, &common::testing::words(QUICK), extra)
}

/// `app` on `rows` records with one round of two measured iterations after one warm-up (the
/// smallest run that still verifies every scenario), in batches of 250 (so the writes have
/// timed batches after their warm-up one), then `extra`.
pub fn small_app<'a>(output: &'a Path, rows: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let small = [
        "--rows",
        rows,
        "--batch",
        "250",
        "--iterations",
        "2",
        "--warmup",
        "1",
        "--rounds",
        "1",
    ];
    let mut all = common::testing::quick_args(&["app"], output, &small, &[]);
    all.extend_from_slice(extra);
    all
}

/// Runs SQL against a MariaDB/MySQL server with the `mariadb` client.
pub fn mariadb(url: &str, sql: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let (userinfo, hostpart) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let hostport = hostpart.split('/').next().unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    common::testing::client_output(std::process::Command::new("mariadb").args([
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
    ]))
}

pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}
