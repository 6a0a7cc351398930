//! `vector-bench` against the Weaviate server the test command starts on loopback
//! (`FAIRBENCH_TEST_WEAVIATE_URL`, from `scripts/services start DIR weaviate`): recall against
//! the exact ground truth, a filtered family, the index's parameters and each point's ef read
//! back from the server, the class dropped at the end, and a wrong port refused in one line.

mod support;

use common::exit::Exit;
use common::results::Status;
use common::testing::assert_verified;
use support::*;

const WEAVIATE: &str = "FAIRBENCH_TEST_WEAVIATE_URL";

/// The HTTP status of `GET /v1/schema/CLASS` on the server of `url`.
fn class_status(url: &str, class: &str) -> String {
    let root = url.replacen("weaviate://", "http://", 1);
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("{root}/v1/schema/{class}"))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Recall at ef 128 on 2,000 × 24 generated rows, k 10 (0.99–1.0 here): well above what a
/// search that skipped the graph's neighbours or searched another ef would reach.
const RECALL_FLOOR: f64 = 0.95;
/// The 10% family at ef 128 (its ground truth is the exact top 10 of the category's rows).
const FILTERED_RECALL_FLOOR: f64 = 0.9;
/// rq at 8 bits, rescored, at ef 128.
const INT8_RECALL_FLOOR: f64 = 0.9;
/// bq on 24 dimensions (24 bits a vector), rescored, at ef 128.
const BINARY_RECALL_FLOOR: f64 = 0.5;

#[test]
fn weaviate_builds_answers_at_each_ef_and_reads_its_parameters_back() {
    let Some((url, _servers)) = on_server(WEAVIATE) else {
        return;
    };
    let (_dir, out, cache) = run_folders();
    // Sweeping: ACORN, Weaviate's default, can return one row twice in a filtered answer
    // (weaviate/weaviate#13121), which the sweep marks invalid.
    let target = format!("weaviate={url}?filter_strategy=sweeping");
    let extra = with_small(&[
        "--ef",
        "16,48,128",
        "--target",
        &target,
        "--namespace",
        "fbweaviate",
        "--variants",
        "f32,int8,binary",
        "--filters",
        "none,10pct",
    ]);
    let summary = run(&args(&out, &cache, &extra)).unwrap();
    let report = &summary.report;
    let not_ok: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.status != Status::Ok)
        .collect();
    assert_eq!(summary.exit, Exit::AllOk, "{not_ok:#?}");
    assert_matches_schema(&out);
    let w = &report.systems[0];
    assert_eq!(w.name, "weaviate");
    assert!(w.version.starts_with("Weaviate 1."), "{}", w.version);
    assert_verified(
        w,
        &[
            ("f32.index_type", "hnsw"),
            ("f32.m", "16"),
            ("f32.ef_construction", "200"),
            ("f32.distance", "cosine"),
            ("f32.flat_search_cutoff", "0"),
            ("f32.filter_strategy", "sweeping"),
            ("f32.quantization", "none"),
            ("f32.dimensions", "24"),
            ("f32.rows", "2000"),
            ("f32.payload_index", "category (\"int\", indexFilterable)"),
            ("int8.quantization", "rq"),
            ("int8.rq_bits", "8"),
            ("int8.rq_rescore_limit", "20"),
            ("int8.rows", "2000"),
            ("binary.quantization", "bq"),
            ("binary.rows", "2000"),
        ],
    );
    for ef in ["16", "48", "128"] {
        for family in ["unfiltered", "filter 10%"] {
            let c = cell(
                report,
                &format!("f32 · {family} · k 10 · ef {ef}"),
                "weaviate",
            );
            assert_eq!(c.status, Status::Ok, "{c:?}");
            assert_eq!(c.extra["ef_reported"], ef, "the class's ef read back");
            assert_eq!(c.extra["score"]["filter_violations"], 0, "{c:?}");
        }
    }
    let unfiltered = recall(cell(report, "f32 · unfiltered · k 10 · ef 128", "weaviate"));
    assert!(unfiltered >= RECALL_FLOOR, "recall {unfiltered}");
    let filtered = recall(cell(report, "f32 · filter 10% · k 10 · ef 128", "weaviate"));
    assert!(
        filtered >= FILTERED_RECALL_FLOOR,
        "filtered recall {filtered}"
    );
    for (variant, floor) in [("int8", INT8_RECALL_FLOOR), ("binary", BINARY_RECALL_FLOOR)] {
        let c = cell(
            report,
            &format!("{variant} · unfiltered · k 10 · ef 128"),
            "weaviate",
        );
        assert_eq!(c.status, Status::Ok, "{c:?}");
        let got = recall(c);
        assert!(got >= floor, "{variant} recall {got}");
    }
    // The run drops its classes (no --keep-data).
    for class in ["Fbweaviate_f32", "Fbweaviate_int8", "Fbweaviate_binary"] {
        assert_eq!(class_status(&url, class), "404", "{class}");
    }
}

#[test]
fn a_wrong_port_is_refused_in_one_line_and_nothing_is_made() {
    let Some(url) = server_url(WEAVIATE) else {
        return;
    };
    let (dir, _, cache) = run_folders();
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("weaviate=weaviate://127.0.0.1:{port}");
    let out = dir.path().join("run");
    let extra = ["--target", &target, "--namespace", "fbwvport"];
    let error = format!("{:#}", run(&args(&out, &cache, &extra)).unwrap_err());
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    assert!(error.contains("is the server running?"), "{error}");
    assert!(!error.contains('\n'), "{error}");
    assert!(!out.exists(), "a results folder was made");
    assert_eq!(class_status(&url, "Fbwvport_f32"), "404");
}

#[test]
fn an_unknown_filter_strategy_is_refused_in_one_line() {
    let (dir, _, cache) = run_folders();
    let out = dir.path().join("run");
    let extra = ["--target", "weaviate://127.0.0.1:9?filter_strategy=flat"];
    let error = format!("{:#}", run(&args(&out, &cache, &extra)).unwrap_err());
    assert!(
        error.contains("filter_strategy=flat: use acorn (Weaviate's default) or sweeping"),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
    assert!(!out.exists(), "a results folder was made");
}

/// A class of fairbench's with another dimension, and a class fairbench did not create, are
/// refused in one line before anything is written; a run with the same dimension replaces
/// fairbench's own class and drops it.
#[test]
fn a_class_of_another_dimension_or_not_fairbenchs_is_refused_in_one_line() {
    let Some((url, _servers)) = on_server(WEAVIATE) else {
        return;
    };
    let (dir, _, cache) = run_folders();
    let target = format!("weaviate={url}?filter_strategy=sweeping");
    let quick = |namespace: &'static str, dims: &'static str, out: &str, keep: bool| {
        let mut extra = vec![
            "--target",
            target.as_str(),
            "--namespace",
            namespace,
            "--variants",
            "f32",
            "--filters",
            "none",
            "--ef",
            "16",
            "--rounds",
            "1",
            "--rows",
            "300",
            "--dims",
            dims,
            "--queries",
            "10",
        ];
        if keep {
            extra.push("--keep-data");
        }
        let out = dir.path().join(out);
        (run(&args(&out, &cache, &extra)), out)
    };
    quick("fbwvdims", "16", "a", true).0.unwrap();
    assert_eq!(
        class_status(&url, "Fbwvdims_f32"),
        "200",
        "--keep-data kept it"
    );
    let (refused, out) = quick("fbwvdims", "24", "b", false);
    let error = format!("{:#}", refused.unwrap_err());
    assert!(
        error.contains("class Fbwvdims_f32 holds 16-dimension vectors, the dataset has 24"),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
    assert!(!out.exists());
    quick("fbwvdims", "16", "c", false).0.unwrap();
    assert_eq!(class_status(&url, "Fbwvdims_f32"), "404");

    // A class of the same name that fairbench did not create (no mark in its description).
    let root = url.replacen("weaviate://", "http://", 1);
    let create = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-XPOST"])
        .args(["-H", "content-type: application/json", "-d"])
        .arg(r#"{"class":"Fbwvforeign_f32","vectorizer":"none"}"#)
        .arg(format!("{root}/v1/schema"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&create.stdout), "200");
    let (refused, out) = quick("fbwvforeign", "16", "d", false);
    let error = format!("{:#}", refused.unwrap_err());
    let _ = std::process::Command::new("curl")
        .args(["-s", "-XDELETE"])
        .arg(format!("{root}/v1/schema/Fbwvforeign_f32"))
        .output();
    assert!(
        error.contains("class Fbwvforeign_f32 exists but was not created by fairbench"),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
    assert!(!out.exists());
}

/// A search past `--ceiling` is dropped (its HTTP request with it) and is a `timeout`, never an
/// `error`; the build's requests and each point's ef change are not cut by the per-search
/// ceiling, and the run goes on to the next ef point.
#[test]
fn weaviate_searches_past_the_ceiling_are_timeouts_and_the_run_goes_on() {
    let Some((url, _servers)) = on_server(WEAVIATE) else {
        return;
    };
    run_past_the_ceiling("weaviate", &url, "fbwvceiling");
    assert_eq!(class_status(&url, "Fbwvceiling_f32"), "404");
}
