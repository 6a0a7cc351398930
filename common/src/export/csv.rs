//! `results.csv`: one row per cell with every figure of the core model, the unit of each column
//! in its name (`_ns`, `_ops_per_s`; the `unit` column says what one operation is), quoted as
//! RFC 4180 says (CRLF line ends, a field with a comma, quote or line break in double quotes,
//! quotes doubled). Lists (per-round figures, labels) are one field, `;`-separated. A column
//! added later goes at the end (users read the file by position too): the server's CPU comes
//! after the HDR file names, not beside the client's CPU.

use crate::export::names::{cell_stems, hgrm_file, hlog_file};
use crate::export::{Export, Exporter};
use crate::results::{Cell, Metric, Percentiles, Report, Verdict};

/// `results.csv`.
pub struct Csv;

impl Exporter for Csv {
    fn export(&self, report: &Report) -> Vec<Export> {
        vec![Export::new("results.csv", render_csv(report))]
    }
}

const PERCENTILES: [&str; 6] = ["p50", "p95", "p99", "p999", "max", "mean"];

/// The header row: every column, in order.
pub fn header() -> Vec<String> {
    let mut columns: Vec<String> = [
        "workload",
        "system",
        "status",
        "reason",
        "unit",
        "labels",
        "connections",
        "rounds_planned",
        "rounds_measured",
        "throughput_median_ops_per_s",
        "throughput_min_ops_per_s",
        "throughput_max_ops_per_s",
        "throughput_rounds_ops_per_s",
    ]
    .map(str::to_owned)
    .to_vec();
    for prefix in ["latency", "service_time", "schedule_lag"] {
        columns.extend(PERCENTILES.map(|p| format!("{prefix}_{p}_ns")));
    }
    columns.extend(
        [
            "latency_p50_rounds_ns",
            "latency_p99_rounds_ns",
            "count_ok",
            "count_error",
            "count_timeout",
            "target_rate_ops_per_s",
            "achieved_rate_ops_per_s",
            "missed_ticks",
            "client_cpu_ns_per_op",
            "reference",
        ]
        .map(str::to_owned),
    );
    for metric in Metric::ALL {
        let m = metric.as_str();
        columns.extend([
            format!("{m}_ratio"),
            format!("{m}_ratio_low"),
            format!("{m}_ratio_high"),
            format!("{m}_ratio_confidence"),
            format!("{m}_verdict"),
        ]);
    }
    columns.extend(
        [
            "latency_hgrm_file",
            "latency_hlog_file",
            "server_cpu_source",
            "server_cpu_ns_per_op",
            "server_cpu_cores",
        ]
        .map(str::to_owned),
    );
    columns
}

fn number(value: Option<f64>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

fn count(value: Option<u64>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

fn percentiles(p: Option<&Percentiles>) -> [String; 6] {
    match p {
        Some(p) => [
            p.p50.to_string(),
            p.p95.to_string(),
            p.p99.to_string(),
            p.p999.to_string(),
            p.max.to_string(),
            p.mean.to_string(),
        ],
        None => Default::default(),
    }
}

fn joined<T: ToString>(values: impl IntoIterator<Item = T>) -> String {
    values
        .into_iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(";")
}

/// One cell's row, in [`header`]'s order.
fn row(report: &Report, cell: &Cell, stem: &str) -> Vec<String> {
    let t = cell.throughput.as_ref();
    let mut row = vec![
        cell.workload.clone(),
        cell.system.clone(),
        cell.status.as_str().to_owned(),
        cell.reason.clone().unwrap_or_default(),
        cell.unit.clone(),
        cell.labels.join(";"),
        cell.connections.to_string(),
        cell.rounds_planned.to_string(),
        t.map_or(0, |t| t.rounds.len()).to_string(),
        number(t.map(|t| t.median)),
        number(t.map(|t| t.min)),
        number(t.map(|t| t.max)),
        t.map_or_else(String::new, |t| joined(&t.rounds)),
    ];
    row.extend(percentiles(cell.latency_ns.as_ref()));
    row.extend(percentiles(cell.service_time_ns.as_ref()));
    row.extend(percentiles(cell.schedule_lag_ns.as_ref()));
    row.extend([
        joined(cell.latency_rounds_ns.iter().map(|p| p.p50)),
        joined(cell.latency_rounds_ns.iter().map(|p| p.p99)),
        cell.counts.ok.to_string(),
        cell.counts.error.to_string(),
        cell.counts.timeout.to_string(),
        number(cell.target_rate),
        number(cell.achieved_rate),
        count(cell.missed_ticks),
        number(cell.client_cpu_ns_per_op),
    ]);
    let verdict = |metric: Metric| -> Option<&Verdict> {
        report
            .verdicts
            .iter()
            .find(|v| v.workload == cell.workload && v.system == cell.system && v.metric == metric)
    };
    let judged = Metric::ALL.iter().find_map(|m| verdict(*m));
    row.push(judged.map_or_else(String::new, |v| v.reference.clone()));
    for metric in Metric::ALL {
        match verdict(metric) {
            Some(v) => row.extend([
                v.ratio.to_string(),
                v.interval[0].to_string(),
                v.interval[1].to_string(),
                v.confidence.to_string(),
                v.verdict.as_str().to_owned(),
            ]),
            None => row.extend(std::iter::repeat_n(String::new(), 5)),
        }
    }
    let has_histogram = cell.histogram_b64.is_some();
    row.push(if has_histogram {
        hgrm_file(stem)
    } else {
        String::new()
    });
    row.push(if cell.latency_per_second_b64.is_empty() {
        String::new()
    } else {
        hlog_file(stem)
    });
    row.extend([
        cell.server_cpu_source.clone().unwrap_or_default(),
        number(cell.server_cpu_ns_per_op),
        number(cell.server_cpu_cores),
    ]);
    row
}

/// One field as RFC 4180 wants it.
pub fn field(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// The whole file.
pub fn render_csv(report: &Report) -> String {
    let mut out = String::new();
    let line = |out: &mut String, fields: &[String]| {
        let fields: Vec<String> = fields.iter().map(|f| field(f)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    };
    line(&mut out, &header());
    for (cell, stem) in report.cells.iter().zip(cell_stems(report)) {
        line(&mut out, &row(report, cell, &stem));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A strict RFC 4180 reader: records of fields, quoted fields may hold anything.
    fn parse(text: &str) -> Vec<Vec<String>> {
        let mut records = Vec::new();
        let mut record = Vec::new();
        let mut field = String::new();
        let mut chars = text.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => record.push(std::mem::take(&mut field)),
                (false, '\r') => {
                    assert_eq!(chars.next(), Some('\n'), "CR without LF");
                    record.push(std::mem::take(&mut field));
                    records.push(std::mem::take(&mut record));
                }
                (false, c) => {
                    assert!(c != '\n', "a bare LF outside quotes");
                    field.push(c);
                }
            }
        }
        assert!(
            record.is_empty() && field.is_empty(),
            "the last record ends with CRLF"
        );
        records
    }

    #[test]
    fn every_row_has_the_headers_columns_and_quoting_round_trips() {
        let mut report = crate::export::fixture::report();
        report.cells[0].reason = Some("said \"no\", then\nstopped".into());
        let text = render_csv(&report);
        let records = parse(&text);
        let header = &records[0];
        assert_eq!(header, &super::header());
        assert_eq!(records.len(), report.cells.len() + 1);
        for record in &records[1..] {
            assert_eq!(record.len(), header.len());
        }
        let column = |name: &str| header.iter().position(|h| h == name).unwrap();
        let first = &records[1];
        assert_eq!(first[column("reason")], "said \"no\", then\nstopped");
        let cell = &report.cells[0];
        let t = cell.throughput.as_ref().unwrap();
        let median: f64 = first[column("throughput_median_ops_per_s")]
            .parse()
            .unwrap();
        assert_eq!(median, t.median);
        let rounds: Vec<f64> = first[column("throughput_rounds_ops_per_s")]
            .split(';')
            .map(|r| r.parse().unwrap())
            .collect();
        assert_eq!(rounds, t.rounds);
        let p99: u64 = first[column("latency_p99_ns")].parse().unwrap();
        assert_eq!(p99, cell.latency_ns.unwrap().p99);
        assert!(first[column("latency_hgrm_file")].starts_with("hdr/"));
        // A judged cell carries its ratio to the reference.
        let judged = records[1..]
            .iter()
            .find(|r| !r[column("throughput_verdict")].is_empty())
            .expect("a verdict row");
        assert!(judged[column("throughput_ratio")].parse::<f64>().is_ok());
        assert!(!judged[column("reference")].is_empty());
    }

    /// The server's CPU is three columns at the end, after every column a script may already
    /// read by position; a cell without the figures leaves them empty.
    #[test]
    fn the_servers_cpu_is_appended_after_the_existing_columns() {
        let columns = super::header();
        assert_eq!(
            columns[columns.len() - 5..],
            [
                "latency_hgrm_file",
                "latency_hlog_file",
                "server_cpu_source",
                "server_cpu_ns_per_op",
                "server_cpu_cores"
            ]
        );
        let client = columns
            .iter()
            .position(|c| c == "client_cpu_ns_per_op")
            .unwrap();
        assert_eq!(columns[client + 1], "reference", "nothing moved");
        let mut report = crate::export::fixture::report();
        report.cells[0].server_cpu_source = Some("process tree of PID 7, \"db\"".into());
        report.cells[0].server_cpu_ns_per_op = Some(45_600.5);
        report.cells[0].server_cpu_cores = Some(1.25);
        report.cells[1].server_cpu_source = None;
        report.cells[1].server_cpu_ns_per_op = None;
        report.cells[1].server_cpu_cores = None;
        let records = parse(&render_csv(&report));
        let tail = |r: &[String]| r[r.len() - 3..].to_vec();
        assert_eq!(
            tail(&records[1]),
            ["process tree of PID 7, \"db\"", "45600.5", "1.25"]
        );
        assert_eq!(tail(&records[2]), ["", "", ""]);
    }
}
