//! The `mongodb` target end to end against the FerretDB the test command starts (MongoDB wire
//! protocol over a PostgreSQL of its own): crud and app beside SQLite with the same answers,
//! FerretDB's unreported journal refused unless allowed, indexes read back with listIndexes,
//! and a foreign collection never touched.

mod support;

use common::results::Status;
use mongodb::bson::{Document, doc};
use sql_bench::suites::app::COLLECTION;
use support::*;

/// A client of the test's own, for what fairbench must find (or must not touch) there.
async fn client(url: &str) -> mongodb::Client {
    mongodb::Client::with_uri_str(url).await.unwrap()
}

#[test]
fn ferretdb_without_a_reported_journal_is_refused_unless_allowed() {
    let Some((url, dir)) = on_server(FERRETDB) else {
        return;
    };
    let error = run(&args("crud", dir.path(), &["--target", &url]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("no system can be measured"), "{error}");
    assert!(error.contains("journal not reported"), "{error}");
    assert!(error.contains("FerretDB ignores writeConcern"), "{error}");
}

#[test]
fn ferretdb_runs_crud_beside_sqlite_labelled_with_what_it_reports() {
    let Some((url, dir)) = on_server(FERRETDB) else {
        return;
    };
    let summary = run(&args(
        "crud",
        dir.path(),
        &[
            "--target",
            &url,
            "--target",
            "sqlite",
            "--allow-unmatched-durability",
        ],
    ))
    .unwrap();
    let report = &summary.report;
    assert_matches_schema(dir.path());
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
    }
    let ferret = &report.systems[0];
    assert_eq!(
        ferret.name, "ferretdb",
        "named after what the server reports"
    );
    assert!(
        ferret.version.starts_with("FerretDB v1.24"),
        "{}",
        ferret.version
    );
    assert!(
        ferret.version.contains("presenting MongoDB"),
        "{}",
        ferret.version
    );
    // The label names what does not match, so two engines unmatched differently never share a ratio.
    assert!(
        ferret.labels.len() == 1 && ferret.labels[0].starts_with("unmatched durability ("),
        "{:?}",
        ferret.labels
    );
    assert_eq!(
        ferret.verified["write_concern"],
        "w:1, j:true (sent with every write)"
    );
    assert_eq!(ferret.verified["replSetGetStatus.members"], "1");
    assert_eq!(
        ferret.verified["crud_read.primary_key"],
        "_id (unique index _id_, listIndexes)"
    );
    // Everything fairbench created is gone again, its marker included.
    let names = block_on(async {
        client(&url)
            .await
            .database("fairbench")
            .list_collection_names()
            .await
            .unwrap()
    });
    assert!(
        !names.iter().any(|n| n.starts_with("crud_")),
        "left behind: {names:?}"
    );
}

#[test]
fn ferretdb_answers_every_app_scenario_like_sqlite_with_the_declared_indexes() {
    let Some((url, dir)) = on_server(FERRETDB) else {
        return;
    };
    let summary = run(&small_app(
        dir.path(),
        "2000",
        &[
            "--target",
            "sqlite",
            "--target",
            &url,
            "--allow-unmatched-durability",
        ],
    ))
    .unwrap();
    let report = &summary.report;
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
    }
    // Both engines returned exactly what the generator gives, so they agree with each other.
    for scenario in ["inspection", "deep-page", "range-scan", "load-all"] {
        let digests: Vec<&serde_json::Value> = report
            .cells
            .iter()
            .filter(|c| c.workload == scenario)
            .map(|c| &c.extra["digest"])
            .collect();
        assert_eq!(digests.len(), 2);
        assert_eq!(digests[0], digests[1], "{scenario}");
    }
    let ferret = report
        .systems
        .iter()
        .find(|s| s.name == "ferretdb")
        .unwrap();
    assert_declared_indexes(ferret);
}

#[test]
fn a_missing_index_shows_in_the_catalog_fairbench_reads() {
    let Some((url, _servers)) = on_server(FERRETDB) else {
        return;
    };
    block_on(async {
        let mut target = open_app_collection(&url).await;
        let state = target.inspect_collection(&COLLECTION).await.unwrap();
        assert!(state.missing(&COLLECTION).is_empty(), "{state:?}");
        client(&url)
            .await
            .database("fairbench")
            .collection::<Document>(COLLECTION.name)
            .drop_index("app_records__room_id")
            .await
            .unwrap();
        let state = target.inspect_collection(&COLLECTION).await.unwrap();
        assert_eq!(state.missing(&COLLECTION), ["_room_id"]);
        target.drop_collection(&COLLECTION).await.unwrap();
    });
}

#[test]
fn a_foreign_collection_in_the_namespace_is_refused_and_left_alone() {
    let Some((url, dir)) = on_server(FERRETDB) else {
        return;
    };
    // A client lives on the runtime it was made on: one runtime for every step of the test.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let foreign = runtime.block_on(async {
        let collection = client(&url)
            .await
            .database("fairbench")
            .collection::<Document>("crud_write");
        collection.drop().await.unwrap();
        collection
            .insert_one(doc! {"_id": 1, "mine": true})
            .await
            .unwrap();
        collection
    });
    let error = run(&args(
        "crud",
        dir.path(),
        &["--target", &url, "--allow-unmatched-durability"],
    ))
    .map(|_| ())
    .unwrap_err()
    .to_string();
    runtime.block_on(async {
        assert_eq!(foreign.count_documents(doc! {}).await.unwrap(), 1);
        foreign.drop().await.unwrap();
    });
    assert!(
        error.contains("collection fairbench.crud_write exists but was not created by fairbench"),
        "{error}"
    );
}
