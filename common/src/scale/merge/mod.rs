//! `TOOL merge --expect-workers N -o DIR PART…`: the workers' results folders of one run made
//! into one run. Every part must belong to the same run (run id, tool version, options hash,
//! suite, section, data, cells; indexes 0 … N−1 each exactly once; finished, not stopped at
//! the barrier), else one line says which and nothing is written. The merged run goes through
//! the same verdict code and exports as a single-machine run.

mod cells;

pub(crate) use cells::add_encoded;
pub use cells::merge_cell;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::exit::Exit;
use crate::export::{ToolReport, exporters};
use crate::load::{Loaded, load};
use crate::results::{Report, WorkerCell, WorkerInfo, WorkerPart};
use crate::writer::ResultsDir;

/// `merge`'s arguments.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct MergeArgs {
    /// Every worker's results folder (or its results.json), in any order.
    #[arg(value_name = "PART", required = true)]
    pub parts: Vec<PathBuf>,

    /// How many workers the run had: every index 0 … N−1 must be there exactly once.
    #[arg(long, value_name = "N")]
    pub expect_workers: u32,

    /// The merged run's results folder.
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: PathBuf,

    /// Wait up to this long for every part to finish (the merge step of a Kubernetes Job
    /// starts with the workers).
    #[arg(long, value_name = "DURATION", value_parser = crate::human::parse_duration)]
    pub wait: Option<Duration>,
}

/// Whether a part is as final as it will get: finished, or stopped at the barrier.
fn settled(report: &Report) -> bool {
    report.finished_at.is_some()
        || report
            .worker
            .as_ref()
            .and_then(|w| w.barrier.as_ref())
            .is_some_and(|b| b.failure.is_some())
}

/// Refuses the run at once when a part it can read already says it stopped at the barrier
/// (a worker interrupted, one missing): waiting for the others cannot complete it.
fn refuse_stopped(path: &std::path::Path, report: &Report) -> anyhow::Result<()> {
    let Some(worker) = &report.worker else {
        return Ok(());
    };
    if let Some(failure) = worker.barrier.as_ref().and_then(|b| b.failure.as_ref()) {
        bail!(
            "worker {} ({}) stopped at the barrier: {failure}; the run is incomplete and nothing was merged",
            worker.index,
            path.display()
        );
    }
    Ok(())
}

fn load_all(args: &MergeArgs, tool: &str) -> anyhow::Result<Vec<Loaded>> {
    let deadline = args.wait.map(|w| Instant::now() + w);
    loop {
        let each: Vec<_> = args.parts.iter().map(|p| load(p, tool)).collect();
        for part in each.iter().flatten() {
            refuse_stopped(&part.file, &part.report)?;
        }
        let loaded: Result<Vec<Loaded>, _> = each.into_iter().collect();
        let ready = matches!(&loaded, Ok(parts) if parts.iter().all(|p| settled(&p.report)));
        match deadline {
            Some(deadline) if !ready && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_secs(1));
            }
            _ => return Ok(loaded?),
        }
    }
}

/// `merge`: the parts checked, merged, judged and written with every export.
pub fn run(args: &MergeArgs, tool: &str, renderer: &dyn ToolReport) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let loaded = load_all(args, tool)?;
    let parts: Vec<(String, Report)> = loaded
        .into_iter()
        .map(|l| (l.file.display().to_string(), l.report))
        .collect();
    let mut report = merge(&parts, args.expect_workers)?;
    let mut ordered: Vec<&Report> = parts.iter().map(|(_, r)| r).collect();
    ordered.sort_by_key(|r| r.worker.as_ref().map(|w| w.index));
    renderer
        .merge_extras(&ordered, &mut report)
        .map_err(anyhow::Error::msg)?;
    if let Some(options) = report.options.as_object_mut() {
        options.insert(
            "output".into(),
            serde_json::Value::String(args.output.display().to_string()),
        );
    }
    let judgement = renderer.judge(&report);
    report.verdicts = judgement.verdicts;
    report.no_verdicts = judgement.no_verdicts;
    let results = ResultsDir::create(&args.output)?;
    results
        .write_exports(&report, &exporters(renderer))
        .context("writing the merged run")?;
    eprintln!(
        "merge: {} workers of run {} merged into {} in {} ms",
        parts.len(),
        report.run_id,
        args.output.display(),
        started.elapsed().as_millis()
    );
    Ok(Exit::of(&report))
}

/// Checks that `parts` (path, report) are the whole of one run and merges them.
pub fn merge(parts: &[(String, Report)], expected: u32) -> anyhow::Result<Report> {
    let mut indexed: Vec<(&str, &Report, &WorkerInfo)> = Vec::new();
    for (path, report) in parts {
        let Some(worker) = &report.worker else {
            bail!(
                "{path} is not a worker's part of a run (no worker block: it was run without --worker-count)"
            );
        };
        if let Some(failure) = worker.barrier.as_ref().and_then(|b| b.failure.as_ref()) {
            bail!(
                "worker {} ({path}) stopped at the barrier: {failure}; the run is incomplete and nothing was merged",
                worker.index
            );
        }
        if report.finished_at.is_none() {
            bail!(
                "worker {} ({path}) did not finish its run; the run is incomplete and nothing was merged",
                worker.index
            );
        }
        indexed.push((path, report, worker));
    }
    indexed.sort_by_key(|(_, _, w)| w.index);
    check_one_run(&indexed, expected)?;
    let (_, first, _) = indexed[0];
    let mut merged = first.clone();
    merged.run_id.clone_from(&indexed[0].2.run_id);
    merged.started_at = indexed
        .iter()
        .map(|(_, r, _)| r.started_at.clone())
        .min()
        .unwrap_or_default();
    merged.finished_at = indexed
        .iter()
        .filter_map(|(_, r, _)| r.finished_at.clone())
        .max();
    if let Some(options) = merged.options.as_object_mut() {
        options.remove("worker_index");
    }
    for system in &mut merged.systems {
        for (_, part, _) in &indexed[1..] {
            if let Some(theirs) = part.systems.iter().find(|s| s.name == system.name) {
                for label in &theirs.labels {
                    if !system.labels.contains(label) {
                        system.labels.push(label.clone());
                    }
                }
            }
        }
    }
    merged.cells = first
        .cells
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let cells: Vec<(u32, &crate::results::Cell)> = indexed
                .iter()
                .map(|(_, r, w)| (w.index, &r.cells[i]))
                .collect();
            merge_cell(&cells).map_err(|e| {
                anyhow::anyhow!(
                    "{} · {}: {e}",
                    first.cells[i].workload,
                    first.cells[i].system
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    merged.verdicts.clear();
    merged.no_verdicts.clear();
    merged.notes = merged_notes(&indexed);
    merged.worker = None;
    merged.workers = indexed.iter().map(|(_, r, w)| part_of(r, w)).collect();
    Ok(merged)
}

/// Refuses parts that are not exactly one run's N workers, one line naming the first problem.
fn check_one_run(parts: &[(&str, &Report, &WorkerInfo)], expected: u32) -> anyhow::Result<()> {
    let (path0, first, w0) = parts[0];
    for &(path, report, worker) in parts {
        let same = |what: &str, a: &str, b: &str| -> anyhow::Result<()> {
            if a != b {
                bail!("{path} is not part of the same run as {path0}: {what} {b}, not {a}");
            }
            Ok(())
        };
        same("run id", &w0.run_id, &worker.run_id)?;
        same("tool version", &first.tool_version, &report.tool_version)?;
        same("options hash", &w0.options_hash, &worker.options_hash)?;
        same("suite", &first.suite, &report.suite)?;
        same("section", &first.section, &report.section)?;
        if worker.count != expected {
            bail!(
                "{path} is worker {} of {}, but --expect-workers is {expected}",
                worker.index,
                worker.count
            );
        }
        if report.data != first.data {
            bail!("{path} generated other data than {path0} (seed or checksum differ)");
        }
        let names = |r: &Report| -> Vec<(String, String)> {
            r.cells
                .iter()
                .map(|c| (c.workload.clone(), c.system.clone()))
                .collect()
        };
        if names(report) != names(first) {
            bail!("{path} has other cells than {path0}: the workers did not run the same plan");
        }
    }
    for index in 0..expected {
        let found: Vec<&str> = parts
            .iter()
            .filter(|(_, _, w)| w.index == index)
            .map(|(p, _, _)| *p)
            .collect();
        match found.len() {
            1 => {}
            0 => {
                bail!("worker {index} of {expected} is missing: give every worker's results folder")
            }
            _ => bail!("worker {index} is given twice: {}", found.join(" and ")),
        }
    }
    if parts.len() != expected as usize {
        bail!("{} parts given for {expected} workers", parts.len());
    }
    Ok(())
}

fn merged_notes(parts: &[(&str, &Report, &WorkerInfo)]) -> Vec<String> {
    let (_, first, w0) = parts[0];
    let mut notes = first.notes.clone();
    for (_, report, worker) in &parts[1..] {
        for note in &report.notes {
            if !notes.contains(note) {
                notes.push(format!("worker {}: {note}", worker.index));
            }
        }
    }
    notes.push(format!(
        "Merged from {} workers of run {} (each on its own client machine, every window opened by a start barrier): throughput summed round by round before median, min and max; latency histograms added exactly and every percentile recomputed from the sum; counts, connections, rates and client CPU summed. Schedule lag is the worst worker's; tool-specific cell figures (`extra`) are worker 0's unless the tool's own note says it added them up, and the environment is worker 0's. Each worker's own figures are under `workers`.",
        parts.len(),
        w0.run_id
    ));
    notes
}

fn part_of(report: &Report, worker: &WorkerInfo) -> WorkerPart {
    WorkerPart {
        worker: worker.clone(),
        cpu_model: report.environment.cpu_model.clone(),
        cores: report.environment.cores,
        loadavg_start: report.environment.loadavg_start,
        started_at: report.started_at.clone(),
        finished_at: report.finished_at.clone(),
        cells: report
            .cells
            .iter()
            .map(|c| WorkerCell {
                workload: c.workload.clone(),
                system: c.system.clone(),
                status: c.status,
                connections: c.connections,
                throughput_rounds: c
                    .throughput
                    .as_ref()
                    .map(|t| t.rounds.clone())
                    .unwrap_or_default(),
                ok: c.counts.ok,
                latency_p99_ns: c.latency_ns.map(|p| p.p99),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
