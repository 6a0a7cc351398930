//! geo-bench's report, as pure functions of a [`Report`]: the insert curve table (events/s by
//! events per request, one row per system and client count, the durable-write floor beside
//! it), the query table (ops/s, p50/p99) and pipelined adds; the chart is in [`chart`].

pub mod chart;

use std::collections::BTreeMap;

use common::export::ToolReport;
use common::human::{format_latency_ns, format_rate, format_thousands};
use common::report::{Table, judge, markdown_frame, method_line, terminal_frame, verdict_tables};
use common::results::{Cell, Report, Status, SystemInfo};
use serde_json::json;

pub(crate) fn family(cell: &Cell) -> &str {
    cell.extra
        .get("family")
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

pub(crate) fn number(cell: &Cell, key: &str) -> u64 {
    cell.extra
        .get(key)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

fn rounds(report: &Report) -> u64 {
    report
        .options
        .get("rounds")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

/// Distinct values in first-seen order.
pub(crate) fn distinct<T: PartialEq + Copy>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn figure(cell: &Cell) -> String {
    match cell.usable_throughput() {
        Some(t) if t.rounds.len() > 1 => format!(
            "{} ({}–{})",
            format_rate(t.median),
            format_rate(t.min),
            format_rate(t.max)
        ),
        Some(t) => format_rate(t.median),
        None => cell.status.as_str().to_owned(),
    }
}

fn is_durable(report: &Report, system: &str) -> bool {
    report
        .systems
        .iter()
        .any(|s| s.name == system && s.labels.iter().any(|l| l == "durable"))
}

/// The insert curve: one row per system and client count, one column per batch size, and the
/// durable-write floor of durable systems beside the batch-size-1 figure.
pub fn curve_table(report: &Report) -> Option<Table> {
    let inserts: Vec<&Cell> = report
        .cells
        .iter()
        .filter(|c| family(c) == "insert")
        .collect();
    if inserts.is_empty() {
        return None;
    }
    let batches = distinct(inserts.iter().map(|c| number(c, "batch_size")));
    let clients = distinct(inserts.iter().map(|c| number(c, "clients")));
    let mut header = vec!["system".to_owned(), "clients".to_owned()];
    header.extend(
        batches
            .iter()
            .map(|b| format!("batch {}", format_thousands(*b as f64))),
    );
    header.push("durable-write floor".to_owned());
    let mut rows = Vec::new();
    for system in &report.systems {
        for &n in &clients {
            let mut row = vec![system.name.clone(), n.to_string()];
            for &b in &batches {
                let cell = inserts.iter().find(|c| {
                    c.system == system.name
                        && number(c, "batch_size") == b
                        && number(c, "clients") == n
                });
                row.push(cell.map_or_else(|| "–".to_owned(), |c| figure(c)));
            }
            row.push(
                match (
                    is_durable(report, &system.name),
                    system.durable_write_floor_ns,
                ) {
                    (true, Some(ns)) => format!(
                        "{} (≤ {}/s at batch 1, 1 client)",
                        format_latency_ns(ns),
                        format_rate(1e9 / ns as f64)
                    ),
                    (false, _) => "not durable".to_owned(),
                    (true, None) => "not measured (remote)".to_owned(),
                },
            );
            rows.push(row);
        }
    }
    Some(Table {
        title: format!(
            "Insert throughput (events/s, median of {} rounds, min–max) by events per request",
            rounds(report)
        ),
        header,
        rows,
        numeric: true,
    })
}

fn latency_text(cell: &Cell) -> String {
    match (cell.status, cell.latency_ns) {
        (Status::Ok, Some(l)) => format!(
            "{} / {}",
            format_latency_ns(l.p50),
            format_latency_ns(l.p99)
        ),
        _ => String::new(),
    }
}

/// A workload-by-system table of throughput and p50/p99 for one family of cells.
fn ops_table(report: &Report, which: &str, title: String) -> Option<Table> {
    let cells: Vec<&Cell> = report.cells.iter().filter(|c| family(c) == which).collect();
    if cells.is_empty() {
        return None;
    }
    let workloads = distinct(cells.iter().map(|c| c.workload.as_str()));
    let systems: Vec<&str> = report
        .systems
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| cells.iter().any(|c| c.system == *n))
        .collect();
    let mut header = vec![which.to_owned()];
    header.extend(systems.iter().map(|s| s.to_string()));
    let rows = workloads
        .iter()
        .map(|w| {
            let mut row = vec![with_mean_results(&cells, w)];
            row.extend(systems.iter().map(|s| {
                cells
                    .iter()
                    .find(|c| c.workload == *w && c.system == *s)
                    .map_or_else(
                        || "–".to_owned(),
                        |c| match c.usable_throughput() {
                            Some(t) => format!("{} · {}", format_rate(t.median), latency_text(c)),
                            None => c.status.as_str().to_owned(),
                        },
                    )
            }));
            row
        })
        .collect();
    Some(Table {
        title,
        header,
        rows,
        numeric: true,
    })
}

/// The workload's name with the mean ids a query returned (the same for every system whose
/// answers verified), so a reader sees how much each query carries.
fn with_mean_results(cells: &[&Cell], workload: &str) -> String {
    let ok: Vec<&&Cell> = cells
        .iter()
        .filter(|c| c.workload == workload && c.status == Status::Ok)
        .collect();
    let means: Vec<f64> = ok
        .iter()
        .filter_map(|c| c.extra.get("mean_results_per_query")?.as_f64())
        .collect();
    match means.first() {
        Some(mean) if means.len() == ok.len() => {
            format!("{workload} (≈{} ids)", format_rate(*mean))
        }
        _ => workload.to_owned(),
    }
}

pub fn query_table(report: &Report) -> Option<Table> {
    ops_table(
        report,
        "query",
        format!(
            "Queries (queries/s, median of {} rounds · latency p50 / p99)",
            rounds(report)
        ),
    )
}

pub fn geoadd_table(report: &Report) -> Option<Table> {
    ops_table(
        report,
        "geoadd",
        format!(
            "Pipelined single-point GEOADD (commands/s, median of {} rounds · p50 / p99 per pipeline)",
            rounds(report)
        ),
    )
}

fn tables(report: &Report) -> Vec<Table> {
    [
        curve_table(report),
        query_table(report),
        geoadd_table(report),
        common::report::cpu_table(report),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The insert curve as data: system → clients → batch size → median events/s (ok cells only).
pub fn curve_json(report: &Report) -> serde_json::Value {
    let mut curve: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>> = BTreeMap::new();
    for cell in report.cells.iter().filter(|c| family(c) == "insert") {
        if let Some(t) = cell.usable_throughput() {
            curve
                .entry(cell.system.clone())
                .or_default()
                .entry(number(cell, "clients").to_string())
                .or_default()
                .insert(number(cell, "batch_size").to_string(), t.median);
        }
    }
    json!(curve)
}

/// A system's line under the terminal summary: its version and the durability it runs with.
fn system_line(s: &SystemInfo) -> String {
    let durability = s.verified.get("durability").map_or("", String::as_str);
    format!("{}: {} · {durability}", s.name, s.version)
}

/// The terminal summary printed at the end of a run.
pub fn render_terminal(report: &Report) -> String {
    terminal_frame(report, &method_line(report), &tables(report), &system_line)
}

/// `report.md`: the same tables, the comparison with the reference, the systems' evidence,
/// the environment and the notes.
pub fn render_markdown(report: &Report) -> String {
    let mut all = tables(report);
    all.extend(verdict_tables(report, &judge(report)));
    markdown_frame(report, &all, "")
}

/// geo-bench's renderers, for common's run lifecycle.
pub struct GeoReport;

impl ToolReport for GeoReport {
    fn terminal(&self, report: &Report) -> String {
        render_terminal(report)
    }

    fn markdown(&self, report: &Report) -> String {
        render_markdown(report)
    }

    fn charts(&self, report: &Report) -> Vec<(String, String)> {
        chart::render_curve_svg(report)
            .map(|svg| ("insert-curve.svg".to_owned(), svg))
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use common::results::SystemInfo;
    use common::testing::synthetic_cell;

    fn cell(
        workload: &str,
        system: &str,
        family: &str,
        batch: u64,
        clients: u64,
        rounds: &[f64],
    ) -> Cell {
        let latency = [600_000, 900_000, 1_500_000, 2_000_000, 3_000_000];
        let what = (workload, system, "events/s");
        let mut c = synthetic_cell(what, clients as u32, rounds, latency, 650_000.0);
        c.extra.insert("family".into(), json!(family));
        c.extra.insert("batch_size".into(), json!(batch));
        c.extra.insert("clients".into(), json!(clients));
        c
    }

    fn with_mean(mut c: Cell, mean: f64) -> Cell {
        c.extra.insert("mean_results_per_query".into(), json!(mean));
        c
    }

    /// A synthetic report: no timing of this machine reaches a snapshot.
    pub(crate) fn sample() -> Report {
        let system = |name: &str, durable: bool, floor: Option<u64>| SystemInfo {
            labels: vec![if durable {
                "durable".into()
            } else {
                "not durable".into()
            }],
            durable_write_floor_ns: floor,
            ..common::testing::synthetic_system(name)
        };
        let mut invalid = cell(
            "polygon c4",
            "valkey-volatile",
            "query",
            1,
            4,
            &[900.0, 950.0],
        );
        invalid.status = Status::Invalid;
        invalid.reason = Some("1 of 20 polygon answers disagree with the exact oracle".into());
        Report {
            reference: Some("sqlite".into()),
            systems: vec![
                system("sqlite", true, Some(500_000)),
                system("valkey-volatile", false, None),
            ],
            cells: vec![
                cell(
                    "insert b1 c1",
                    "sqlite",
                    "insert",
                    1,
                    1,
                    &[1_500.0, 1_600.0],
                ),
                cell(
                    "insert b100 c1",
                    "sqlite",
                    "insert",
                    100,
                    1,
                    &[60_000.0, 62_000.0],
                ),
                cell(
                    "insert b1 c1",
                    "valkey-volatile",
                    "insert",
                    1,
                    1,
                    &[20_000.0, 21_000.0],
                ),
                cell(
                    "insert b100 c1",
                    "valkey-volatile",
                    "insert",
                    100,
                    1,
                    &[300_000.0, 310_000.0],
                ),
                with_mean(
                    cell(
                        "radius 1 km c4",
                        "sqlite",
                        "query",
                        1,
                        4,
                        &[8_000.0, 8_100.0],
                    ),
                    41.5,
                ),
                with_mean(
                    cell(
                        "radius 1 km c4",
                        "valkey-volatile",
                        "query",
                        1,
                        4,
                        &[30_000.0, 30_500.0],
                    ),
                    41.5,
                ),
                cell("polygon c4", "sqlite", "query", 1, 4, &[2_000.0, 2_100.0]),
                invalid,
            ],
            notes: vec!["synthetic".into()],
            ..common::testing::synthetic_report(
                "geo-bench",
                "geo",
                "each system at the durability it reports",
                json!({"rounds": 2, "duration_s": 1.0, "warmup": 1}),
            )
        }
    }

    /// The terminal and `report.md` forms of the sample, each its own snapshot.
    #[test]
    fn report_snapshots() {
        let report = sample();
        insta::assert_snapshot!("terminal_report_snapshot", render_terminal(&report));
        insta::assert_snapshot!("markdown_report_snapshot", render_markdown(&report));
    }

    #[test]
    fn the_curve_chart_has_one_line_per_system_and_client_count() {
        let svg = chart::render_curve_svg(&sample()).unwrap();
        assert_eq!(svg.matches("<polyline data-system=").count(), 2);
        assert_eq!(svg.matches("<circle data-system=").count(), 4);
        assert!(svg.contains(r#"data-chart="insert-curve""#), "{svg}");
        assert!(svg.contains("sqlite · 1 client") && svg.ends_with("</svg>\n"));
        let curve = curve_json(&sample());
        assert_eq!(curve["sqlite"]["1"]["100"], 61_000.0);
    }
}
