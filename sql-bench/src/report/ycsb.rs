//! The ycsb suite's report: the shared tables (throughput, latency, verdicts; the load is a
//! row of its own in records/s), then one table per workload with each operation's share,
//! throughput and latency per system and how an engine answered an emulated operation.

use common::export::ToolReport;
use common::human::{format_latency_ns, format_rate};
use common::report::Table;
use common::report::{markdown_frame, shared_tables, system_line, terminal_frame};
use common::results::{Cell, Report, Status};
use serde_json::Value;

/// `sql-bench ycsb`'s terminal summary, `report.md` and charts.
#[derive(Debug, Clone, Copy, Default)]
pub struct YcsbReport;

impl ToolReport for YcsbReport {
    fn terminal(&self, report: &Report) -> String {
        let mut tables = shared_tables(report);
        tables.extend(operation_tables(report));
        terminal_frame(report, &tables, &system_line)
    }

    fn markdown(&self, report: &Report) -> String {
        let mut tables = shared_tables(report);
        tables.extend(operation_tables(report));
        markdown_frame(
            report,
            &tables,
            &(answered_by_markdown(report) + &raced_delete_markdown(report)),
        )
    }
}

/// The workloads in the order measured (the load excluded).
fn workloads(report: &Report) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for cell in &report.cells {
        if cell.extra.contains_key("operations") && !names.contains(&cell.workload.as_str()) {
            names.push(&cell.workload);
        }
    }
    names
}

fn figure(op: &Value, pointer: &str) -> Option<f64> {
    op.pointer(pointer).and_then(Value::as_f64)
}

/// Per workload: a row per system and operation with its share (defined / measured), ops/s,
/// p50 and p99.
pub fn operation_tables(report: &Report) -> Vec<Table> {
    workloads(report)
        .into_iter()
        .map(|workload| {
            let mut rows = Vec::new();
            for cell in report.cells.iter().filter(|c| c.workload == workload) {
                rows.extend(cell_rows(cell));
            }
            let description = report
                .cells
                .iter()
                .find(|c| c.workload == workload)
                .and_then(|c| c.extra.get("workload"))
                .and_then(|w| w.get("description"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Table {
                title: format!("workload {workload}: {description}"),
                header: [
                    "system",
                    "operation",
                    "share (defined)",
                    "ops/s",
                    "p50",
                    "p99",
                    "errors",
                ]
                .map(String::from)
                .to_vec(),
                rows,
                numeric: true,
            }
        })
        .collect()
}

fn cell_rows(cell: &Cell) -> Vec<Vec<String>> {
    let Some(Value::Object(operations)) = cell.extra.get("operations") else {
        return Vec::new();
    };
    if cell.status != Status::Ok && operations.values().all(|op| op["ok"] == 0) {
        return vec![vec![
            cell.system.clone(),
            cell.status.as_str().to_owned(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]];
    }
    operations
        .iter()
        .map(|(name, op)| {
            let latency = |p: &str| {
                figure(op, &format!("/latency_ns/{p}"))
                    .map_or_else(String::new, |ns| format_latency_ns(ns as u64))
            };
            vec![
                cell.system.clone(),
                name.replace('_', "-"),
                format!(
                    "{:.1}% ({:.1}%)",
                    100.0 * figure(op, "/share").unwrap_or(0.0),
                    100.0 * figure(op, "/proportion").unwrap_or(0.0)
                ),
                format_rate(figure(op, "/throughput_per_s").unwrap_or(0.0)),
                latency("p50"),
                latency("p99"),
                op["error"].to_string(),
            ]
        })
        .collect()
}

/// Operations whose record another connection deleted after they chose its key, in words.
fn raced_delete_markdown(report: &Report) -> String {
    let mut lines = Vec::new();
    for cell in &report.cells {
        let Some(Value::Object(operations)) = cell.extra.get("operations") else {
            continue;
        };
        for (name, op) in operations {
            if let Some(raced) = op.get("raced_delete").and_then(Value::as_u64) {
                lines.push(format!(
                    "- {} {} {}: {raced} of {} found their record deleted by another connection \
                     after choosing its key (counted as done: the server's answer was right)",
                    cell.workload,
                    cell.system,
                    name.replace('_', "-"),
                    op["ok"]
                ));
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!("\n**Raced a delete**\n\n{}\n", lines.join("\n"))
}

/// The operations an engine answered another way than the workload says, in words.
fn answered_by_markdown(report: &Report) -> String {
    let mut lines = Vec::new();
    for cell in &report.cells {
        let Some(Value::Object(operations)) = cell.extra.get("operations") else {
            continue;
        };
        for (name, op) in operations {
            if let Some(how) = op.get("answered_by").and_then(Value::as_str) {
                let line = format!("- {} {}: {how}", cell.system, name.replace('_', "-"));
                if !lines.contains(&line) {
                    lines.push(line);
                }
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!("\n**How each engine answered**\n\n{}\n", lines.join("\n"))
}
