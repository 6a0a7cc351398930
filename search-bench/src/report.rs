//! search-bench's report: common's frame (tables, among them the client's and the server's CPU
//! per operation; systems, environment, notes) followed by what was verified (queries checked,
//! top-10 overlap), and the notes that put each engine's CPU in words. Pure functions of the
//! report.

use common::export::ToolReport;
use common::human::format_latency_ns;
use common::report::{
    Table, markdown_frame, method_line, shared_tables, system_line, terminal_frame,
};
use common::results::{Cell, Report};
use serde_json::Value;

/// search-bench's [`ToolReport`]: the shared verdicts and charts, the frame with its own
/// tables after it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchReport;

impl ToolReport for SearchReport {
    fn terminal(&self, report: &Report) -> String {
        let frame = terminal_frame(
            report,
            &method_line(report),
            &shared_tables(report),
            &system_line,
        );
        format!("{frame}{}", text(report))
    }

    fn markdown(&self, report: &Report) -> String {
        let frame = markdown_frame(report, &shared_tables(report), "");
        format!("{frame}\n{}", markdown(report))
    }
}

/// common's grid, with `–` where a cell has no such figure.
fn grid(report: &Report, title: &str, figure: impl Fn(&Cell) -> Option<String>) -> Table {
    common::report::grid(report, title, |cell| {
        figure(cell).unwrap_or_else(|| "–".to_owned())
    })
}

/// Queries checked against the exact answers, and the top-10 overlap with the reference.
pub fn verification_table(report: &Report) -> Table {
    grid(
        report,
        "Verification (queries whose answer matched the exact one · top-10 overlap with the reference)",
        |cell| {
            let verified = cell.extra.get("queries_verified")?.as_u64()?;
            let overlap = cell
                .extra
                .get("top10_overlap")
                .and_then(|o| o.get("mean"))
                .and_then(Value::as_f64)
                .map_or_else(String::new, |m| format!(" · {:.0}%", m * 100.0));
            Some(format!("{verified}{overlap}"))
        },
    )
}

/// One sentence per engine with a local server: the client's CPU per query beside the
/// server's, for the `match` workload and for ingest.
pub fn cpu_notes(report: &Report) -> Vec<String> {
    report
        .cells
        .iter()
        .filter_map(|cell| {
            let server = cell.server_cpu_ns_per_op?;
            let client = cell.client_cpu_ns_per_op?;
            let share = client / (client + server).max(f64::MIN_POSITIVE);
            let per = if cell.unit == "docs/s" { "document" } else { "query" };
            Some(format!(
                "{} · {}: search-bench used {} of CPU per {per}, the server {} ({:.1}% of the CPU both spent was the client's; server CPU from /proc/<pid>/stat at 10 ms resolution).",
                cell.workload,
                cell.system,
                format_latency_ns(client.round() as u64),
                format_latency_ns(server.round() as u64),
                share * 100.0
            ))
        })
        .collect()
}

/// The extra table for the terminal (the CPU table is the shared report's).
pub fn text(report: &Report) -> String {
    format!("\n{}", verification_table(report).to_text())
}

/// The extra table for `report.md`.
pub fn markdown(report: &Report) -> String {
    verification_table(report).to_markdown()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::environment::Environment;
    use common::results::{Status, SystemInfo, Throughput};
    use serde_json::json;

    fn sample() -> Report {
        let system = |name: &str| SystemInfo {
            name: name.into(),
            kind: name.into(),
            version: format!("{name} 1.0"),
            ..SystemInfo::default()
        };
        let mut report = Report::begin(
            "search-bench",
            "0.1.0",
            "search",
            "synthetic",
            json!({"rounds": 2, "duration_s": 1.0, "warmup": 1}),
            Environment::default(),
        );
        report.systems = vec![system("tantivy"), system("opensearch")];
        report.reference = Some("tantivy".into());
        let mut cell = |workload: &str, system: &str, unit: &str, server: Option<f64>| {
            let mut c = Cell::new(workload, system, unit, 16, 2);
            c.throughput = Throughput::from_rounds(vec![1_000.0, 1_100.0]);
            c.client_cpu_ns_per_op = Some(12_345.0);
            c.extra.insert("queries_verified".into(), json!(256));
            if let Some(server) = server {
                c.server_cpu_source = Some("process tree of PID 42".into());
                c.server_cpu_ns_per_op = Some(server);
                c.server_cpu_cores = Some(0.5);
                c.extra.insert(
                    "top10_overlap".into(),
                    json!({"with": "tantivy", "mean": 0.97, "queries": 256}),
                );
            }
            report.cells.push(c);
        };
        cell("match", "tantivy", "q/s", None);
        cell("match", "opensearch", "q/s", Some(111_111.0));
        cell("ingest", "tantivy", "docs/s", None);
        cell("ingest", "opensearch", "docs/s", Some(40_000.0));
        report.cells[1].status = Status::Ok;
        report
    }

    #[test]
    fn extra_tables_snapshot() {
        insta::assert_snapshot!("extra_tables_text", text(&sample()));
        insta::assert_snapshot!("extra_tables_markdown", markdown(&sample()));
    }

    #[test]
    fn the_report_is_the_shared_one_with_the_extra_tables_after_it() {
        let report = sample();
        assert_eq!(
            SearchReport.markdown(&report),
            format!(
                "{}\n{}",
                common::report::render_markdown(&report),
                markdown(&report)
            )
        );
        assert_eq!(
            SearchReport.terminal(&report),
            format!(
                "{}{}",
                common::report::render_terminal(&report),
                text(&report)
            )
        );
    }

    #[test]
    fn cpu_notes_name_the_workload_the_engine_and_both_costs() {
        let notes = cpu_notes(&sample());
        assert_eq!(notes.len(), 2);
        assert!(notes[0].starts_with("match · opensearch"), "{}", notes[0]);
        assert!(notes[0].contains("per query"), "{}", notes[0]);
        assert!(notes[1].contains("per document"), "{}", notes[1]);
    }
}
