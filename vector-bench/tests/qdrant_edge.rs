//! The `qdrant-edge` target end to end (only with `--features qdrant-edge`): Qdrant's engine
//! in process, built into an HNSW index with the payload index on the category, swept at every
//! ef against exact ground truth, f32 and both quantizations with and without rescoring, the
//! parameters read back from the shard; a bad target or an ef below k refused in one line.

#![cfg(feature = "qdrant-edge")]

mod support;

use common::exit::Exit;
use common::results::Status;
use support::*;

/// Recall@10 the f32 index must reach at ef 64 on the quick 3,000 × 32 set (measured: 1.0).
const RECALL_FLOOR: f64 = 0.95;

#[test]
fn qdrant_edge_builds_an_hnsw_shard_and_sweeps_every_variant_with_its_settings_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    let summary = run(&args(
        &out,
        &cache,
        &[
            "--target",
            "qdrant-edge",
            "--variants",
            "f32,int8,binary",
            "--filters",
            "none,10pct",
            "--k",
            "1,10",
            "--ef",
            "8,64",
            "--queries",
            "30",
            "--rounds",
            "1",
        ],
    ))
    .unwrap();
    let report = &summary.report;
    assert_matches_schema(&out);
    let names: Vec<&str> = report.systems.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["qdrant-edge", "qdrant-edge+rescore", "exact-scan"]);
    let q = &report.systems[0];
    assert!(q.version.starts_with("qdrant-edge 0.7.2 "), "{}", q.version);
    assert!(
        q.verified["kernel"].starts_with("f32: "),
        "{:?}",
        q.verified
    );
    for variant in ["f32", "int8", "binary"] {
        let key = |k: &str| q.verified[&format!("{variant}.{k}")].clone();
        assert_eq!(key("m"), "16");
        assert_eq!(key("ef_construction"), "200");
        assert_eq!(key("dimensions"), "32");
        assert_eq!(key("distance"), "Cosine");
        assert_eq!(key("full_scan_threshold_kb"), "0");
        assert_eq!(key("indexing_threshold_kb"), "1");
        // Every vector is in the HNSW graph, and the segment on disk says so.
        assert_eq!(key("indexed_vectors"), "3000");
        assert!(
            key("segment_indexes").contains("hnsw"),
            "{variant}: {:?}",
            q.verified
        );
        assert!(key("payload_index").contains("category"), "{variant}");
    }
    assert_eq!(q.verified["f32.quantization"], "none");
    assert!(q.verified["int8.quantization"].contains("int8"));
    assert!(q.verified["binary.quantization"].contains("binary"));
    let rescore = &report.systems[1];
    assert!(
        rescore.verified["int8.search_params"].contains("\"oversampling\":2.0"),
        "{:?}",
        rescore.verified
    );

    // Full precision at a wide ef finds the true neighbours, filtered or not.
    for family in ["unfiltered", "filter 10%"] {
        let c = cell(
            report,
            &format!("f32 · {family} · k 10 · ef 64"),
            "qdrant-edge",
        );
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(recall(c) >= RECALL_FLOOR, "{family}: {}", recall(c));
        assert_eq!(c.extra["score"]["filter_violations"], 0);
        assert_eq!(c.extra["ef_reported"], "64");
    }
    // The quantized rows are there, each lane labelled; the rescoring lane has no f32 rows.
    for variant in ["int8", "binary"] {
        for system in ["qdrant-edge", "qdrant-edge+rescore"] {
            let c = cell(
                report,
                &format!("{variant} · unfiltered · k 10 · ef 64"),
                system,
            );
            assert_eq!(c.status, Status::Ok, "{c:?}");
        }
    }
    assert!(
        !report
            .cells
            .iter()
            .any(|c| c.system == "qdrant-edge+rescore" && c.workload.starts_with("f32")),
        "rescoring is a quantized lane"
    );
    // ef 8 is measured at k 1 only: a point with ef below k is not in the plan (Qdrant would
    // silently search with ef = k; the target refuses one too).
    assert_eq!(
        cell(report, "f32 · unfiltered · k 1 · ef 8", "qdrant-edge").status,
        Status::Ok
    );
    assert!(
        !report
            .cells
            .iter()
            .any(|c| c.workload.contains("k 10 · ef 8")),
        "an ef 8 point at k 10"
    );
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", report.cells);

    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("Qdrant engine (qdrant-edge 0.7.2, in process) — not the Qdrant server: no network, no gRPC"),
        "{markdown}"
    );
}

#[test]
fn bad_qdrant_edge_input_is_one_line_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    for (extra, needle) in [
        (
            &["--target", "qdrant-edge://somewhere"][..],
            "write it as `qdrant-edge`",
        ),
        (
            &["--target", "qdrant-edge", "--ef", "4,64", "--k", "10"][..],
            "--ef 4 is below --k 10",
        ),
    ] {
        let error = format!("{:#}", run(&args(&out, &cache, extra)).unwrap_err());
        assert!(error.contains(needle), "{error}");
        assert!(!error.contains('\n'));
        assert!(!out.exists());
    }
}
