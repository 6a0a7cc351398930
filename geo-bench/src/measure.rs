//! The measured part of a run: every workload's windows, systems interleaved in alternating
//! order, each insert window checked against what the system then holds, every cell written
//! the moment it is measured; then the final report, rendered and written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use common::environment::{Environment, durable_write_floor, loadavg};
use common::human::{format_latency_ns, format_rate};
use common::progress::Progress;
use common::protocol::{CellBuilder, Round, round_order, rounds};
use common::report::verdicts;
use common::results::{Cell, Report, Status};
use common::window::{WindowOutcome, WindowPlan};
use common::writer::ResultsDir;
use serde_json::json;

use crate::run::{FLOOR_BUDGET, Plan, System};
use crate::workloads::workers::GeoWindow;
use crate::workloads::{Work, Workload};
use crate::{Opts, Summary};

fn round_name(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}

/// The builder of one workload × system, already marked when the system cannot be measured.
fn builder(opts: &Opts, workload: &Workload, system: &System) -> Option<CellBuilder> {
    if matches!(workload, Workload::PointAdds { .. }) && !system.supports_point_adds {
        return None;
    }
    let cell = Cell::new(
        &workload.to_string(),
        system.name(),
        workload.unit(),
        workload.clients(),
        opts.common.rounds,
    );
    let mut b = CellBuilder::new(cell, opts.common.ceiling);
    for label in &system.info.labels {
        b.add_label(label);
    }
    if let Some(reason) = &system.refused {
        b.mark(Status::Refused, reason.clone());
    } else if let Workload::Query { family, .. } = workload
        && let Some(reason) = system.invalid.get(family)
    {
        b.mark(
            Status::Invalid,
            format!("{reason}; a wrong answer is not timed"),
        );
    }
    Some(b)
}

/// Extra figures of a cell and its throughput in the workload's unit (events, not requests).
fn finish_cell(builder: &CellBuilder, workload: &Workload, results: u64) -> Cell {
    let mut cell = builder.to_cell();
    let per_op = workload.per_op() as f64;
    if let Some(t) = &mut cell.throughput {
        cell.extra.insert("requests_per_s".into(), json!(t.median));
        for v in t
            .rounds
            .iter_mut()
            .chain([&mut t.median, &mut t.min, &mut t.max])
        {
            *v *= per_op;
        }
    }
    let (family, size) = match workload {
        Workload::Insert { batch, .. } => ("insert", *batch),
        Workload::Query { .. } => ("query", 1),
        Workload::PointAdds { depth, .. } => ("geoadd", *depth),
    };
    cell.extra.insert("family".into(), json!(family));
    cell.extra.insert("batch_size".into(), json!(size));
    cell.extra
        .insert("clients".into(), json!(workload.clients()));
    if family == "query" && cell.counts.ok > 0 {
        cell.extra.insert(
            "mean_results_per_query".into(),
            json!(results as f64 / cell.counts.ok as f64),
        );
    }
    cell
}

fn window_line(label: &str, outcome: &WindowOutcome, per_op: usize, unit: &str) -> String {
    let latency =
        common::recorder::percentiles(&outcome.recorder.latency).map_or_else(String::new, |p| {
            format!(
                " · p50 {} · p99 {}",
                format_latency_ns(p.p50),
                format_latency_ns(p.p99)
            )
        });
    let errors = match outcome.recorder.counts.error {
        0 => String::new(),
        n => format!(" · {n} errors"),
    };
    format!(
        "{label}: {} {unit}{latency}{errors}",
        format_rate(outcome.throughput() * per_op as f64)
    )
}

/// Checks that the events a write window left are the ones it acknowledged: at least every
/// acknowledged one, at most those plus the ones whose request failed or was abandoned.
async fn verify_writes(
    system: &mut System,
    workload: &Workload,
    window: &GeoWindow,
    round: Round,
    b: &mut CellBuilder,
) {
    let counts = window.outcome.recorder.counts;
    match system.target.count_inserts().await {
        Ok(found) => {
            let min = window.acknowledged;
            let max = min + (counts.error + counts.timeout) * workload.per_op() as u64;
            if found < min || found > max {
                b.mark(
                    Status::Invalid,
                    format!("{}: {found} events found after {min} acknowledged (at most {max} possible)", round_name(round)),
                );
            }
        }
        Err(e) => b.mark(
            Status::Error,
            format!(
                "{}: counting the inserted events failed: {e}",
                round_name(round)
            ),
        ),
    }
}

/// What every window of a run shares.
struct Shared<'a> {
    opts: &'a Opts,
    plan: &'a Plan,
    window_plan: &'a WindowPlan,
    progress: &'a Progress,
}

/// One window to run: which, where, and the cell it folds into.
struct Slot<'a> {
    system: &'a mut System,
    workload: &'a Workload,
    round: Round,
    window_number: u64,
    builder: &'a mut CellBuilder,
    results_sum: &'a mut u64,
}

/// Runs one window of a workload on a system and folds it into the system's cell.
async fn one_window(shared: &Shared<'_>, slot: Slot<'_>) {
    let Shared {
        opts,
        plan,
        window_plan,
        progress,
    } = *shared;
    let Slot {
        system,
        workload,
        round,
        window_number,
        builder: b,
        results_sum,
    } = slot;
    let work = match workload {
        Workload::Insert { batch, .. } => Work::Insert {
            batch: *batch,
            pool: plan.pool.clone(),
            window: window_number,
        },
        Workload::PointAdds { depth, .. } => Work::PointAdds {
            depth: *depth,
            pool: plan.pool.clone(),
            window: window_number,
        },
        Workload::Query { family, .. } => Work::Query {
            queries: plan.queries[family].clone(),
        },
    };
    let writes = !matches!(workload, Workload::Query { .. });
    if writes && let Err(e) = system.target.reset_inserts().await {
        b.mark(
            Status::Error,
            format!("{}: emptying the insert set failed: {e}", round_name(round)),
        );
        return;
    }
    let label = format!(
        "{workload} · {} · {}",
        system.name(),
        round.label(opts.common.warmup, opts.common.rounds)
    );
    progress.window(label.clone(), opts.common.duration);
    let Some(workers) = system.workers.as_mut() else {
        return;
    };
    match workers
        .run_window(workload.clients() as usize, &work, window_plan)
        .await
    {
        Ok(window) => {
            b.add(round, &window.outcome);
            if !round.is_warmup() {
                *results_sum += window.results;
            }
            if writes {
                verify_writes(system, workload, &window, round, b).await;
            }
            progress.line(window_line(
                &label,
                &window.outcome,
                workload.per_op(),
                workload.unit(),
            ));
        }
        Err(message) => {
            b.mark(Status::Error, format!("{}: {message}", round_name(round)));
            progress.line(format!("{label}: {message}"));
        }
    }
}

/// The report before any window: options, environment (with the floor of the results folder),
/// data, systems and notes.
fn begin_report(
    opts: &Opts,
    plan: &Plan,
    systems: &[System],
    mut environment: Environment,
    results: &ResultsDir,
) -> anyhow::Result<Report> {
    let common = &opts.common;
    if let Ok(floor) = durable_write_floor(results.path(), FLOOR_BUDGET) {
        environment.durable_write_floor_ns = Some(floor);
        environment.durable_write_floor_path = Some(results.path().display().to_string());
    }
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let section = "each system at the durability it reports (labelled); one request carries a batch of events";
    let mut report = Report::begin(
        "geo-bench",
        env!("CARGO_PKG_VERSION"),
        "geo",
        section,
        options,
        environment,
    );
    report.data = Some(plan.data_info(common.seed));
    report.systems = systems.iter().map(|s| s.info.clone()).collect();
    report.reference = Some(
        common
            .reference
            .clone()
            .unwrap_or_else(|| systems[0].name().to_owned()),
    );
    report.notes = notes(opts, plan, systems);
    Ok(report)
}

/// Measures every workload, interleaved, and writes the report.
pub async fn measure(
    opts: &Opts,
    plan: Plan,
    mut systems: Vec<System>,
    environment: Environment,
    results: ResultsDir,
    progress: Progress,
    interrupt: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    let common = &opts.common;
    let mut report = begin_report(opts, &plan, &systems, environment, &results)?;
    let mut builders: Vec<Vec<Option<CellBuilder>>> = plan
        .workloads
        .iter()
        .map(|w| systems.iter().map(|s| builder(opts, w, s)).collect())
        .collect();
    let mut results_sums = vec![vec![0u64; systems.len()]; plan.workloads.len()];
    for (wi, row) in builders.iter().enumerate() {
        for b in row.iter().flatten() {
            report.upsert_cell(finish_cell(b, &plan.workloads[wi], 0));
        }
    }
    results.write_results(&report)?;
    let window_plan = WindowPlan {
        duration: common.duration,
        ceiling: common.ceiling,
        rate_per_s: common.rate,
        interrupt: interrupt.clone(),
        progress: progress.sender(),
    };
    let shared = Shared {
        opts,
        plan: &plan,
        window_plan: &window_plan,
        progress: &progress,
    };
    let mut window_number: u64 = 0;
    'workloads: for (wi, workload) in plan.workloads.iter().enumerate() {
        for round in rounds(common.warmup, common.rounds) {
            for si in round_order(systems.len(), round.index) {
                if interrupt.load(Ordering::SeqCst) {
                    break 'workloads;
                }
                let Some(b) = builders[wi][si].as_mut() else {
                    continue;
                };
                if !b.is_live() || systems[si].workers.is_none() {
                    continue;
                }
                window_number += 1;
                let slot = Slot {
                    system: &mut systems[si],
                    workload,
                    round,
                    window_number,
                    builder: b,
                    results_sum: &mut results_sums[wi][si],
                };
                one_window(&shared, slot).await;
                report.upsert_cell(finish_cell(b, workload, results_sums[wi][si]));
                results.write_results(&report)?;
            }
        }
    }
    if interrupt.load(Ordering::SeqCst) {
        report
            .notes
            .push("The run was interrupted (Ctrl-C); cells not measured in full say so.".into());
    }
    finish(opts, systems, report, results, progress).await
}

fn notes(opts: &Opts, plan: &Plan, systems: &[System]) -> Vec<String> {
    let mut notes = vec![
        format!(
            "Every query was answered by each system before timing and checked against an exact in-process oracle (geodesic distance on WGS84); events nearer a query's boundary than {} may fall either way.",
            plan.tolerance.describe()
        ),
        "Every system is one node and the client ran on this machine, beside any local server: the client's CPU time is taken from the servers'.".into(),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".into(),
    ];
    if plan
        .workloads
        .iter()
        .any(|w| !matches!(w, Workload::Query { .. }))
    {
        notes.push("Each insert window starts from an empty insert set and ends with a count of the events the system holds, checked against those it acknowledged.".into());
    }
    for s in systems.iter().filter(|s| s.refused.is_none()) {
        for line in &s.method {
            notes.push(format!("{}: {line}.", s.name()));
        }
    }
    if systems.iter().any(|s| s.info.kind == "sqlite") {
        notes.push("SQLite runs inside the client process: no network and no protocol, and its writers queue on an in-process lock (one writer at a time).".into());
    }
    if opts.common.rate.is_none() {
        notes.push(
            "Closed loop: each client sends its next request when the previous one is answered."
                .into(),
        );
    }
    notes
}

/// Puts each durable system's batch-size-1 figure beside its durable-write floor.
fn floor_notes(report: &mut Report, systems: &[System]) {
    let mut lines = Vec::new();
    for system in systems.iter().filter(|s| s.durable) {
        let Some(floor) = system.info.durable_write_floor_ns else {
            continue;
        };
        for cell in report.cells.iter().filter(|c| {
            c.system == system.name()
                && c.extra.get("family").is_some_and(|f| f == "insert")
                && c.extra.get("batch_size").is_some_and(|b| b == 1)
        }) {
            let Some(t) = cell.usable_throughput() else {
                continue;
            };
            lines.push(format!(
                "{}: batch size 1 at {} client(s) {} events/s, beside a durable-write floor of {} in its data directory (one synchronous write at a time allows {}/s)",
                system.name(),
                cell.connections,
                format_rate(t.median),
                format_latency_ns(floor),
                format_rate(1e9 / floor as f64)
            ));
        }
    }
    report.notes.extend(lines);
}

/// Writes the final report, prints it, and removes fairbench's data.
async fn finish(
    opts: &Opts,
    mut systems: Vec<System>,
    mut report: Report,
    results: ResultsDir,
    progress: Progress,
) -> anyhow::Result<Summary> {
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    report.verdicts = verdicts(&report);
    floor_notes(&mut report, &systems);
    report
        .extra
        .insert("insert_curve".into(), crate::report::curve_json(&report));
    if !opts.keep_data {
        for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
            if let Err(e) = system.target.cleanup().await {
                report.notes.push(format!("cleaning up failed: {e}"));
            }
        }
    }
    results.write_results(&report)?;
    results.write_atomic(
        "report.md",
        crate::report::render_markdown(&report).as_bytes(),
    )?;
    if let Some(svg) = crate::chart::render_curve_svg(&report) {
        results.write_atomic("insert-curve.svg", svg.as_bytes())?;
    }
    drop(progress);
    println!("{}", crate::report::render_terminal(&report));
    if !opts.common.quiet {
        eprintln!("results: {}", results.path().display());
    }
    let all_ok = report.cells.iter().all(|c| c.status == Status::Ok);
    Ok(Summary {
        report,
        results_dir: results.path().to_owned(),
        exit_code: if all_ok { 0 } else { 1 },
    })
}
