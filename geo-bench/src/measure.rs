//! One window and one cell: the builder of each workload × system (already marked when the
//! system cannot be measured), a window run and folded into it, each insert window checked
//! against what the system then holds, and the cell's figures in the workload's unit.

use common::human::{format_latency_ns, format_rate};
use common::phases::window_line_per;
use common::progress::Progress;
use common::protocol::{CellBuilder, Round};
use common::results::{Cell, Report, Status};
use common::scale::{BarrierError, Segment, Worker};
use common::servercpu::ServerProcess;
use common::window::WindowPlan;
use serde_json::json;

use crate::opts::Opts;
use crate::plan::Plan;
use crate::session::Work;
use crate::systems::System;
use crate::workloads::Workload;

fn round_name(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}

/// This worker's clients of `workload`: its share of them, and the run-wide number of its
/// first (all of them, from 0, without workers).
pub fn clients(workload: &Workload, segment: Segment) -> (u32, usize) {
    let total = u64::from(workload.clients());
    (segment.share(total) as u32, segment.start(total) as usize)
}

/// The builder of one workload × system, already marked when the system cannot be measured.
pub fn builder(
    opts: &Opts,
    workload: &Workload,
    system: &System,
    segment: Segment,
) -> Option<CellBuilder> {
    if matches!(workload, Workload::PointAdds { .. }) && !system.supports_point_adds {
        return None;
    }
    let cell = Cell::new(
        &workload.to_string(),
        system.name(),
        workload.unit(),
        clients(workload, segment).0,
        opts.common.rounds,
    );
    let mut b = CellBuilder::new(cell, opts.common.ceiling);
    b.server(&ServerProcess::locate(&system.info, None).shared_by(segment.count));
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
/// `acknowledged` and `possible` are every worker's (summed at the barrier).
async fn verify_writes(
    system: &mut System,
    acknowledged: u64,
    possible: u64,
    round: Round,
    b: &mut CellBuilder,
) {
    match system.target.count_inserts().await {
        Ok(found) => {
            let (min, max) = (acknowledged, acknowledged + possible);
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
    pub segment: Segment,
}

/// One window to run: which, where, and the cell it folds into.
pub struct Slot<'a> {
    pub system: &'a mut System,
    pub workload: &'a Workload,
    pub round: Round,
    pub window_number: u64,
    pub builder: &'a mut CellBuilder,
    pub results_sum: &'a mut u64,
    pub worker: &'a mut Worker,
}

/// What window number `window` of `workload` draws on.
fn work(plan: &Plan, workload: &Workload, window: u64, first_worker: usize) -> Work {
    match workload {
        Workload::Insert { batch, .. } => Work::Insert {
            batch: *batch,
            pool: plan.pool.clone(),
            window,
            first_worker,
        },
        Workload::PointAdds { depth, .. } => Work::PointAdds {
            depth: *depth,
            pool: plan.pool.clone(),
            window,
            first_worker,
        },
        Workload::Query { family, .. } => Work::Query {
            queries: plan.queries[family].clone(),
            first_worker,
        },
    }
}

/// Runs one window of a workload on a system and folds it into the system's cell. With
/// several workers, worker 0 empties the insert set, every worker waits at the barrier, and
/// after a write window they meet again so worker 0 checks the count against every worker's
/// acknowledgements; only a barrier failure is an error here (the run stops).
pub async fn one_window(shared: &Shared<'_>, slot: Slot<'_>) -> Result<(), BarrierError> {
    let Shared {
        opts,
        plan,
        window_plan,
        progress,
        segment,
    } = *shared;
    let Slot {
        system,
        workload,
        round,
        window_number,
        builder: b,
        results_sum,
        worker,
    } = slot;
    let (n, first) = clients(workload, segment);
    let work = work(plan, workload, window_number, first);
    let writes = workload.writes();
    let reset = match (writes && worker.leads()).then_some(()) {
        Some(()) => system.target.reset_inserts().await.err(),
        None => None,
    };
    // Every worker meets the barrier, even when the reset failed: the others would wait.
    worker.sync(0).await?;
    if let Some(e) = reset {
        b.mark(
            Status::Error,
            format!("{}: emptying the insert set failed: {e}", round_name(round)),
        );
        return Ok(());
    }
    let label = format!(
        "{workload} · {} · {}",
        system.name(),
        round.label(opts.common.warmup, opts.common.rounds)
    );
    progress.window(label.clone(), opts.common.duration);
    let Some(workers) = system.workers.as_mut() else {
        return Ok(());
    };
    let server_before = b.server_cpu_now();
    let ran = workers.run_window(n as usize, &work, window_plan).await;
    let server_cpu = b.server_cpu_since(server_before);
    if writes {
        let (acknowledged, possible) = match &ran {
            Ok(window) => {
                let c = window.outcome.recorder.counts;
                let possible = (c.error + c.timeout) * workload.per_op() as u64;
                (window.acknowledged, possible)
            }
            Err(_) => (0, 0),
        };
        let (all_acknowledged, all_possible) = worker.sync_pair(acknowledged, possible).await?;
        if ran.is_ok() && worker.leads() {
            verify_writes(system, all_acknowledged, all_possible, round, b).await;
        }
    }
    match ran {
        Ok(window) => {
            b.add(round, &window.outcome);
            b.add_server_cpu(round, server_cpu);
            if !round.is_warmup() {
                *results_sum += window.results;
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
    Ok(())
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
