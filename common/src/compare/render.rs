//! The comparison as text for the terminal, as Markdown and as JSON: pure functions of a
//! [`Comparison`]. When the runs differ in what makes them comparable (and the user allowed
//! it), the differences come first and every line after them carries the label.

use super::{CellComparison, Comparison, LoneCell, MetricComparison};
use crate::report::Table;
use crate::results::Metric;
use crate::verdict;

/// The label every line carries when the runs differ, naming the kinds of difference.
pub fn caveat(c: &Comparison) -> Option<String> {
    let mut kinds: Vec<&str> = c.differences.iter().map(|d| d.kind).collect();
    kinds.dedup();
    (!kinds.is_empty()).then(|| format!("[runs differ: {}]", kinds.join(", ")))
}

fn figure(m: Option<&MetricComparison>) -> String {
    match m {
        None => "–".into(),
        Some(m) => match (&m.verdict, &m.no_verdict) {
            (Some(v), _) => verdict::describe(v),
            (None, Some(reason)) => format!("no verdict: {reason}"),
            (None, None) => "–".into(),
        },
    }
}

fn status(c: &CellComparison) -> String {
    if c.baseline_status == c.candidate_status {
        c.candidate_status.as_str().to_owned()
    } else {
        format!(
            "{} → {}",
            c.baseline_status.as_str(),
            c.candidate_status.as_str()
        )
    }
}

/// The cells in both runs: one row each, a column per metric.
pub fn table(c: &Comparison) -> Table {
    let interval = verdict::interval_heading();
    let mut header: Vec<String> = ["workload · system", "status", "throughput"]
        .map(str::to_owned)
        .to_vec();
    header.extend(["latency p50".to_owned(), "latency p99".to_owned()]);
    let caveat = caveat(c);
    if caveat.is_some() {
        header.push("caveat".into());
    }
    let rows = c
        .cells
        .iter()
        .map(|cell| {
            let get = |metric: Metric| cell.metrics.iter().find(|m| m.metric == metric);
            let mut row = vec![
                format!("{} · {}", cell.workload, cell.system),
                status(cell),
                figure(get(Metric::Throughput)),
                figure(get(Metric::LatencyP50)),
                figure(get(Metric::LatencyP99)),
            ];
            row.extend(caveat.clone());
            row
        })
        .collect();
    Table {
        title: format!(
            "Candidate / baseline (ratio of medians of the forks, or of the rounds with --assume-stable [{interval}]; parity within ±{:.0}%; latency below 1 is faster)",
            c.threshold * 100.0
        ),
        header,
        rows,
        numeric: true,
    }
}

fn run_line(side: &str, r: &super::RunRef, tool: &str) -> String {
    let load = |l: Option<f64>| l.map_or_else(|| "?".to_owned(), |l| format!("{l:.2}"));
    format!(
        "{side}: {} — run {}, started {}, {tool} {} (commit {}), load {} at start, {} at end",
        r.path,
        r.run_id,
        r.started_at,
        r.tool_version,
        r.git_commit.as_deref().unwrap_or("unknown"),
        load(r.loadavg_1m[0]),
        load(r.loadavg_1m[1])
    )
}

/// The runs, how many processes each was measured in, the calibration probe, and why
/// verdicts were assumed or refused.
fn run_lines(c: &Comparison) -> Vec<String> {
    let processes = |n: u32| match n {
        1 => "one process".to_owned(),
        n => format!("{n} forks"),
    };
    let mut lines = vec![
        run_line("baseline", &c.baseline, &c.tool),
        run_line("candidate", &c.candidate, &c.tool),
        format!(
            "replicates: baseline {}, candidate {} (verdicts across runs are judged on forks)",
            processes(c.forks[0]),
            processes(c.forks[1])
        ),
    ];
    if c.assume_stable {
        lines.push(
            "--assume-stable: one-process sides judged on their rounds, as if run-to-run variance were no larger than the rounds' inside a run".into(),
        );
    }
    match (&c.calibration, &c.refused) {
        (_, Some(refused)) => lines.push(refused.clone()),
        (Some(drift), None) => lines.push(drift.line()),
        (None, None) => lines.push(
            "calibration probe: not in both runs (a run from before it existed); the machines' state was not compared".into(),
        ),
    }
    lines
}

fn lone_lines(side: &str, cells: &[LoneCell], label: &str) -> Vec<String> {
    cells
        .iter()
        .map(|x| {
            format!(
                "{label}only in the {side}: {} · {} ({})",
                x.workload,
                x.system,
                x.status.as_str()
            )
        })
        .collect()
}

/// The text blocks every format shares: the runs, the differences, the lone cells and the
/// regressions, as (heading, lines).
fn sections(c: &Comparison) -> Vec<(String, Vec<String>)> {
    let label = caveat(c).map(|l| format!("{l} ")).unwrap_or_default();
    let mut out = vec![("Runs".to_owned(), run_lines(c))];
    if !c.differences.is_empty() {
        out.push((
            if c.allowed {
                "The runs differ in what makes them comparable (compared anyway: --allow-different-environment)"
            } else {
                "The runs were measured on different machines (figures side by side, no verdicts)"
            }
            .into(),
            c.differences.iter().map(super::Difference::line).collect(),
        ));
    }
    let mut lone = lone_lines("candidate", &c.appeared, &label);
    lone.extend(lone_lines("baseline", &c.disappeared, &label));
    if !lone.is_empty() {
        out.push(("Cells in one run only".into(), lone));
    }
    let regressions = if c.regressions.is_empty() {
        vec![format!(
            "{label}none: no cell is slower beyond ±{:.0}% with its whole interval, and none lost its ok",
            c.threshold * 100.0
        )]
    } else {
        c.regressions
            .iter()
            .map(|r| format!("{label}{r}"))
            .collect()
    };
    out.push((
        format!("Regressions ({})", c.regressions.len()),
        regressions,
    ));
    out
}

fn title(c: &Comparison) -> String {
    format!(
        "{} compare — {} · {}",
        c.tool, c.candidate.suite, c.candidate.section
    )
}

/// The terminal form.
pub fn render_text(c: &Comparison) -> String {
    let all = sections(c);
    let mut out = format!("{}\n", title(c));
    for line in &all[0].1 {
        out.push_str(&format!("{line}\n"));
    }
    for (heading, lines) in all
        .iter()
        .skip(1)
        .take_while(|(h, _)| h.starts_with("The runs differ"))
    {
        out.push_str(&format!("\n{heading}:\n"));
        for line in lines {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out.push('\n');
    out.push_str(&table(c).to_text());
    for (heading, lines) in all
        .iter()
        .skip(1)
        .filter(|(h, _)| !h.starts_with("The runs differ"))
    {
        out.push_str(&format!("\n{heading}:\n"));
        for line in lines {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

/// The Markdown form (a pull request comment).
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!("# {}\n\n", title(c));
    let all = sections(c);
    for line in &all[0].1 {
        out.push_str(&format!("- {line}\n"));
    }
    for (heading, lines) in all
        .iter()
        .skip(1)
        .take_while(|(h, _)| h.starts_with("The runs differ"))
    {
        out.push_str(&format!("\n**{heading}**\n\n"));
        for line in lines {
            out.push_str(&format!("- {line}\n"));
        }
    }
    out.push('\n');
    out.push_str(&table(c).to_markdown());
    for (heading, lines) in all
        .iter()
        .skip(1)
        .filter(|(h, _)| !h.starts_with("The runs differ"))
    {
        out.push_str(&format!("\n**{heading}**\n\n"));
        for line in lines {
            out.push_str(&format!("- {line}\n"));
        }
    }
    out
}

/// The JSON form: the whole [`Comparison`].
pub fn render_json(c: &Comparison) -> String {
    let mut text = serde_json::to_string_pretty(c).expect("the comparison serializes");
    text.push('\n');
    text
}

/// The blocks, for the HTML page.
pub(super) fn html_sections(c: &Comparison) -> Vec<(String, Vec<String>)> {
    sections(c)
}
