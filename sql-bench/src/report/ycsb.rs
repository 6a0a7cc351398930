//! The ycsb suite's report: the shared tables (throughput, latency, verdicts; the load is a
//! row of its own in records/s), then one table per workload with each operation's share,
//! throughput and latency per system and how an engine answered an emulated operation.

use common::export::ToolReport;
use common::human::{format_latency_ns, format_rate};
use common::report::Table;
use common::report::{markdown_frame, method_line, shared_tables, system_line, terminal_frame};
use common::results::{Cell, Report, Status};
use serde_json::Value;

/// `sql-bench ycsb`'s terminal summary, `report.md` and charts.
#[derive(Debug, Clone, Copy, Default)]
pub struct YcsbReport;

impl ToolReport for YcsbReport {
    fn terminal(&self, report: &Report) -> String {
        let mut tables = shared_tables(report);
        tables.extend(operation_tables(report));
        terminal_frame(report, &method_line(report), &tables, &system_line)
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

    fn merge_extras(&self, parts: &[&Report], merged: &mut Report) -> Result<(), String> {
        super::ycsb_merged::merge_extras(parts, merged)
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

/// A titled list of one line per operation of every cell that `line` has something to say of
/// (a line said twice is said once); nothing when none has.
fn operation_notes(
    cells: &[Cell],
    title: &str,
    line: impl Fn(&Cell, &str, &Value) -> Option<String>,
) -> String {
    let mut lines = Vec::new();
    for cell in cells {
        let Some(Value::Object(operations)) = cell.extra.get("operations") else {
            continue;
        };
        for (name, op) in operations {
            if let Some(text) = line(cell, &name.replace('_', "-"), op)
                && !lines.contains(&text)
            {
                lines.push(text);
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!("\n**{title}**\n\n{}\n", lines.join("\n"))
}

/// Operations whose record another connection deleted after they chose its key, in words.
fn raced_delete_markdown(report: &Report) -> String {
    operation_notes(&report.cells, "Raced a delete", |cell, name, op| {
        let raced = op.get("raced_delete").and_then(Value::as_u64)?;
        Some(format!(
            "- {} {} {name}: {raced} of {} found their record deleted by another connection \
             after choosing its key (counted as done: the server's answer was right)",
            cell.workload, cell.system, op["ok"]
        ))
    })
}

/// The operations an engine answered another way than the workload says, in words.
fn answered_by_markdown(report: &Report) -> String {
    operation_notes(
        &report.cells,
        "How each engine answered",
        |cell, name, op| {
            let how = op.get("answered_by").and_then(Value::as_str)?;
            Some(format!("- {} {name}: {how}", cell.system))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn notes_are_one_line_per_operation_said_once_and_nothing_when_none() {
        let mut cells = Vec::new();
        for (workload, raced) in [("a", 3), ("b", 0)] {
            let mut cell = Cell::new(workload, "pg", "ops/s", 2, 1);
            let mut update = json!({"ok": 10, "answered_by": "a blind write"});
            if raced > 0 {
                update["raced_delete"] = json!(raced);
            }
            cell.extra
                .insert("operations".into(), json!({ "read_modify_write": update }));
            cells.push(cell);
        }
        let how = operation_notes(&cells, "How", |cell, name, op| {
            Some(format!(
                "- {} {name}: {}",
                cell.system,
                op.get("answered_by")?
            ))
        });
        assert_eq!(
            how,
            "\n**How**\n\n- pg read-modify-write: \"a blind write\"\n"
        );
        let raced = operation_notes(&cells, "Raced", |cell, _, op| {
            let n = op.get("raced_delete")?;
            Some(format!("- {} {n}", cell.workload))
        });
        assert_eq!(raced, "\n**Raced**\n\n- a 3\n");
        assert_eq!(operation_notes(&cells, "None", |_, _, _| None), "");
    }
}
