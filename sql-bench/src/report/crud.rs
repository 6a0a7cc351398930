//! The crud suite's report: seed 000's shared tables (throughput, latency, the verdicts) and,
//! under them, the durability evidence each system's servers gave.

use common::export::ToolReport;
use common::report::{render_markdown, render_terminal};
use common::results::Report;

use super::evidence;

/// `sql-bench crud`'s terminal summary, `report.md` and charts.
#[derive(Debug, Clone, Copy, Default)]
pub struct CrudReport;

impl ToolReport for CrudReport {
    fn terminal(&self, report: &Report) -> String {
        let tables = render_terminal(report);
        match evidence::render_text(report) {
            Some(evidence) => format!("{tables}\n{evidence}"),
            None => tables,
        }
    }

    fn markdown(&self, report: &Report) -> String {
        render_markdown(report) + &evidence::render_markdown(report).unwrap_or_default()
    }
}
