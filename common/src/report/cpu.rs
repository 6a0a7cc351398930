//! The CPU table: the client's CPU per operation beside the server's, and the cores the server
//! kept busy, for every cell whose tool read where its server runs.

use super::{Table, grid};
use crate::human::format_latency_ns;
use crate::results::{Cell, Report};

/// `client / server` CPU per operation, with the server's cores: `12.3 µs / 45.6 µs (1.20
/// cores)`, `12.3 µs / in process`, `12.3 µs / not measured: remote`. `None` when no cell
/// says where its server runs.
pub fn cpu_table(report: &Report) -> Option<Table> {
    if !report.cells.iter().any(|c| c.server_cpu_source.is_some()) {
        return None;
    }
    Some(grid(
        report,
        "CPU per operation: client / server (the server's process tree, in cores over the window)",
        cpu_figure,
    ))
}

/// One cell of [`cpu_table`].
pub fn cpu_figure(cell: &Cell) -> String {
    let client = per_op(cell.client_cpu_ns_per_op);
    let server = match (cell.server_cpu_ns_per_op, cell.server_cpu_cores) {
        (Some(ns), Some(cores)) => format!("{} ({cores:.2} cores)", per_op(Some(ns))),
        (Some(ns), None) => per_op(Some(ns)),
        _ => cell
            .server_cpu_source
            .clone()
            .unwrap_or_else(|| "–".to_owned()),
    };
    format!("{client} / {server}")
}

fn per_op(ns: Option<f64>) -> String {
    ns.map_or_else(|| "–".to_owned(), |ns| format_latency_ns(ns.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_cpu_stands_beside_the_clients() {
        let mut cell = Cell::new("read 4c", "pg", "ops/s", 4, 1);
        cell.client_cpu_ns_per_op = Some(12_345.0);
        cell.server_cpu_source = Some("process tree of PID 7".into());
        cell.server_cpu_ns_per_op = Some(45_600.0);
        cell.server_cpu_cores = Some(1.2);
        assert_eq!(cpu_figure(&cell), "12.3 µs / 45.6 µs (1.20 cores)");
        cell.server_cpu_ns_per_op = None;
        cell.server_cpu_source = Some("in process".into());
        assert_eq!(cpu_figure(&cell), "12.3 µs / in process");
        let report = Report {
            cells: vec![Cell::new("read 4c", "pg", "ops/s", 4, 1)],
            ..crate::export::fixture::report()
        };
        assert!(cpu_table(&report).is_none());
    }
}
