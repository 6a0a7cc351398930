//! `search-bench` end to end, in-process: the embedded tantivy default, and tantivy beside the
//! real OpenSearch server the test command starts on loopback, and Elasticsearch beside OpenSearch.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::exit::Exit;
use common::results::{Location, Status};
use common::testing::{assert_all_ok, assert_verified, system_names};
use support::*;

const QUERY_WORKLOADS: [&str; 4] = ["match ", "match_phrase", "bool", "terms agg"];

#[test]
fn the_embedded_default_verifies_and_measures_every_workload() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let summary = run(&args(&out, &["--docs", "2000"])).unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, &out);
    assert_eq!(report.systems.len(), 1);
    let tantivy = &report.systems[0];
    assert_eq!(tantivy.name, "tantivy");
    assert!(
        tantivy.version.starts_with("tantivy 0."),
        "{}",
        tantivy.version
    );
    assert_eq!(tantivy.verified["mapping.category"], "keyword (raw, fast)");
    assert_eq!(tantivy.location, Location::Embedded);
    assert_eq!(
        tantivy.data_dir.as_deref(),
        out.to_str(),
        "the index is made in the results folder"
    );
    assert!(tantivy.durable_write_floor_ns.is_some());
    assert_eq!(report.cells.len(), 5);
    let ingest = cell(report, "_bulk ingest", "tantivy");
    assert_eq!(ingest.unit, "docs/s");
    assert_eq!(
        ingest.counts.ok,
        2 * 2000,
        "warm-up excluded: two rounds of 2,000 documents"
    );
    assert_eq!(
        ingest.extra["refresh_ms_rounds"].as_array().unwrap().len(),
        2
    );
    for prefix in QUERY_WORKLOADS {
        let c = cell(report, prefix, "tantivy");
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert_eq!(c.unit, "q/s");
        assert_eq!(c.extra["queries_verified"], 48);
        assert_eq!(c.throughput.as_ref().unwrap().rounds.len(), 2);
        assert!(c.counts.ok > 0 && c.counts.error == 0);
        assert!(c.latency_ns.unwrap().p99 >= c.latency_ns.unwrap().p50);
        assert!(c.client_cpu_ns_per_op.is_some() && c.histogram_b64.is_some());
    }
    let json = read_json(&out);
    assert_eq!(json["tool"], "search-bench");
    assert_eq!(json["suite"], "search");
    assert_eq!(json["options"]["docs"], 2000);
    assert_eq!(json["options"]["batch"], 1000);
    assert!(json["data"]["checksum"].as_str().unwrap().len() == 16);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("(docs/s)") && markdown.contains("(q/s)"),
        "{markdown}"
    );
    assert!(markdown.contains("**Verification"), "{markdown}");
    assert!(
        !out.join("tantivy-index").exists(),
        "the embedded index is removed unless --keep-index"
    );
}

#[test]
fn opensearch_and_tantivy_agree_on_every_answer_and_compare_in_one_round() {
    let Some((url, dir)) = on_server(OPENSEARCH) else {
        return;
    };
    let summary = run(&args(
        dir.path(),
        &["--target", &url, "--target", "tantivy", "--duration", "1s"],
    ))
    .unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, dir.path());
    assert_eq!(
        system_names(report),
        ["opensearch", "tantivy"],
        "named after what they report"
    );
    assert_eq!(report.reference.as_deref(), Some("opensearch"));
    let opensearch = &report.systems[0];
    assert!(
        opensearch.version.starts_with("OpenSearch 2."),
        "{}",
        opensearch.version
    );
    assert_eq!(opensearch.location, Location::Local);
    let (_, settings) = http("GET", &format!("{url}/_nodes/_local/settings"), None);
    let data_dir = opensearch
        .data_dir
        .as_deref()
        .expect("the node tells its path.data");
    assert!(settings.contains(data_dir), "{data_dir} not in {settings}");
    assert!(
        opensearch.durable_write_floor_ns.is_some() || !opensearch.not_measured.is_empty(),
        "the floor of the server's own data folder is measured, or why not is said"
    );
    assert_verified(
        opensearch,
        &[
            ("index.number_of_shards", "1"),
            ("index.number_of_replicas", "0"),
            ("index.requests.cache.enable", "true"),
            ("index.translog.durability", "request"),
            ("mapping.body", "text"),
            ("mapping.category", "keyword"),
            ("mapping.price", "double"),
            ("mapping.stock", "integer"),
        ],
    );
    for prefix in QUERY_WORKLOADS {
        let os = cell(report, prefix, "opensearch");
        let tv = cell(report, prefix, "tantivy");
        assert_eq!(os.extra["queries_verified"], 48, "{os:?}");
        assert_eq!(tv.extra["queries_verified"], 48, "{tv:?}");
        assert!(
            os.server_cpu_source
                .as_deref()
                .unwrap()
                .starts_with("process tree of PID"),
            "the server's CPU is read: {os:?}"
        );
        assert!(os.server_cpu_ns_per_op.is_some() && os.server_cpu_cores.is_some());
        assert_eq!(tv.server_cpu_source.as_deref(), Some("in process"));
        assert_eq!(tv.server_cpu_ns_per_op, None);
        if prefix != "terms agg" {
            let overlap = &tv.extra["top10_overlap"];
            assert_eq!(overlap["with"], "opensearch");
            let mean = overlap["mean"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&mean), "{overlap}");
        }
    }
    let ingest = cell(report, "_bulk ingest", "opensearch");
    assert!(ingest.server_cpu_ns_per_op.unwrap() > 0.0, "{ingest:?}");
    assert!(ingest.server_cpu_cores.unwrap() > 0.0, "{ingest:?}");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("shard request cache"))
    );
    common::testing::assert_judged_against(report, "opensearch");
    let (status, _) = http("GET", &format!("{url}/fairbench_search"), None);
    assert_eq!(status, 404, "search-bench deletes the index it created");
}

#[test]
fn elasticsearch_is_named_as_itself_and_agrees_with_opensearch_on_every_answer() {
    let Some(([es, os], dir)) = on_servers([ELASTICSEARCH, OPENSEARCH]) else {
        return;
    };
    let summary = run(&args(dir.path(), &["--target", &es, "--target", &os])).unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, dir.path());
    assert_eq!(
        system_names(report),
        ["elasticsearch", "opensearch"],
        "named after what they report"
    );
    let elasticsearch = &report.systems[0];
    assert_eq!(elasticsearch.kind, "elasticsearch");
    assert!(
        elasticsearch.version.starts_with("Elasticsearch 8."),
        "{}",
        elasticsearch.version
    );
    assert_eq!(elasticsearch.location, Location::Local);
    let (_, settings) = http("GET", &format!("{es}/_nodes/_local/settings"), None);
    let data_dir = elasticsearch.data_dir.as_deref().expect("path.data");
    assert!(settings.contains(data_dir), "{data_dir} not in {settings}");
    assert_verified(
        elasticsearch,
        &[
            ("version.build_flavor", "default"),
            ("index.number_of_shards", "1"),
            ("index.number_of_replicas", "0"),
            ("index.requests.cache.enable", "true"),
            ("index.translog.durability", "request"),
            ("mapping.body", "text"),
            ("mapping.category", "keyword"),
            ("mapping.price", "double"),
            ("mapping.stock", "integer"),
        ],
    );
    assert!(
        !elasticsearch.verified.contains_key("version.distribution"),
        "{:?}",
        elasticsearch.verified
    );
    assert_verified(
        &report.systems[1],
        &[("version.distribution", "opensearch")],
    );
    let pid = std::env::var("FAIRBENCH_TEST_ELASTICSEARCH_PID").expect("exported beside the URL");
    for prefix in QUERY_WORKLOADS {
        let es_cell = cell(report, prefix, "elasticsearch");
        let os_cell = cell(report, prefix, "opensearch");
        assert_eq!(es_cell.extra["queries_verified"], 48, "{es_cell:?}");
        assert_eq!(os_cell.extra["queries_verified"], 48, "{os_cell:?}");
        let source = es_cell.server_cpu_source.as_deref().unwrap();
        assert!(
            source.starts_with(&format!("process tree of PID {pid}")),
            "the node's own CPU is read: {source}"
        );
        if prefix != "terms agg" {
            assert_eq!(os_cell.extra["top10_overlap"]["with"], "elasticsearch");
        }
    }
    let ingest = cell(report, "_bulk ingest", "elasticsearch");
    assert_eq!(ingest.status, Status::Ok, "{ingest:?}");
    assert!(ingest.server_cpu_ns_per_op.unwrap() > 0.0, "{ingest:?}");
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        markdown.contains("Elasticsearch 8.") && markdown.contains("OpenSearch 2."),
        "{markdown}"
    );
    let (status, _) = http("GET", &format!("{es}/fairbench_search"), None);
    assert_eq!(status, 404, "search-bench deletes the index it created");
}

#[test]
fn a_server_that_answers_wrongly_gets_invalid_cells_with_an_example() {
    let Some((url, dir)) = on_server(OPENSEARCH) else {
        return;
    };
    // An index template turns the five most frequent terms into stop words for every index
    // named fairbench_lying*: the server then answers those queries with too few hits.
    let vocabulary = search_bench::corpus::Vocabulary::generate(42);
    let stopwords: Vec<&str> = vocabulary.terms[..5].iter().map(String::as_str).collect();
    let template = serde_json::json!({
        "index_patterns": ["fairbench_lying*"],
        "template": {"settings": {"analysis": {"analyzer": {"default": {
            "type": "standard", "stopwords": stopwords}}}}},
    });
    let (status, body) = http(
        "PUT",
        &format!("{url}/_index_template/fairbench_lying"),
        Some(&template.to_string()),
    );
    assert_eq!(status, 200, "{body}");
    let result = run(&args(
        dir.path(),
        &[
            "--target",
            &url,
            "--index",
            "fairbench_lying",
            "--queries",
            "64",
        ],
    ));
    http(
        "DELETE",
        &format!("{url}/_index_template/fairbench_lying"),
        None,
    );
    let summary = result.unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    assert_matches_schema(dir.path());
    let matched = cell(&summary.report, "match ", "opensearch");
    assert_eq!(matched.status, Status::Invalid, "{matched:?}");
    let reason = matched.reason.as_deref().unwrap();
    assert!(reason.contains("total hits 0 (expected"), "{reason}");
    assert!(
        reason.contains("\"match\":{\"body\":"),
        "the example query is shown: {reason}"
    );
    assert!(
        matched.throughput.is_none(),
        "a wrong answer gets no figure"
    );
    let aggregation = cell(&summary.report, "terms agg", "opensearch");
    assert_eq!(
        aggregation.status,
        Status::Ok,
        "high-frequency terms are not stop words"
    );
}

#[test]
fn an_interrupt_stops_the_run_and_keeps_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let setter = flag.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(4));
        setter.store(true, Ordering::SeqCst);
    });
    // Windows of a minute: only the interrupt can end this run early.
    let summary = run_with(
        &args(dir.path(), &["--docs", "1000", "--duration", "60s"]),
        flag,
    )
    .unwrap();
    stopper.join().unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    assert_matches_schema(dir.path());
    let report = &summary.report;
    assert!(
        report.notes.iter().any(|n| n.contains("interrupted")),
        "{:?}",
        report.notes
    );
    assert!(report.finished_at.is_some());
    let unfinished = report
        .cells
        .iter()
        .filter(|c| c.status != Status::Ok)
        .count();
    assert!(unfinished >= 1, "{:#?}", report.cells);
    assert!(read_json(dir.path())["cells"].as_array().unwrap().len() == 5);
}

#[test]
fn an_ingest_past_the_ceiling_is_a_timeout_and_the_run_goes_on_to_the_next_engine() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (first, second) = (dir.path().join("a"), dir.path().join("b"));
    let (first, second) = (
        format!("a=tantivy:{}", first.display()),
        format!("b=tantivy:{}", second.display()),
    );
    // A _bulk body of 1,000 documents takes tantivy milliseconds: every one passes 1 ms.
    let extra = ["--target", &first, "--target", &second, "--ceiling", "1ms"];
    let summary = run(&args(&out, &extra)).unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::NotAllOk);
    assert_matches_schema(&out);
    for system in ["a", "b"] {
        let ingest = cell(report, "_bulk ingest", system);
        assert_eq!(ingest.status, Status::Timeout, "{ingest:?}");
        let reason = ingest.reason.as_deref().unwrap();
        assert!(
            reason.starts_with(
                "warm-up 1: the ingest stopped at a _bulk request still running at the ceiling (--ceiling 1ms); "
            ),
            "{reason}"
        );
        assert!(ingest.throughput.is_none(), "{ingest:?}");
        for prefix in QUERY_WORKLOADS {
            let query = cell(report, prefix, system);
            assert_eq!(query.status, Status::Timeout, "{query:?}");
            assert!(
                query.reason.as_deref().unwrap().contains("--ceiling 1ms"),
                "{query:?}"
            );
        }
    }
}

#[test]
fn bad_input_is_one_clear_error_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let unreachable = run(&args(&out, &["--target", "http://127.0.0.1:9"])).unwrap_err();
    let message = format!("{unreachable:#}");
    assert!(
        message.contains("cannot connect to elastic at http://127.0.0.1:9"),
        "{message}"
    );
    assert!(!out.exists(), "no results folder is left behind");

    let foreign = dir.path().join("someone-elses-index");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("data.bin"), b"precious").unwrap();
    let target = format!("tantivy:{}", foreign.display());
    let refused = run(&args(&out, &["--target", &target])).unwrap_err();
    assert!(
        format!("{refused:#}").contains("was not created by search-bench"),
        "{refused:#}"
    );
    assert_eq!(
        std::fs::read(foreign.join("data.bin")).unwrap(),
        b"precious"
    );
    assert!(!out.exists());

    let zero = run(&args(&out, &["--docs", "0"])).unwrap_err();
    assert!(format!("{zero:#}").contains("--docs"), "{zero:#}");
    let scheme = run(&args(&out, &["--target", "solr://127.0.0.1:8983"])).unwrap_err();
    assert!(
        format!("{scheme:#}").contains("unknown scheme `solr`"),
        "{scheme:#}"
    );
}

#[test]
fn a_foreign_index_or_an_error_answer_from_the_server_is_refused() {
    let Some((url, dir)) = on_server(OPENSEARCH) else {
        return;
    };
    let index = format!("{url}/fairbench_foreign");
    http("DELETE", &index, None);
    let (status, body) = http(
        "PUT",
        &format!("{index}/_doc/1?refresh=true"),
        Some(r#"{"keep":"me"}"#),
    );
    assert!(status == 201 || status == 200, "{body}");
    let out = dir.path().join("never");
    let refused = run(&args(
        &out,
        &["--target", &url, "--index", "fairbench_foreign"],
    ))
    .unwrap_err();
    let message = format!("{refused:#}");
    assert!(
        message.contains("index `fairbench_foreign` exists but was not created by search-bench"),
        "{message}"
    );
    let (status, body) = http("GET", &format!("{index}/_doc/1"), None);
    assert_eq!(status, 200, "the foreign index is untouched: {body}");
    http("DELETE", &index, None);
    assert!(!out.exists());

    // A URL whose root answers 4xx: the server's own reason is shown.
    let wrong = format!("{url}/no_such_index_here");
    let failed = run(&args(&out, &["--target", &wrong])).unwrap_err();
    let message = format!("{failed:#}");
    assert!(message.contains("HTTP 404"), "{message}");
    assert!(message.contains("index_not_found_exception"), "{message}");
    assert!(!out.exists());
}
