//! Reports: pure functions from a [`Report`] to text (terminal, Markdown) and charts (SVG),
//! in the seeds' shape: workloads as rows, systems as columns. The charts every run gets:
//! throughput per round, the latency percentile spectrum and latency over time.

pub mod axis;
pub mod chart;
mod cpu;
pub mod spectrum;
mod svg;
mod table;
pub mod timeline;

pub use cpu::{cpu_figure, cpu_table};
pub use spectrum::render_spectrum;
pub use svg::{render_svg_charts, render_throughput};
pub use table::Table;
pub use timeline::render_timeline;

use std::time::Duration;

use crate::human::{format_bytes, format_duration, format_latency_ns, format_rate};
use crate::results::{Cell, Metric, Report, Status, SystemInfo, Throughput};
use crate::verdict::{self, Judgement};

/// Every system against the reference, judged from the report's cells (DESIGN rule 11).
pub fn judge(report: &Report) -> Judgement {
    verdict::judge_report(report, verdict::threshold_of(report))
}

fn find<'a>(report: &'a Report, workload: &str, system: &str) -> Option<&'a Cell> {
    report
        .cells
        .iter()
        .find(|c| c.workload == workload && c.system == system)
}

/// A column header: the system's name, its labels, and `(ref)` for the reference.
fn column(report: &Report, system: &str) -> String {
    let info = report.systems.iter().find(|s| s.name == system);
    let mut header = system.to_owned();
    if report.reference.as_deref() == Some(system) && report.systems.len() > 1 {
        header.push_str(" (ref)");
    }
    for label in info.map(|s| s.labels.as_slice()).unwrap_or_default() {
        header.push_str(&format!(" [{label}]"));
    }
    header
}

/// A table with one row per workload and one column per system (headed with its labels and
/// `(ref)`), each cell `figure(cell)`, or `–` where the workload has no cell for that system.
pub fn grid(report: &Report, title: &str, figure: impl Fn(&Cell) -> String) -> Table {
    let mut header = vec!["workload".to_owned()];
    header.extend(report.systems.iter().map(|s| column(report, &s.name)));
    let rows =
        chart::workloads(report)
            .into_iter()
            .map(|workload| {
                let mut row = vec![workload.clone()];
                row.extend(report.systems.iter().map(|s| {
                    find(report, &workload, &s.name).map_or_else(|| "–".to_owned(), &figure)
                }));
                row
            })
            .collect();
    Table {
        title: title.to_owned(),
        header,
        rows,
        numeric: true,
    }
}

/// A throughput as the seeds' tables print it: the median, with the round range (min–max)
/// when there was more than one round.
pub fn median_and_range(t: &Throughput) -> String {
    if t.rounds.len() > 1 {
        format!(
            "{} ({}–{})",
            format_rate(t.median),
            format_rate(t.min),
            format_rate(t.max)
        )
    } else {
        format_rate(t.median)
    }
}

/// How busy the client's busiest lane was beside a figure (` · client 34%`), so a reader sees
/// how close the client came to being the limit, with the least busy lane's share when the
/// lanes were not alike (` · client 92% (lanes 41–92%)`); nothing when it was not measured.
pub fn client_share(cell: &Cell) -> String {
    let Some(busy) = cell.client_busy else {
        return String::new();
    };
    match cell.client_busy_least.filter(|least| busy - least >= 0.05) {
        Some(least) => format!(
            " · client {:.0}% (lanes {:.0}–{:.0}%)",
            busy * 100.0,
            least * 100.0,
            busy * 100.0
        ),
        None => format!(" · client {:.0}%", busy * 100.0),
    }
}

/// The main table: median throughput per workload and system, with the round spread and how
/// busy the client was.
pub fn throughput_table(report: &Report) -> Table {
    let unit = report.cells.first().map_or("ops/s", |c| c.unit.as_str());
    let rounds = report
        .options
        .get("rounds")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    // Workloads measured in different units (docs/s beside queries/s) say theirs on each row.
    let mixed_units = report.cells.iter().any(|c| c.unit != unit);
    let shown = if mixed_units { "unit per row" } else { unit };
    let forks = report.forks.len();
    let title = if forks >= 2 {
        format!(
            "Throughput ({shown}, median of {forks} forks' medians of {rounds} round{} each, min–max of every round)",
            if rounds == 1 { "" } else { "s" }
        )
    } else if rounds == 1 {
        format!("Throughput ({shown}, one round)")
    } else {
        format!("Throughput ({shown}, median of {rounds} rounds, min–max)")
    };
    let mut table = grid(report, &title, |cell| match cell.usable_throughput() {
        Some(t) => format!("{}{}", median_and_range(t), client_share(cell)),
        None => cell.status.as_str().to_owned(),
    });
    if mixed_units {
        for row in &mut table.rows {
            if let Some(cell) = report.cells.iter().find(|c| c.workload == row[0]) {
                row[0] = format!("{} ({})", row[0], cell.unit);
            }
        }
    }
    table
}

/// Latency p50 / p99 from the pooled histograms of every measured round.
pub fn latency_table(report: &Report) -> Table {
    let open_loop = report.cells.iter().any(|c| c.target_rate.is_some());
    let title = if open_loop {
        "Latency p50 / p99 (from each operation's intended start)"
    } else {
        "Latency p50 / p99"
    };
    grid(report, title, |cell| match (cell.status, cell.latency_ns) {
        (Status::Ok, Some(l)) => format!(
            "{} / {}",
            format_latency_ns(l.p50),
            format_latency_ns(l.p99)
        ),
        _ => cell.status.as_str().to_owned(),
    })
}

/// Each system against the reference: the verdict tables of `judgement` (throughput, and p50
/// and p99 latency where rounds recorded them), each pair's ratio with its interval, or why it
/// has none.
pub fn verdict_tables(report: &Report, judgement: &Judgement) -> Vec<Table> {
    let Some(reference) = report.reference.as_deref() else {
        return Vec::new();
    };
    if report.systems.len() < 2 {
        return Vec::new();
    }
    let percent = verdict::threshold_of(report) * 100.0;
    let interval = verdict::interval_heading();
    let figure = |cell: &Cell, metric: Metric| -> Option<String> {
        if let Some(v) = judgement
            .verdicts
            .iter()
            .find(|v| v.workload == cell.workload && v.system == cell.system && v.metric == metric)
        {
            return Some(verdict::describe(v));
        }
        judgement
            .no_verdicts
            .iter()
            .find(|v| v.workload == cell.workload && v.system == cell.system && v.metric == metric)
            .map(|v| format!("no verdict: {}", v.reason))
    };
    let mut tables = vec![grid(
        report,
        &format!(
            "Against {reference}: throughput (ratio of medians [{interval}]; parity within ±{percent:.0}%)"
        ),
        |cell| {
            if cell.system == reference {
                return "—".to_owned();
            }
            if cell.status != Status::Ok {
                return cell.status.as_str().to_owned();
            }
            figure(cell, Metric::Throughput).unwrap_or_else(|| cell.status.as_str().to_owned())
        },
    )];
    let judged_latency = judgement
        .verdicts
        .iter()
        .any(|v| v.metric != Metric::Throughput);
    if judged_latency {
        tables.push(grid(
            report,
            &format!(
                "Against {reference}: latency p50 · p99 (ratio of medians of the rounds' percentiles [{interval}]; below 1 is faster)"
            ),
            |cell| {
                if cell.system == reference {
                    return "—".to_owned();
                }
                if cell.status != Status::Ok {
                    return cell.status.as_str().to_owned();
                }
                let p50 = figure(cell, Metric::LatencyP50);
                let p99 = figure(cell, Metric::LatencyP99);
                match (p50, p99) {
                    (Some(a), Some(b)) if a == b => a,
                    (Some(a), Some(b)) => format!("{a} · {b}"),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => cell.status.as_str().to_owned(),
                }
            },
        ));
    }
    tables
}

/// Why each cell that is not `ok` has no figure.
pub fn problems(report: &Report) -> Vec<String> {
    report
        .cells
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| {
            format!(
                "{} · {}: {} — {}",
                c.workload,
                c.system,
                c.status.as_str(),
                c.reason.as_deref().unwrap_or("no reason recorded")
            )
        })
        .collect()
}

pub fn method_line(report: &Report) -> String {
    let get = |key: &str| report.options.get(key).cloned().unwrap_or_default();
    let rate = match get("rate_per_s").as_f64() {
        Some(rate) => format!("open loop at {} ops/s", format_rate(rate)),
        None => "closed loop".to_owned(),
    };
    let duration = get("duration_s").as_f64().map_or_else(
        || "?".to_owned(),
        |s| format_duration(Duration::from_secs_f64(s)),
    );
    let count = |key: &str, one: &str, many: &str| match get(key).as_u64() {
        Some(0) => format!("no {one}"),
        Some(1) => format!("1 {one}"),
        Some(n) => format!("{n} {many}"),
        None => format!("? {many}"),
    };
    let processes = match report.forks.len() {
        0 | 1 => String::new(),
        n => format!(" in each of {n} forks (fresh processes, one after another)"),
    };
    format!(
        "{} × {duration} per workload and system{processes}, {} discarded, systems interleaved in alternating order; {rate}.",
        count("rounds", "measured round", "measured rounds"),
        count("warmup", "warm-up", "warm-ups"),
    )
}

pub fn systems_table(report: &Report) -> Table {
    let rows = report
        .systems
        .iter()
        .map(|s| {
            let verified = s
                .verified
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let floor = s
                .durable_write_floor_ns
                .map_or_else(|| "–".to_owned(), floor_text);
            vec![s.name.clone(), s.version.clone(), verified, floor]
        })
        .collect();
    Table {
        title: "Systems (as each reported itself)".to_owned(),
        header: vec![
            "system".into(),
            "version".into(),
            "verified".into(),
            "durable-write floor".into(),
        ],
        rows,
        numeric: false,
    }
}

/// The machine, the durable-write floor, the load gate and the data, one line each.
pub fn environment_lines(report: &Report) -> Vec<String> {
    let env = &report.environment;
    let mut lines = vec![format!(
        "{} · {} cores · {} · Linux {} · load {:.2} at start{}",
        env.cpu_model,
        env.cores,
        format_bytes(env.memory_bytes),
        env.kernel,
        env.loadavg_start[0],
        env.loadavg_end
            .map_or(String::new(), |l| format!(", {:.2} at end", l[0])),
    )];
    if let (Some(ns), Some(path)) = (env.durable_write_floor_ns, &env.durable_write_floor_path) {
        lines.push(format!(
            "durable-write floor (4 KiB O_DSYNC, median) {} in {path}",
            format_latency_ns(ns)
        ));
    }
    if let Some(gate) = &env.load_gate {
        lines.push(format!(
            "load gate {:.2}: {} after {:.0}s (load {:.2})",
            gate.threshold,
            if gate.satisfied {
                "passed"
            } else {
                "NOT reached"
            },
            gate.waited_s,
            gate.loadavg_1m
        ));
    }
    if let Some(data) = &report.data {
        lines.push(format!(
            "data: {} (seed {}, checksum {})",
            data.description, data.seed, data.checksum
        ));
    }
    lines
}

fn title(report: &Report) -> String {
    format!("{} {} · {}", report.tool, report.suite, report.section)
}

/// The tables of the shared report: throughput, latency, the client's and the server's CPU
/// (when the tool read where the server runs) and, with a reference, the verdicts.
pub fn shared_tables(report: &Report) -> Vec<Table> {
    let mut tables = vec![throughput_table(report), latency_table(report)];
    tables.extend(cpu_table(report));
    tables.extend(verdict_tables(report, &judge(report)));
    tables
}

/// `name: version`, a system's line under the terminal summary.
pub fn system_line(system: &SystemInfo) -> String {
    format!("{}: {}", system.name, system.version)
}

/// The terminal summary printed at the end of a run.
pub fn render_terminal(report: &Report) -> String {
    terminal_frame(
        report,
        &method_line(report),
        &shared_tables(report),
        &system_line,
    )
}

/// A terminal summary: the title, `method` (most tools' is [`method_line`]), `tables`, the cells
/// without a figure, one line per system (`line`), the environment and the notes. Every tool's
/// summary has this frame.
pub fn terminal_frame(
    report: &Report,
    method: &str,
    tables: &[Table],
    line: &dyn Fn(&SystemInfo) -> String,
) -> String {
    let mut out = format!("\n{}\n{method}\n", title(report));
    for table in tables {
        out.push('\n');
        out.push_str(&table.to_text());
    }
    out.push_str(&problems_text(report));
    out.push('\n');
    for s in &report.systems {
        out.push_str(&line(s));
        out.push('\n');
    }
    for line in environment_lines(report) {
        out.push_str(&format!("{line}\n"));
    }
    for note in &report.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// `report.md`: the same figures with the systems' evidence, environment and notes in full.
pub fn render_markdown(report: &Report) -> String {
    markdown_frame(report, &shared_tables(report), "")
}

/// A `report.md`: the title, run and method, `tables`, the cells without a figure, the
/// systems' evidence, `more` (a tool's own sections, Markdown), the environment and the notes.
/// Every tool's report has this frame.
pub fn markdown_frame(report: &Report, tables: &[Table], more: &str) -> String {
    let mut out = markdown_head(report, &method_line(report), tables);
    out.push_str(more);
    out.push_str(&environment_markdown(report));
    out.push_str(&notes_markdown(report));
    out
}

/// How every `report.md` opens: the title, the run line, `method`, `tables`, the cells without
/// a figure and the systems' evidence.
pub fn markdown_head(report: &Report, method: &str, tables: &[Table]) -> String {
    let mut out = format!(
        "# {}\n\n{}\n\n{method}\n\n",
        title(report),
        run_line(report)
    );
    for (i, table) in tables.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&table.to_markdown());
    }
    out.push_str(&problems_markdown(report));
    out.push('\n');
    out.push_str(&systems_table(report).to_markdown());
    out
}

/// The environment section of a `report.md`.
pub fn environment_markdown(report: &Report) -> String {
    let mut out = "\n**Environment**\n\n".to_owned();
    for line in environment_lines(report) {
        out.push_str(&format!("- {line}\n"));
    }
    out
}

/// `Run `ID`, started …, finished …; TOOL VERSION (commit …).`: the line under the title of
/// every `report.md`.
pub fn run_line(report: &Report) -> String {
    format!(
        "Run `{}`, started {}{}; {} {} (commit {}).",
        report.run_id,
        report.started_at,
        report
            .finished_at
            .as_deref()
            .map_or(" (not finished)".to_owned(), |f| format!(", finished {f}")),
        report.tool,
        report.tool_version,
        report.git_commit.as_deref().unwrap_or("unknown"),
    )
}

/// The cells without a figure and why, as a terminal summary lists them after its tables;
/// empty when every cell has one.
pub fn problems_text(report: &Report) -> String {
    listed(&problems(report), "\nCells without a figure:\n", "  ")
}

/// The same, as `report.md` lists them.
pub fn problems_markdown(report: &Report) -> String {
    listed(&problems(report), "\n**Cells without a figure**\n\n", "- ")
}

/// The notes under their heading, as `report.md` ends; empty without notes.
pub fn notes_markdown(report: &Report) -> String {
    listed(
        &report.notes,
        "\n**What this run does not establish, and other notes**\n\n",
        "- ",
    )
}

/// `heading` and one line per item, each after `marker`; nothing when there are no items.
fn listed(items: &[String], heading: &str, marker: &str) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = heading.to_owned();
    for item in items {
        out.push_str(&format!("{marker}{item}\n"));
    }
    out
}

/// A durable-write floor with the commit rate it bounds: `1.20 ms (≤ 833 commits/s per
/// connection)`.
pub fn floor_text(ns: u64) -> String {
    format!(
        "{} (≤ {} commits/s per connection)",
        format_latency_ns(ns),
        format_rate(1e9 / ns as f64)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::{Counts, VerdictKind};
    use crate::testing::synthetic_cell;

    pub fn cell(workload: &str, system: &str, rounds: &[f64]) -> Cell {
        let latency = [550_000, 900_000, 1_200_000, 2_000_000, 5_000_000];
        let mut cell = synthetic_cell((workload, system, "ops/s"), 16, rounds, latency, 600_000.0);
        cell.counts = Counts {
            ok: 1_000,
            error: 0,
            timeout: 0,
        };
        cell
    }

    pub fn sample() -> Report {
        let system = crate::testing::synthetic_system;
        let mut invalid = cell("read 16c", "b", &[5_000.0, 5_100.0]);
        invalid.status = Status::Invalid;
        invalid.reason = Some("returned 999 rows, expected 1,000".into());
        Report {
            reference: Some("a".into()),
            systems: vec![system("a"), system("b"), system("c")],
            cells: vec![
                cell("write 1c", "a", &[1_000.0, 1_050.0, 1_020.0]),
                cell("write 1c", "b", &[1_040.0, 1_100.0, 1_090.0]),
                cell("write 1c", "c", &[2_000.0, 2_100.0, 2_050.0]),
                cell("read 16c", "a", &[9_000.0, 9_100.0, 9_050.0]),
                invalid,
                cell("read 16c", "c", &[3_000.0, 3_100.0, 3_050.0]),
            ],
            notes: vec!["all requests from one client host".into()],
            ..crate::testing::synthetic_report(
                "sql-bench",
                "crud",
                "C0 — 1 node, no replication",
                serde_json::json!({"rounds": 3, "duration_s": 10.0, "warmup": 1}),
            )
        }
    }

    #[test]
    fn a_load_gate_not_reached_is_said_beside_the_load_it_saw() {
        let mut report = sample();
        report.environment.load_gate = Some(crate::environment::LoadGate {
            threshold: 1.0,
            waited_s: 120.0,
            satisfied: false,
            loadavg_1m: 3.25,
        });
        let lines = environment_lines(&report);
        assert!(
            lines.contains(&"load gate 1.00: NOT reached after 120s (load 3.25)".to_owned()),
            "{lines:?}"
        );
        report.environment.load_gate.as_mut().unwrap().satisfied = true;
        assert!(
            environment_lines(&report)
                .iter()
                .any(|l| l.contains("passed after 120s"))
        );
    }

    #[test]
    fn verdicts_come_from_intervals_and_invalid_cells_get_none() {
        let judgement = judge(&sample());
        let find = |w: &str, s: &str| {
            judgement
                .verdicts
                .iter()
                .find(|v| v.workload == w && v.system == s && v.metric == Metric::Throughput)
        };
        // b's rounds lie 2–8% above a's: the interval crosses the 5% threshold.
        assert_eq!(
            find("write 1c", "b").unwrap().verdict,
            VerdictKind::Inconclusive
        );
        let c = find("write 1c", "c").unwrap();
        assert_eq!(c.verdict, VerdictKind::Faster);
        assert!((c.ratio - 2050.0 / 1020.0).abs() < 1e-9);
        assert_eq!(find("read 16c", "c").unwrap().verdict, VerdictKind::Slower);
        assert!(find("read 16c", "b").is_none());
        assert!(find("write 1c", "a").is_none());
        let none = judgement
            .no_verdicts
            .iter()
            .find(|v| v.workload == "read 16c" && v.system == "b")
            .unwrap();
        assert!(none.reason.contains("no throughput figure"), "{none:?}");
    }

    #[test]
    fn a_single_round_gives_no_verdict() {
        let mut report = sample();
        for cell in &mut report.cells {
            cell.throughput =
                Throughput::from_rounds(vec![cell.throughput.as_ref().unwrap().median]);
        }
        let judgement = judge(&report);
        assert!(judgement.verdicts.is_empty());
        assert!(
            judgement
                .no_verdicts
                .iter()
                .any(|v| v.reason == "1 measured round (a verdict needs 3 a side)")
        );
    }

    #[cfg(feature = "schema")]
    #[test]
    fn the_sample_report_matches_the_schema_and_a_broken_one_does_not() {
        use crate::testing::schema_violations;
        let mut report = serde_json::to_value(sample()).unwrap();
        report["options"] = serde_json::json!({
            "targets": [], "reference": null, "duration_s": 10.0, "warmup": 1, "rounds": 3,
            "connections": 16, "rate_per_s": null, "seed": 42, "output": null,
            "ceiling_s": 120.0, "load_gate": null, "quiet": false,
            // sql-bench crud's own options (the sample is a crud report).
            "workloads": [], "config": "C0", "allow_unmatched_durability": false,
            "replicas": [], "read_from": "primary", "read_rows": 1000, "value_size": 100,
            "keep_data": false,
            "insecure_skip_verify": false, "password_files": []
        });
        report["environment"]["cores"] = 2.into();
        schema_violations(&report).unwrap();
        report["cells"][0]["status"] = "fast".into();
        let violations = schema_violations(&report).unwrap_err();
        assert!(violations.contains("/cells/0/status"), "{violations}");
    }

    #[test]
    fn report_snapshots() {
        let report = sample();
        crate::assert_report_snapshots!(render_terminal(&report), render_markdown(&report));
    }
}
