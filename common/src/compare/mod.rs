//! `TOOL compare BASELINE CANDIDATE`: two runs of one tool, cell by cell. For each cell in
//! both, the candidate/baseline ratio of the medians of their per-round figures with its exact
//! interval and verdict (throughput, latency p50 and p99, judged as in a run: [`verdict::compare`]),
//! and the cells that appeared, disappeared or changed status. Runs that differ in what makes
//! them comparable are refused unless `--allow-different-environment`; `--fail-on regression`
//! exits 1 when any cell got slower beyond the threshold with its whole interval (or was `ok`
//! and is not any more).

mod differences;
mod html;
mod render;

pub use differences::{Difference, IGNORED_OPTIONS, differences};
pub use html::render_html;
pub use render::{render_json, render_markdown, render_text};

use std::path::PathBuf;

use serde::Serialize;

use crate::calibration::Drift;
use crate::exit::Exit;
use crate::load::{Loaded, load};
use crate::results::{Cell, Metric, Report, Status, Verdict, VerdictKind, median};
use crate::verdict;
use crate::writer::ResultsDir;

/// What `compare` prints (and writes with `--output`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// An aligned table for the terminal.
    #[default]
    Text,
    /// GitHub-flavoured Markdown (for a pull request comment).
    Md,
    /// The whole comparison as JSON.
    Json,
}

/// What makes `compare` exit 1.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    /// A cell slower beyond the threshold with its whole interval, or no longer `ok`.
    Regression,
}

/// `compare`'s arguments.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct CompareArgs {
    /// The earlier run: a results folder or its results.json.
    #[arg(value_name = "BASELINE")]
    pub baseline: PathBuf,

    /// The run to judge against it: a results folder or its results.json, of the same tool.
    #[arg(value_name = "CANDIDATE")]
    pub candidate: PathBuf,

    /// Faster or slower only when the whole interval of the ratio lies beyond this (`5%`:
    /// from 1/1.05 to 1.05 is parity).
    #[arg(long, default_value = "5%", value_parser = crate::human::parse_share)]
    pub threshold: f64,

    /// Exit 1 when a cell regressed (for CI).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,

    /// Compare runs that differ in options, machine, kernel, system versions, verified
    /// settings or data; every line of the output says so.
    #[arg(long)]
    pub allow_different_environment: bool,

    /// Give faster/slower between runs measured in one process each (`--forks 1`), whose
    /// run-to-run variance is not known: assume it is no larger than the rounds' inside each
    /// run. Printed in the header.
    #[arg(long)]
    pub assume_stable: bool,

    /// What to print.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,

    /// Also write compare.txt|md|json (by --format) and compare.html into this folder.
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// Which run a side is.
#[derive(Serialize, Debug, Clone)]
pub struct RunRef {
    pub path: String,
    pub run_id: String,
    pub started_at: String,
    pub tool_version: String,
    pub git_commit: Option<String>,
    pub suite: String,
    pub section: String,
    /// The 1-minute load average at the start and the end of the run.
    pub loadavg_1m: [Option<f64>; 2],
}

impl RunRef {
    fn of(loaded: &Loaded) -> RunRef {
        let r = &loaded.report;
        RunRef {
            path: loaded.file.display().to_string(),
            run_id: r.run_id.clone(),
            started_at: r.started_at.clone(),
            tool_version: r.tool_version.clone(),
            git_commit: r.git_commit.clone(),
            suite: r.suite.clone(),
            section: r.section.clone(),
            loadavg_1m: [
                Some(r.environment.loadavg_start[0]),
                r.environment.loadavg_end.map(|l| l[0]),
            ],
        }
    }
}

/// One metric of a cell in both runs.
#[derive(Serialize, Debug, Clone)]
pub struct MetricComparison {
    pub metric: Metric,
    /// The medians of the per-round figures, when the side has them.
    pub baseline_median: Option<f64>,
    pub candidate_median: Option<f64>,
    /// Candidate over baseline, with its interval and verdict.
    pub verdict: Option<Verdict>,
    /// Why there is no verdict.
    pub no_verdict: Option<String>,
}

/// A cell present in both runs.
#[derive(Serialize, Debug, Clone)]
pub struct CellComparison {
    pub workload: String,
    pub system: String,
    pub baseline_status: Status,
    pub candidate_status: Status,
    pub metrics: Vec<MetricComparison>,
    pub regressed: bool,
}

/// A cell present in one run only.
#[derive(Serialize, Debug, Clone)]
pub struct LoneCell {
    pub workload: String,
    pub system: String,
    pub status: Status,
}

/// The whole comparison: what `--format json` prints.
#[derive(Serialize, Debug, Clone)]
pub struct Comparison {
    pub tool: String,
    pub baseline: RunRef,
    pub candidate: RunRef,
    pub threshold: f64,
    /// Where the runs differ in what makes them comparable: compared anyway because allowed,
    /// or only in their machine (figures side by side, verdicts withheld: `refused`).
    pub differences: Vec<Difference>,
    /// The differences were allowed (`--allow-different-environment`): verdicts span them.
    pub allowed: bool,
    pub cells: Vec<CellComparison>,
    pub appeared: Vec<LoneCell>,
    pub disappeared: Vec<LoneCell>,
    /// One line per regression.
    pub regressions: Vec<String>,
    /// Verdicts between one-process runs were asked for anyway (`--assume-stable`).
    pub assume_stable: bool,
    /// How many forks each side was measured in (1: one process).
    pub forks: [u32; 2],
    /// The candidate's calibration probe over the baseline's, when both runs have one.
    pub calibration: Option<Drift>,
    /// Why no cell has a verdict, when the runs' machines are not in the same state.
    pub refused: Option<String>,
}

/// Why a side measured in one process gets no verdict across runs.
pub const ONE_PROCESS: &str = "inconclusive (one process: run-to-run variance not measured; measure with --forks 2 or more, or compare with --assume-stable)";

/// How many forks a run was measured in (1 for a run in one process).
fn forks_of(report: &Report) -> u32 {
    (report.forks.len() as u32).max(1)
}

fn lone(cell: &Cell) -> LoneCell {
    LoneCell {
        workload: cell.workload.clone(),
        system: cell.system.clone(),
        status: cell.status,
    }
}

/// What every cell of one comparison is judged with.
#[derive(Debug, Clone, Copy)]
struct Judging {
    threshold: f64,
    assume_stable: bool,
}

/// One metric of a cell: the verdict of the candidate's forks (or rounds, with
/// `--assume-stable`) against the baseline's.
fn metric(candidate: &Cell, baseline: &Cell, metric: Metric, judging: Judging) -> MetricComparison {
    let of = |c: &Cell| verdict::round_figures(c, metric).and_then(|f| median(&f));
    let one_process = candidate.forks.len() < 2 || baseline.forks.len() < 2;
    let (verdict, no_verdict) = if one_process && !judging.assume_stable {
        (None, Some(ONE_PROCESS.to_owned()))
    } else {
        match verdict::compare(candidate, baseline, metric, judging.threshold) {
            Ok(v) => (Some(v), None),
            Err(none) => (None, Some(none.reason)),
        }
    };
    MetricComparison {
        metric,
        baseline_median: of(baseline),
        candidate_median: of(candidate),
        verdict,
        no_verdict,
    }
}

fn cell(candidate: &Cell, baseline: &Cell, judging: Judging) -> CellComparison {
    let metrics: Vec<MetricComparison> = Metric::ALL
        .into_iter()
        .filter(|m| {
            *m == Metric::Throughput
                || !(candidate.latency_rounds_ns.is_empty()
                    && baseline.latency_rounds_ns.is_empty())
        })
        .map(|m| metric(candidate, baseline, m, judging))
        .collect();
    let slower = metrics.iter().any(|m| {
        m.verdict
            .as_ref()
            .is_some_and(|v| v.verdict == VerdictKind::Slower)
    });
    let lost = baseline.status == Status::Ok && candidate.status != Status::Ok;
    CellComparison {
        workload: candidate.workload.clone(),
        system: candidate.system.clone(),
        baseline_status: baseline.status,
        candidate_status: candidate.status,
        metrics,
        regressed: slower || lost,
    }
}

/// `write 1c · postgres: throughput 0.70× [0.69–0.71] slower`, or the lost status.
fn regression_lines(c: &CellComparison) -> Vec<String> {
    let mut lines: Vec<String> = c
        .metrics
        .iter()
        .filter_map(|m| {
            m.verdict
                .as_ref()
                .filter(|v| v.verdict == VerdictKind::Slower)
        })
        .map(|v| {
            format!(
                "{} · {}: {} {}",
                c.workload,
                c.system,
                v.metric.as_str().replace('_', " "),
                verdict::describe(v)
            )
        })
        .collect();
    if c.baseline_status == Status::Ok && c.candidate_status != Status::Ok {
        lines.push(format!(
            "{} · {}: was ok, now {}",
            c.workload,
            c.system,
            c.candidate_status.as_str()
        ));
    }
    lines
}

/// Takes every verdict back, each metric saying `reason` instead; a cell still regressed
/// when it was ok and is no longer.
fn withhold(cells: &mut [CellComparison], reason: &str) {
    for x in cells {
        for m in &mut x.metrics {
            m.verdict = None;
            m.no_verdict = Some(reason.to_owned());
        }
        x.regressed = x.baseline_status == Status::Ok && x.candidate_status != Status::Ok;
    }
}

/// The kinds of difference that say the runs were measured on different machines: they may
/// still be read side by side, but no verdict spans them.
const MACHINE_KINDS: &[&str] = &["machine", "kernel"];

/// Compares two runs already read (and checked comparable, or allowed not to be). A side
/// measured in one process gets no verdict unless `assume_stable`; runs whose calibration
/// probes moved beyond [`crate::calibration::TOLERANCE`] get none at all (`refused`).
pub fn compare_runs(
    baseline: &Loaded,
    candidate: &Loaded,
    threshold: f64,
    assume_stable: bool,
) -> Comparison {
    let (b, c): (&Report, &Report) = (&baseline.report, &candidate.report);
    let judging = Judging {
        threshold,
        assume_stable,
    };
    let find = |r: &'_ Report, w: &str, s: &str| {
        r.cells
            .iter()
            .find(|x| x.workload == w && x.system == s)
            .cloned()
    };
    let mut cells: Vec<CellComparison> = c
        .cells
        .iter()
        .filter_map(|x| Some(cell(x, &find(b, &x.workload, &x.system)?, judging)))
        .collect();
    let calibration = match (b.environment.calibration, c.environment.calibration) {
        (Some(x), Some(y)) => Some(Drift::between(&x, &y)),
        _ => None,
    };
    let refused = calibration.filter(Drift::beyond_tolerance).map(|d| {
        format!(
            "no verdicts: the machine was not in the same state for both runs ({}; the tolerance is ±{:.0}%)",
            d.line(),
            crate::calibration::TOLERANCE * 100.0
        )
    });
    if let Some(reason) = &refused {
        withhold(&mut cells, reason);
    }
    let appeared = c
        .cells
        .iter()
        .filter(|x| find(b, &x.workload, &x.system).is_none())
        .map(lone)
        .collect();
    let disappeared = b
        .cells
        .iter()
        .filter(|x| find(c, &x.workload, &x.system).is_none())
        .map(lone)
        .collect();
    let regressions = cells.iter().flat_map(regression_lines).collect();
    Comparison {
        tool: b.tool.clone(),
        baseline: RunRef::of(baseline),
        candidate: RunRef::of(candidate),
        threshold,
        differences: differences(b, c),
        allowed: false,
        cells,
        appeared,
        disappeared,
        regressions,
        assume_stable,
        forks: [forks_of(b), forks_of(c)],
        calibration,
        refused,
    }
}

/// Runs `compare` for `tool`: reads both runs, refuses incomparable ones, prints the
/// comparison in `args.format`, writes it (and compare.html) into `--output`, and returns the
/// exit code. Bad input is an `Err` of one line; refused differences print one line each.
pub fn run(args: &CompareArgs, tool: &str) -> anyhow::Result<Exit> {
    let baseline = load(&args.baseline, tool)?;
    let candidate = load(&args.candidate, tool)?;
    let mut comparison = compare_runs(&baseline, &candidate, args.threshold, args.assume_stable);
    let (machines, others): (Vec<&Difference>, Vec<&Difference>) = comparison
        .differences
        .iter()
        .partition(|d| MACHINE_KINDS.contains(&d.kind));
    if !others.is_empty() && !args.allow_different_environment {
        eprintln!(
            "error: the runs differ in what makes them comparable (--allow-different-environment compares them anyway, every line labelled):"
        );
        for d in &comparison.differences {
            eprintln!("  {}", d.line());
        }
        return Ok(Exit::BadInput);
    }
    comparison.allowed = args.allow_different_environment;
    if !machines.is_empty() && !args.allow_different_environment && comparison.refused.is_none() {
        // Another machine is not a mistake in the input: the figures are shown side by side,
        // but a ratio between two machines says nothing about the change under test.
        let lines: Vec<String> = machines.iter().map(|d| d.line()).collect();
        let reason = format!(
            "no verdicts: the runs were measured on different machines ({}; --allow-different-environment judges them anyway)",
            lines.join("; ")
        );
        withhold(&mut comparison.cells, &reason);
        comparison.regressions = comparison.cells.iter().flat_map(regression_lines).collect();
        comparison.refused = Some(reason);
    }
    if comparison.cells.is_empty() {
        anyhow::bail!(
            "{} and {} share no workload × system cell: nothing to compare",
            baseline.file.display(),
            candidate.file.display()
        );
    }
    let (text, extension) = match args.format {
        Format::Text => (render_text(&comparison), "txt"),
        Format::Md => (render_markdown(&comparison), "md"),
        Format::Json => (render_json(&comparison), "json"),
    };
    if let Some(dir) = &args.output {
        let out = ResultsDir::create(dir).map_err(|e| match e {
            crate::writer::WriteError::Folder { path, source } => anyhow::anyhow!(
                "cannot write the comparison into {}: {source}",
                path.display()
            ),
            other => other.into(),
        })?;
        out.write_atomic(&format!("compare.{extension}"), text.as_bytes())?;
        out.write_atomic("compare.html", render_html(&comparison).as_bytes())?;
    }
    print!("{text}");
    let regressed = !comparison.regressions.is_empty();
    Ok(match args.fail_on {
        Some(FailOn::Regression) if regressed => Exit::NotAllOk,
        _ => Exit::AllOk,
    })
}

#[cfg(test)]
mod tests;
