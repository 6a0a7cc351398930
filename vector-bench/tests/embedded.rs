//! `vector-bench` end to end on the embedded usearch index, in-process: the sweep, its results
//! folder, the ground-truth cache, the file loaders, and bad input refused in one line with
//! nothing left behind.

mod support;

use common::exit::Exit;
use common::results::{Location, Status};
use support::*;

#[test]
fn the_embedded_default_sweeps_every_family_and_writes_a_results_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    let summary = run(&args(&out, &cache, &["--variants", "f32,int8,binary"])).unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::AllOk);
    assert_matches_schema(&out);
    assert_eq!(report.systems.len(), 2, "usearch and the exact scan");
    assert_eq!(report.systems[0].name, "usearch");
    assert_eq!(report.systems[1].name, "exact-scan");
    // The index lives in this process: its disk is the results folder's, measured there.
    assert_eq!(report.systems[0].location, Location::Embedded);
    assert!(report.environment.durable_write_floor_ns.is_some());
    assert_eq!(
        report.environment.durable_write_floor_path.as_deref(),
        out.to_str()
    );
    assert!(report.systems[0].version.starts_with("usearch 2."));
    // 3 variants × 3 filters × 3 ef points, and the exact scan of each filter.
    assert_eq!(report.cells.len(), 30, "{:#?}", report.cells);
    for exact in report.cells.iter().filter(|c| c.system == "exact-scan") {
        assert_eq!(exact.status, Status::Ok, "{exact:?}");
        assert_eq!(recall(exact), 1.0, "{exact:?}");
        assert!(exact.extra["ef"].is_null());
        assert!(exact.throughput.as_ref().unwrap().median > 0.0);
    }
    for cell in report.cells.iter().filter(|c| c.system == "usearch") {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
        let r = recall(cell);
        assert!((0.0..=1.0).contains(&r), "{r}");
        let score = &cell.extra["score"];
        assert_eq!(score["filter_violations"], 0, "{cell:?}");
        assert_eq!(score["unknown_ids"], 0);
        assert_eq!(score["queries"], 120, "60 queries × 2 measured rounds");
        assert_eq!(cell.throughput.as_ref().unwrap().rounds.len(), 2);
        let latency = cell.latency_ns.unwrap();
        assert!(latency.p99 >= latency.p50 && latency.p50 > 0);
        assert_eq!(cell.extra["ef_reported"], cell.extra["ef"].to_string());
        assert!(cell.extra["harness_ns_per_query"].as_f64().unwrap() >= 0.0);
    }
    // Full precision at the widest ef finds nearly every true neighbour of this small set.
    let best = cell(report, "f32 · unfiltered · k 10 · ef 64", "usearch");
    assert!(recall(best) > 0.9, "{}", recall(best));
    let verified = &report.systems[0].verified;
    assert_eq!(verified["f32.m"], "16");
    assert_eq!(verified["f32.ef_construction"], "200");
    assert_eq!(verified["f32.rows"], "3000");
    assert_eq!(verified["int8.scalar"], "I8");
    // The kernel each index used is named; with the default `simd` feature on an AVX2 CPU it
    // is NumKong's, not usearch's portable one.
    #[cfg(all(feature = "simd", target_arch = "x86_64"))]
    if std::arch::is_x86_feature_detected!("avx2") {
        for variant in ["f32", "int8"] {
            let kernel = &verified[&format!("{variant}.simd")];
            assert_ne!(kernel, "serial", "{variant}: {verified:?}");
        }
    }

    let json = read_json(&out);
    assert_eq!(json["tool"], "vector-bench");
    assert_eq!(json["options"]["k"], serde_json::json!([10]));
    assert_eq!(json["extra"]["builds"].as_array().unwrap().len(), 3);
    assert!(
        json["extra"]["builds"][0]["build"]["build_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let truths = json["extra"]["ground_truth"].as_array().unwrap();
    assert_eq!(truths.len(), 3);
    assert_eq!(truths[0]["source"], "computed");
    assert_eq!(truths[2]["rows"], 30, "the 1% category of 3,000 rows");
    let curves = json["extra"]["curves"].as_array().unwrap();
    assert_eq!(curves.len(), 9);
    let pareto = json["extra"]["pareto"].as_array().unwrap();
    assert_eq!(pareto.len(), 3, "one view per filter family");
    for view in pareto {
        assert!(view["exact"]["qps"].as_f64().unwrap() > 0.0, "{view}");
        let usearch = &view["systems"][0];
        assert_eq!(usearch["points"].as_array().unwrap().len(), 9);
        assert!(!usearch["front"].as_array().unwrap().is_empty());
    }
    assert!(out.join("pareto-filter-1pct-k-10.svg").exists());
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("At matched recall"), "{markdown}");
    assert!(markdown.contains("| 64 |"), "{markdown}");
    assert!(
        markdown.contains("Exact scan of each query family"),
        "{markdown}"
    );
    let svg = std::fs::read_to_string(out.join("recall-qps-f32-unfiltered-k-10.svg")).unwrap();
    assert!(svg.contains("<polyline") && svg.contains(">usearch</text>"));

    // The second run reads the ground truth from the cache.
    let again = dir.path().join("again");
    let summary = run(&args(
        &again,
        &cache,
        &["--variants", "f32", "--filters", "none"],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk);
    assert_eq!(
        read_json(&again)["extra"]["ground_truth"][0]["source"],
        "cache"
    );
}

#[test]
fn texmex_and_hdf5_files_load_and_use_their_own_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let hdf5 = dir.path().join("angular.hdf5");
    std::fs::copy(data_dir().join("angular-600x12.hdf5"), &hdf5).unwrap();
    let out = dir.path().join("h5");
    let summary = run(&args(
        &out,
        &cache,
        &[
            "--data",
            hdf5.to_str().unwrap(),
            "--variants",
            "f32",
            "--filters",
            "none,10pct",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert_matches_schema(&out);
    let json = read_json(&out);
    assert_eq!(json["extra"]["ground_truth"][0]["source"], "file");
    // The file's lists were checked against the exact search on a sample, not trusted.
    assert_eq!(json["extra"]["ground_truth"][0]["file_agreement"], 1.0);
    assert_eq!(json["extra"]["ground_truth"][0]["file_checked_queries"], 20);
    assert_eq!(json["extra"]["ground_truth"][0]["queries"], 20);
    assert_eq!(json["extra"]["ground_truth"][1]["source"], "computed");
    assert!(
        json["data"]["description"]
            .as_str()
            .unwrap()
            .contains("600 × 12")
    );
    assert!(json["section"].as_str().unwrap().contains("cosine"));

    // --truth-only computes the exact truth and checks the file's lists against it.
    let truth = dir.path().join("truth");
    let summary = run(&args(
        &truth,
        &cache,
        &[
            "--data",
            hdf5.to_str().unwrap(),
            "--truth-only",
            "--filters",
            "none",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk);
    assert_eq!(summary.report.suite, "ground-truth");
    assert!(summary.report.cells.is_empty() && summary.report.verdicts.is_empty());
    assert_matches_schema(&truth);
    let agreement = read_json(&truth)["extra"]["ground_truth"][0]["file_agreement"]
        .as_f64()
        .unwrap();
    assert_eq!(agreement, 1.0);

    let base = dir.path().join("base.fvecs");
    let queries = dir.path().join("queries.fvecs");
    write_fvecs(&base, 2_000, 8, |r, d| {
        ((r * 7 + d * 13) % 17) as f32 - 8.0 + d as f32 * 0.01
    });
    write_fvecs(&queries, 25, 8, |r, d| ((r * 5 + d * 3) % 11) as f32 - 5.0);
    let out = dir.path().join("texmex");
    let summary = run(&args(
        &out,
        &cache,
        &[
            "--data",
            base.to_str().unwrap(),
            "--query-file",
            queries.to_str().unwrap(),
            "--metric",
            "l2",
            "--variants",
            "f32",
            "--filters",
            "none",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    let cell = cell(
        &summary.report,
        "f32 · unfiltered · k 10 · ef 64",
        "usearch",
    );
    assert!(recall(cell) > 0.5, "{}", recall(cell));
    // Generated-file ground truth is cached beside the file.
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("base.fvecs.truth-")
        })
        .collect();
    assert_eq!(beside.len(), 1);
}

fn write_fvecs(
    path: &std::path::Path,
    rows: usize,
    dims: usize,
    value: impl Fn(usize, usize) -> f32,
) {
    let mut bytes = Vec::new();
    for r in 0..rows {
        bytes.extend_from_slice(&(dims as i32).to_le_bytes());
        for d in 0..dims {
            bytes.extend_from_slice(&value(r, d).to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
}

fn write_ivecs(path: &std::path::Path, lists: &[Vec<u32>]) {
    let mut bytes = Vec::new();
    for list in lists {
        bytes.extend_from_slice(&(list.len() as i32).to_le_bytes());
        list.iter()
            .for_each(|id| bytes.extend_from_slice(&(*id as i32).to_le_bytes()));
    }
    std::fs::write(path, bytes).unwrap();
}

/// A seeded value in [0, 1000) per (row, dimension): no two L2 distances tie.
fn scattered(seed: usize) -> impl Fn(usize, usize) -> f32 {
    move |r, d| ((r * 7_919 + d * 104_729 + seed) * 2_654_435_761 % 1_000_003) as f32 / 1_000.0
}

/// Every row of `rows` ordered by its L2 distance to `query`, in f64, nearest first.
fn by_distance(rows: &[Vec<f32>], query: &[f32]) -> Vec<u32> {
    let mut all: Vec<(f64, u32)> = rows
        .iter()
        .enumerate()
        .map(|(id, row)| {
            let d = row
                .iter()
                .zip(query)
                .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
                .sum::<f64>();
            (d, id as u32)
        })
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    all.into_iter().map(|e| e.1).collect()
}

#[test]
fn a_truth_file_is_checked_at_every_k_the_sweep_scores() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (rows, queries, dims) = (1_000, 20, 8);
    let (base, query_file) = (dir.path().join("base.fvecs"), dir.path().join("q.fvecs"));
    write_fvecs(&base, rows, dims, scattered(1));
    write_fvecs(&query_file, queries, dims, scattered(5));
    let row_vectors: Vec<Vec<f32>> = (0..rows)
        .map(|r| (0..dims).map(|d| scattered(1)(r, d)).collect())
        .collect();
    let ordered: Vec<Vec<u32>> = (0..queries)
        .map(|q| {
            let query: Vec<f32> = (0..dims).map(|d| scattered(5)(q, d)).collect();
            by_distance(&row_vectors, &query)
        })
        .collect();
    let right: Vec<Vec<u32>> = ordered.iter().map(|o| o[..100].to_vec()).collect();
    // Each query's first neighbour is its farthest row, then the true 1st to 99th: 99 of 100
    // agree at k 100, none at k 1.
    let wrong: Vec<Vec<u32>> = ordered
        .iter()
        .map(|o| {
            std::iter::once(o[rows - 1])
                .chain(o[..99].iter().copied())
                .collect()
        })
        .collect();
    let sweep = |truth_file: &std::path::Path, out: &std::path::Path| {
        run(&args(
            out,
            &cache,
            &[
                "--data",
                base.to_str().unwrap(),
                "--query-file",
                query_file.to_str().unwrap(),
                "--truth-file",
                truth_file.to_str().unwrap(),
                "--metric",
                "l2",
                "--variants",
                "f32",
                "--filters",
                "none",
                "--k",
                "1,10,100",
                "--ef",
                "100",
            ],
        ))
        .unwrap()
    };

    let (file, out) = (dir.path().join("right.ivecs"), dir.path().join("right"));
    write_ivecs(&file, &right);
    assert_eq!(sweep(&file, &out).exit, Exit::AllOk);
    let truth = &read_json(&out)["extra"]["ground_truth"][0];
    assert_eq!(truth["source"], "file", "{truth}");
    assert_eq!(truth["file_agreement"], 1.0);
    assert!(truth["file_disagreement"].is_null(), "{truth}");

    let (file, out) = (dir.path().join("wrong.ivecs"), dir.path().join("wrong"));
    write_ivecs(&file, &wrong);
    let summary = sweep(&file, &out);
    assert_eq!(summary.exit, Exit::AllOk);
    let truth = &read_json(&out)["extra"]["ground_truth"][0];
    assert_eq!(truth["source"], "computed", "{truth}");
    let why = truth["file_disagreement"].as_str().unwrap();
    let far = ordered[0][rows - 1];
    assert!(
        why.starts_with(&format!(
            "query 0 at k 1: rank 1 (row {far}) is at distance"
        )),
        "{why}"
    );
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("the exact ground truth is used instead"),
        "{markdown}"
    );
    // recall@1 is scored against the exact truth, not the file's farthest row.
    let at_1 = cell(
        &summary.report,
        "f32 · unfiltered · k 1 · ef 100",
        "usearch",
    );
    assert!(recall(at_1) >= 0.9, "{}", recall(at_1));
    let scan = cell(
        &summary.report,
        "exact scan · unfiltered · k 1",
        "exact-scan",
    );
    assert_eq!(recall(scan), 1.0);
}

#[test]
fn usearch_int8_on_unnormalized_l2_rows_is_scaled_by_vector_bench_not_collapsed() {
    // Pixel-like rows (integers 0–16, as 8 × 8 digit images): ten prototypes, each image at a
    // brightness of its own and with noise, so that rows in one direction lie far apart.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let dims = 64;
    let hash = |x: usize| x * 2_654_435_761 % 1_000_003;
    let prototype = move |c: usize, d: usize| (hash(c * 31 + d * 17) % 17) as f32;
    let pixel = move |seed: usize| {
        move |r: usize, d: usize| {
            let noise = (hash(r * 7_919 + d * 104_729 + seed) % 5) as f32 - 2.0;
            let brightness = 0.25 + 0.75 * (hash(r * 65_537 + seed * 3 + 11) % 1_000) as f32 / 1e3;
            ((brightness * prototype(r % 10, d)).round() + noise).clamp(0.0, 16.0)
        }
    };
    let (base, queries) = (dir.path().join("pixels.fvecs"), dir.path().join("q.fvecs"));
    write_fvecs(&base, 3_000, dims, pixel(1));
    write_fvecs(&queries, 60, dims, pixel(7));
    let out = dir.path().join("run");
    let summary = run(&args(
        &out,
        &cache,
        &[
            "--data",
            base.to_str().unwrap(),
            "--query-file",
            queries.to_str().unwrap(),
            "--metric",
            "l2",
            "--variants",
            "f32,int8",
            "--filters",
            "none",
            "--ef",
            "64",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    let report = &summary.report;
    let f32 = recall(cell(report, "f32 · unfiltered · k 10 · ef 64", "usearch"));
    let int8 = recall(cell(report, "int8 · unfiltered · k 10 · ef 64", "usearch"));
    // usearch's own cast (each vector at unit length) ranks these rows by angle: its int8
    // recall here was 0.48 against f32's 1.00.
    assert!(int8 >= 0.9 && int8 >= f32 - 0.05, "int8 {int8}, f32 {f32}");
    let verified = &report.systems[0].verified;
    assert_eq!(verified["int8.i8_offset"], "8");
    assert_eq!(verified["int8.i8_scale"], "15.875");
    assert!(
        verified["int8.quantized"].starts_with("by vector-bench: i8 = round((x − 8) × 15.875)")
    );
    assert!(
        report.notes.iter().any(|n| n.starts_with(
            "usearch's int8 rows (and queries) of this L2 data are quantized by vector-bench"
        )),
        "{:?}",
        report.notes
    );
}

/// Runs with `extra` and expects one clear error line containing `needle`, and no results folder.
fn refused(extra: &[&str], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    let error = match run(&args(&out, &cache, extra)) {
        Ok(_) => panic!("{extra:?} was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(error.contains(needle), "{extra:?}: {error}");
    assert!(!error.contains('\n'), "one line: {error}");
    assert!(!out.exists(), "{extra:?} left a results folder behind");
}

#[test]
fn bad_input_is_one_clear_line_and_leaves_nothing_behind() {
    refused(
        &["--k", "5000"],
        "--k 5000 is larger than the dataset (3000 rows)",
    );
    refused(&["--ef", "8,32"], "--ef 8 is below --k 10");
    refused(
        &["--target", "chroma://127.0.0.1:1"],
        "cannot connect to chroma at chroma://127.0.0.1:1",
    );
    refused(
        &["--target", "pg=postgres://u:p@127.0.0.1:1/db"],
        "cannot connect to pg",
    );
    refused(
        &["--target", "redis://127.0.0.1:1"],
        "unknown scheme `redis`",
    );
    refused(&["--namespace", "Bad-Name"], "--namespace `Bad-Name`");
    refused(&["--server-pid", "x=999999999"], "no process 999999999");

    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("words.fvecs");
    std::fs::write(&text, "this is a text file, not vectors\n").unwrap();
    let queries = dir.path().join("q.fvecs");
    write_fvecs(&queries, 3, 4, |_, _| 1.0);
    refused(
        &[
            "--data",
            text.to_str().unwrap(),
            "--query-file",
            queries.to_str().unwrap(),
        ],
        "words.fvecs: malformed at byte 0",
    );
    let csv = dir.path().join("vectors.csv");
    std::fs::write(&csv, "1,2,3\n").unwrap();
    refused(
        &["--data", csv.to_str().unwrap()],
        "not a dataset vector-bench reads",
    );
    refused(
        &[
            "--data",
            "/nonexistent/base.fvecs",
            "--query-file",
            queries.to_str().unwrap(),
        ],
        "cannot read /nonexistent/base.fvecs",
    );

    let bytes = std::fs::read(data_dir().join("angular-600x12.hdf5")).unwrap();
    let cut = dir.path().join("cut.hdf5");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    refused(
        &["--data", cut.to_str().unwrap()],
        "cut.hdf5: malformed at byte",
    );
    let fake = dir.path().join("fake.hdf5");
    std::fs::write(&fake, b"PK\x03\x04 a zip file, not HDF5").unwrap();
    refused(
        &["--data", fake.to_str().unwrap()],
        "fake.hdf5: not a readable HDF5 file",
    );
}
