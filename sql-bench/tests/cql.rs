//! The `cql` target end to end against the Apache Cassandra the test command starts: crud and
//! app beside SQLite with the same answers, the emulated pages and the paged count reported as
//! how the engine answered, durability read from the server and the keyspace (a keyspace that
//! skips the commit log is refused), indexes read from system_schema.indexes, and a foreign
//! table never touched.

mod support;

use common::results::{Location, Status};
use common::testing::{assert_all_ok, assert_verified, cell};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use sql_bench::suites::app::COLLECTION;
use support::*;

/// A session of the test's own, for what fairbench must find (or must not touch) there.
async fn session(url: &str) -> Session {
    let node = url.trim_start_matches("cql://").trim_end_matches('/');
    SessionBuilder::new()
        .known_node(node)
        .build()
        .await
        .unwrap()
}

async fn cql(session: &Session, statement: &str) {
    session
        .query_unpaged(statement, ())
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

#[test]
fn cassandra_runs_crud_beside_sqlite_with_verified_durability() {
    let Some((url, dir)) = on_server(CASSANDRA) else {
        return;
    };
    let summary = run(&args(
        "crud",
        dir.path(),
        &["--target", &url, "--target", "sqlite"],
    ))
    .unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, dir.path());
    let cassandra = &report.systems[0];
    assert_eq!(cassandra.name, "cassandra");
    assert!(
        cassandra.version.starts_with("Apache Cassandra 5.0"),
        "{}",
        cassandra.version
    );
    assert_verified(
        cassandra,
        &[
            ("commitlog_sync", "batch"),
            ("consistency", "One (every statement)"),
            ("system.peers", "0"),
            (
                "crud_write.primary_key",
                "k (partition key, system_schema.columns)",
            ),
        ],
    );
    assert!(cassandra.labels.is_empty());
    assert_eq!(cassandra.location, Location::Local);
    assert!(cassandra.durable_write_floor_ns.is_none());
    assert!(
        cassandra.not_measured[0].contains("does not report where it keeps its data"),
        "{:?}",
        cassandra.not_measured
    );
}

#[test]
fn cassandra_answers_every_app_scenario_and_says_how() {
    let Some((url, dir)) = on_server(CASSANDRA) else {
        return;
    };
    let summary = run(&small_app(
        dir.path(),
        "2000",
        &["--target", &url, "--target", "sqlite"],
    ))
    .unwrap();
    let report = &summary.report;
    assert_matches_schema(dir.path());
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
    }
    let cassandra = &report.systems[0];
    assert_declared_indexes(cassandra);
    let how = |scenario: &str| {
        let answered_by = cell(report, scenario, "cassandra").extra.get("answered_by");
        answered_by.map(|v| v.to_string()).unwrap_or_default()
    };
    assert!(
        how("first-page").contains("sorted page: paged through"),
        "{}",
        how("first-page")
    );
    assert!(
        how("deep-page").contains("CQL has no OFFSET"),
        "{}",
        how("deep-page")
    );
    assert!(
        how("count").contains("COUNT(*) answered by the server"),
        "{}",
        how("count")
    );
    assert!(how("point-read").is_empty(), "a key lookup runs as asked");
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        markdown.contains("cassandra · deep-page: sorted page"),
        "{markdown}"
    );
}

#[test]
fn a_paged_count_gives_the_same_exact_answer() {
    let Some((url, dir)) = on_server(CASSANDRA) else {
        return;
    };
    let paged = format!("{}?count=paged", url.trim_end_matches('/'));
    let summary = run(&small_app(
        dir.path(),
        "2000",
        &["--target", &paged, "--scenarios", "count,load-all"],
    ))
    .unwrap();
    let count = cell(&summary.report, "count", "cassandra");
    assert_eq!(count.status, Status::Ok, "{count:?}");
    assert!(
        count.extra["answered_by"][0]
            .as_str()
            .unwrap()
            .starts_with("counted by paging through the matching keys"),
        "{count:?}"
    );
}

#[test]
fn a_keyspace_that_skips_the_commit_log_or_spans_replicas_is_refused() {
    let Some((url, dir)) = on_server(CASSANDRA) else {
        return;
    };
    block_on(async {
        let own = session(&url).await;
        cql(&own, "DROP KEYSPACE IF EXISTS fairbench_nodurable").await;
        cql(
            &own,
            "CREATE KEYSPACE fairbench_nodurable WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 3} AND durable_writes = false",
        )
        .await;
    });
    let target = format!("{}/fairbench_nodurable", url.trim_end_matches('/'));
    let error = run(&args("crud", dir.path(), &["--target", &target]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("durable_writes=false"), "{error}");
    assert!(error.contains("needs replication_factor 1"), "{error}");
    block_on(async { cql(&session(&url).await, "DROP KEYSPACE fairbench_nodurable").await });
}

#[test]
fn a_missing_index_shows_in_system_schema_indexes() {
    let Some((url, _servers)) = on_server(CASSANDRA) else {
        return;
    };
    block_on(async {
        let mut target = open_app_collection(&url).await;
        let state = target.inspect_collection(&COLLECTION).await.unwrap();
        assert!(state.missing(&COLLECTION).is_empty(), "{state:?}");
        assert_eq!(state.rows, 0);
        cql(
            &session(&url).await,
            "DROP INDEX fairbench.app_records_valve_id",
        )
        .await;
        let state = target.inspect_collection(&COLLECTION).await.unwrap();
        assert_eq!(state.missing(&COLLECTION), ["_valve_id"]);
        target.drop_collection(&COLLECTION).await.unwrap();
    });
}

#[test]
fn a_foreign_table_in_the_keyspace_is_refused_and_left_alone() {
    let Some((url, dir)) = on_server(CASSANDRA) else {
        return;
    };
    block_on(async {
        let own = session(&url).await;
        cql(
            &own,
            "CREATE KEYSPACE IF NOT EXISTS fairbench WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
        )
        .await;
        cql(&own, "DROP TABLE IF EXISTS fairbench.crud_read").await;
        cql(
            &own,
            "CREATE TABLE fairbench.crud_read (k bigint PRIMARY KEY, mine text)",
        )
        .await;
        cql(
            &own,
            "INSERT INTO fairbench.crud_read (k, mine) VALUES (1, 'yes')",
        )
        .await;
    });
    let error = run(&args("crud", dir.path(), &["--target", &url]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("table fairbench.crud_read exists but was not created by fairbench"),
        "{error}"
    );
    block_on(async {
        let own = session(&url).await;
        let rows = own
            .query_unpaged("SELECT mine FROM fairbench.crud_read", ())
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .rows_num();
        assert_eq!(rows, 1);
        cql(&own, "DROP TABLE fairbench.crud_read").await;
    });
}
