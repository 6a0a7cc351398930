//! Rendering tests on a synthetic report (no timings from a real run), snapshot-tested.

use common::environment::Environment;
use common::results::{Cell, Percentiles, Report, Status, SystemInfo, Throughput, VerdictKind};
use serde_json::json;

use super::*;

fn point(family: &str, system: &str, ef: u64, recall: f64, qps: [f64; 3], p50_us: u64) -> Cell {
    let mut cell = Cell::new(&format!("{family} · ef {ef}"), system, "queries/s", 16, 3);
    cell.throughput = Throughput::from_rounds(qps.to_vec());
    // The report shows p50 and p99 only.
    cell.latency_ns = Some(Percentiles {
        p50: p50_us * 1_000,
        p99: p50_us * 2_000,
        ..Percentiles::default()
    });
    cell.extra.insert("family".into(), json!(family));
    cell.extra.insert("ef".into(), json!(ef));
    cell.extra.insert("recall".into(), json!(recall));
    cell
}

pub fn sample() -> Report {
    let system = |name: &str| SystemInfo {
        name: name.into(),
        kind: name.into(),
        url_redacted: name.into(),
        version: format!("{name} 1.0"),
        ..SystemInfo::default()
    };
    let f = "f32 · unfiltered";
    let g = "f32 · filter 1%";
    let mut refused = Cell::unmeasured(
        "binary · unfiltered · ef 32",
        "b",
        "queries/s",
        Status::Refused,
        "not offered: no quantization",
    );
    refused.labels.clear();
    let mut report = Report {
        schema_version: 1,
        tool: "vector-bench".into(),
        tool_version: "0.1.0".into(),
        git_commit: None,
        suite: "hnsw".into(),
        section: "generated 1,000 × 8 · cosine · HNSW m = 16, ef_construction = 200 · k = 10"
            .into(),
        run_id: "r".into(),
        reference: Some("a".into()),
        started_at: "2026-11-30T00:00:00Z".into(),
        finished_at: None,
        options: json!({"rounds": 3, "duration_s": 2.0, "warmup": 1}),
        environment: Environment::default(),
        data: None,
        systems: vec![system("a"), system("b")],
        cells: vec![
            point(f, "a", 32, 0.88, [2_000.0, 2_100.0, 1_900.0], 500),
            point(f, "a", 64, 0.96, [1_000.0, 1_050.0, 950.0], 900),
            point(f, "a", 128, 0.995, [500.0, 520.0, 480.0], 1_800),
            point(f, "b", 32, 0.93, [3_000.0, 3_100.0, 2_900.0], 300),
            point(f, "b", 64, 0.97, [1_900.0, 2_000.0, 1_800.0], 500),
            point(f, "b", 128, 0.985, [1_000.0, 1_100.0, 900.0], 1_000),
            point(g, "a", 32, 0.80, [900.0, 920.0, 880.0], 1_100),
            point(g, "a", 64, 0.99, [800.0, 820.0, 780.0], 1_200),
            point(g, "b", 32, 0.85, [950.0, 990.0, 890.0], 1_000),
            point(g, "b", 64, 0.95, [850.0, 870.0, 790.0], 1_100),
            refused,
        ],
        verdicts: vec![],
        no_verdicts: vec![],
        worker: None,
        workers: vec![],
        forks: vec![],
        notes: vec!["synthetic".into()],
        extra: Default::default(),
    };
    report.extra.insert(
        "builds".into(),
        json!([{"system": "a", "variant": "f32", "offered": "f32 vectors",
                "build": {"insert_s": 1.5, "build_s": 1.5, "method": "add", "index_bytes": 1048576},
                "insert_rows_per_s": 666.7},
               {"system": "b", "variant": "binary", "offered": null,
                "problem": "not offered: no quantization"}]),
    );
    report.extra.insert("curves".into(), curves_json(&report));
    let judgement = VectorReport.judge(&report);
    report.verdicts = judgement.verdicts;
    report.no_verdicts = judgement.no_verdicts;
    report
}

#[test]
fn matched_recall_interpolates_and_judges_by_the_interval() {
    let report = sample();
    let at = |workload: &str| {
        report
            .verdicts
            .iter()
            .find(|v| v.workload == workload && v.system == "b")
            .unwrap_or_else(|| panic!("no verdict for {workload}: {:?}", report.verdicts))
    };
    // a reaches 0.95 between ef 32 and 64 (7/8 of the way): 1,125 q/s; b halfway: 2,450 q/s.
    let v = at("f32 · unfiltered · recall 0.95");
    assert!((v.ratio - 2_450.0 / 1_125.0).abs() < 1e-6, "{v:?}");
    assert_eq!(v.verdict, VerdictKind::Faster);
    let has = |workload: &str| report.verdicts.iter().any(|v| v.workload == workload);
    // At 0.90 b's curve starts above: its ef 32 figure is a bound, which gives no ratio.
    assert!(!has("f32 · unfiltered · recall 0.90"));
    let bound = report
        .no_verdicts
        .iter()
        .find(|v| v.workload == "f32 · unfiltered · recall 0.90")
        .unwrap();
    assert!(bound.reason.contains("gives a bound"), "{bound:?}");
    // At 0.99 b never gets there: no verdict.
    assert!(!has("f32 · unfiltered · recall 0.99"));
    // Filtered, both cross 0.90 between ef 32 and 64: b's interpolated rounds (840–930 q/s) lie
    // from 3% below to 12% above a's (827–867): the interval crosses the 5% threshold.
    let v = at("f32 · filter 1% · recall 0.90");
    assert_eq!(v.verdict, VerdictKind::Inconclusive, "{v:?}");
    assert!(v.interval[0] < 1.0 && v.interval[1] > 1.05, "{v:?}");
}

#[test]
fn one_measured_round_a_side_gives_no_verdict_at_matched_recall() {
    let mut report = sample();
    for cell in report.cells.iter_mut().filter(|c| c.system == "b") {
        if let Some(t) = &cell.throughput {
            cell.throughput = Throughput::from_rounds(vec![t.median]);
        }
    }
    // b's curve and its interpolated figures are as before; only the verdict needs two rounds.
    assert_eq!(curves(&report).len(), 4);
    assert!(VectorReport.judge(&report).verdicts.is_empty());
    assert!(!VectorReport.judge(&sample()).verdicts.is_empty());
}

#[test]
fn report_snapshots() {
    let report = sample();
    common::assert_report_snapshots!(render_terminal(&report), render_markdown(&report));
}

/// An engine that does not tell its index's size still shows what its build added to this
/// process; one that tells shows both; a server shows its resident memory.
#[test]
fn a_build_s_memory_is_what_was_measured_of_it() {
    let mut report = sample();
    report.extra.insert(
        "builds".into(),
        json!([{"system": "a", "variant": "f32", "build": {"index_bytes": 1048576},
                "process_rss_growth_bytes": 2097152},
               {"system": "b", "variant": "f32", "build": {}, "process_rss_growth_bytes": 3145728},
               {"system": "c", "variant": "f32", "build": {}, "server_rss_bytes": 4194304},
               {"system": "d", "variant": "f32", "build": {}}]),
    );
    let table = builds_table(&report).unwrap();
    let memory: Vec<&str> = table.rows.iter().map(|row| row[4].as_str()).collect();
    assert_eq!(
        memory,
        [
            "index 1.0 MiB, process +2.0 MiB",
            "process +3.0 MiB",
            "server 4.0 MiB",
            "–"
        ]
    );
}

#[test]
fn one_chart_per_family_with_one_curve_per_system() {
    let charts = chart::render_charts(&sample());
    let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "recall-qps-f32-filter-1pct.svg",
            "recall-qps-f32-unfiltered.svg"
        ]
    );
    let svg = &charts[1].1;
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert_eq!(svg.matches("<circle").count(), 6);
    assert!(svg.contains(">ef 128</text>"));
    assert!(svg.ends_with("</svg>\n"));
}

#[test]
fn a_ratio_to_the_scan_keeps_two_figures_however_small() {
    assert_eq!(two_figures(0.004_32), "0.0043");
    assert_eq!(two_figures(0.52), "0.52");
    assert_eq!(two_figures(3.17), "3.2");
    assert_eq!(two_figures(25.0), "25");
}
