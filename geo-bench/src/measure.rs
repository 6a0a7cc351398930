//! One window and one cell: the builder of each workload × system (already marked when the
//! system cannot be measured), a window run and folded into it, each insert window checked
//! against what the system then holds, and the cell's figures in the workload's unit.

use common::human::{format_latency_ns, format_rate};
use common::phases::window_line_per;
use common::progress::Progress;
use common::protocol::{CellBuilder, Round};
use common::results::{Cell, Report, Status};
use common::window::WindowPlan;
use serde_json::json;

use crate::opts::Opts;
use crate::plan::Plan;
use crate::session::{GeoWindow, Work};
use crate::systems::System;
use crate::workloads::Workload;

fn round_name(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}

/// The builder of one workload × system, already marked when the system cannot be measured.
pub fn builder(opts: &Opts, workload: &Workload, system: &System) -> Option<CellBuilder> {
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
pub fn finish_cell(builder: &CellBuilder, workload: &Workload, results: u64) -> Cell {
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
pub struct Shared<'a> {
    pub opts: &'a Opts,
    pub plan: &'a Plan,
    pub window_plan: &'a WindowPlan,
    pub progress: &'a Progress,
}

/// One window to run: which, where, and the cell it folds into.
pub struct Slot<'a> {
    pub system: &'a mut System,
    pub workload: &'a Workload,
    pub round: Round,
    pub window_number: u64,
    pub builder: &'a mut CellBuilder,
    pub results_sum: &'a mut u64,
}

/// What window number `window` of `workload` draws on.
fn work(plan: &Plan, workload: &Workload, window: u64) -> Work {
    match workload {
        Workload::Insert { batch, .. } => Work::Insert {
            batch: *batch,
            pool: plan.pool.clone(),
            window,
        },
        Workload::PointAdds { depth, .. } => Work::PointAdds {
            depth: *depth,
            pool: plan.pool.clone(),
            window,
        },
        Workload::Query { family, .. } => Work::Query {
            queries: plan.queries[family].clone(),
        },
    }
}

/// Runs one window of a workload on a system and folds it into the system's cell.
pub async fn one_window(shared: &Shared<'_>, slot: Slot<'_>) {
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
    let work = work(plan, workload, window_number);
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
            progress.line(window_line_per(
                &label,
                &window.outcome,
                workload.unit(),
                workload.per_op() as f64,
            ));
        }
        Err(message) => {
            b.mark(Status::Error, format!("{}: {message}", round_name(round)));
            progress.line(format!("{label}: {message}"));
        }
    }
}

/// The notes every geo-bench report carries.
pub fn notes(opts: &Opts, plan: &Plan, systems: &[System]) -> Vec<String> {
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
    for note in systems.iter().flat_map(|s| &s.notes) {
        if !notes.contains(note) {
            notes.push(note.clone());
        }
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
pub fn floor_notes(report: &mut Report, systems: &[System]) {
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
