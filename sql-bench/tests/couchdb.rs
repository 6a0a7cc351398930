//! The `couchdb` target end to end against the pouchdb-server the test command starts (the
//! CouchDB HTTP API; not Apache CouchDB, and reported as what it is): crud and app beside
//! SQLite with the same answers, underscore fields renamed and restored, a sort without an
//! index refused with the server's words, its unsynced writes refused unless allowed, Mango
//! indexes read back, and a foreign database never touched.

mod support;

use common::results::Status;
use common::testing::cell;
use sql_bench::suites::app::COLLECTION;
use support::*;

/// The server's HTTP base for the test's own requests.
fn http_base(url: &str) -> String {
    url.replacen("couchdb://", "http://", 1)
}

async fn http(method: reqwest::Method, url: &str, body: Option<&str>) -> (u16, String) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[test]
fn pouchdb_server_is_named_as_itself_and_its_unsynced_writes_are_refused_unless_allowed() {
    let Some((url, dir)) = on_server(POUCHDB) else {
        return;
    };
    let error = run(&args("crud", dir.path(), &["--target", &url]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("no system can be measured"), "{error}");
    assert!(error.contains("without an fsync"), "{error}");

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
    let pouch = &report.systems[0];
    assert_eq!(pouch.name, "pouchdb-server", "never published as CouchDB");
    assert!(
        pouch.version.contains("not Apache CouchDB"),
        "{}",
        pouch.version
    );
    // The label names what does not match, so two engines unmatched differently never share a ratio.
    assert!(
        pouch.labels.len() == 1 && pouch.labels[0].starts_with("unmatched durability ("),
        "{:?}",
        pouch.labels
    );
    let (status, _) = block_on(http(
        reqwest::Method::GET,
        &format!("{}/fairbench_crud_write", http_base(&url)),
        None,
    ));
    assert_eq!(status, 404, "fairbench drops what it created");
}

#[test]
fn pouchdb_server_answers_the_app_like_sqlite_and_refuses_an_unindexed_sort() {
    let Some((url, dir)) = on_server(POUCHDB) else {
        return;
    };
    let summary = run(&small_app(
        dir.path(),
        "1000",
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
    assert_eq!(summary.exit, Exit::NotAllOk, "two scenarios are refused");
    for cell in report.cells.iter().filter(|c| c.system == "pouchdb-server") {
        match cell.workload.as_str() {
            "first-page" | "deep-page" => {
                assert_eq!(cell.status, Status::Refused, "{cell:?}");
                let reason = cell.reason.as_deref().unwrap();
                assert!(
                    reason.starts_with("the engine refused the request: HTTP"),
                    "{reason}"
                );
                assert!(reason.contains("sort"), "the server's own words: {reason}");
            }
            _ => assert_eq!(cell.status, Status::Ok, "{cell:?}"),
        }
    }
    let count = cell(report, "count", "pouchdb-server");
    assert!(
        count.extra["answered_by"][0]
            .as_str()
            .unwrap()
            .starts_with("Mango has no count"),
        "{count:?}"
    );
    let pouch = &report.systems[1];
    assert_declared_indexes(pouch);
}

#[test]
fn underscore_fields_are_stored_renamed_and_a_missing_index_shows_in_the_catalog() {
    let Some((url, _servers)) = on_server(POUCHDB) else {
        return;
    };
    block_on(async {
        let mut target = open_app_collection(&url).await;
        let mut session = target.open_doc_session(&COLLECTION).await.unwrap();
        let doc = sql_bench::query::Doc {
            id: "r1".into(),
            json: r#"{"id":"r1","_type":"check","value":2.5}"#.into(),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        session.insert_batch(&[doc], deadline).await.unwrap();
        let base = format!("{}/fairbench_app_records", http_base(&url));
        let (_, stored) = http(reqwest::Method::GET, &format!("{base}/r1"), None).await;
        assert!(stored.contains("\"fb_type\":\"check\""), "{stored}");
        let query = sql_bench::query::Query {
            id: Some("r1".into()),
            ..Default::default()
        };
        let mut found = Vec::new();
        session
            .find(&query, deadline, &mut |doc| found.push(doc.to_owned()))
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        let restored: serde_json::Value = serde_json::from_str(&found[0]).unwrap();
        assert_eq!(
            restored,
            serde_json::json!({"id": "r1", "_type": "check", "value": 2.5}),
            "the stored names are back to the application's"
        );

        let state = target.inspect_collection(&COLLECTION).await.unwrap();
        assert_eq!(state.rows, 1, "design documents are not records");
        assert!(state.missing(&COLLECTION).is_empty(), "{state:?}");
        // Dropping the index's design document drops the index (pouchdb-server answers
        // `DELETE /{db}/_index/…` with a 400 of its own).
        let ddoc = format!("{base}/_design/fairbench_app_records_room_id");
        let (_, body) = http(reqwest::Method::GET, &ddoc, None).await;
        let rev = serde_json::from_str::<serde_json::Value>(&body).unwrap()["_rev"]
            .as_str()
            .unwrap_or_else(|| panic!("no design document: {body}"))
            .to_owned();
        let (status, body) =
            http(reqwest::Method::DELETE, &format!("{ddoc}?rev={rev}"), None).await;
        assert_eq!(status, 200, "{body}");
        let state = target.inspect_collection(&COLLECTION).await.unwrap();
        assert_eq!(state.missing(&COLLECTION), ["_room_id"]);
        target.drop_collection(&COLLECTION).await.unwrap();
    });
}

#[test]
fn a_foreign_database_with_fairbench_s_name_is_refused_and_left_alone() {
    let Some((url, dir)) = on_server(POUCHDB) else {
        return;
    };
    let db = format!("{}/fairbench_crud_read", http_base(&url));
    block_on(async {
        http(reqwest::Method::DELETE, &db, None).await;
        assert_eq!(http(reqwest::Method::PUT, &db, None).await.0, 201);
        let doc = format!("{db}/mine");
        assert_eq!(
            http(reqwest::Method::PUT, &doc, Some("{\"a\":1}")).await.0,
            201
        );
    });
    let error = run(&args(
        "crud",
        dir.path(),
        &["--target", &url, "--allow-unmatched-durability"],
    ))
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("database fairbench_crud_read exists but was not created by fairbench"),
        "{error}"
    );
    block_on(async {
        assert_eq!(
            http(reqwest::Method::GET, &format!("{db}/mine"), None)
                .await
                .0,
            200
        );
        http(reqwest::Method::DELETE, &db, None).await;
    });
}
