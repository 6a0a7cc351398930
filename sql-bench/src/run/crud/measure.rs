//! The crud run's measurement: one cell per workload × system, every window in common's
//! interleaved schedule, each write window's rows counted against what was acknowledged, and
//! the notes that say what the figures stand on.

use std::sync::Arc;

use common::human::{format_latency_ns, format_rate};
use common::phases::window_line;
use common::protocol::{CellBuilder, Round, schedule};
use common::results::{Cell, Location, Report, Status};
use common::run::Recording;
use common::scale::{Segment, Worker};
use common::servercpu::ServerProcess;

use super::cluster;
use super::system::{System, tables};
use crate::opts::CrudOpts;
use crate::run::stopped::Stopped;
use crate::session::{Kind, Mix};
use crate::suites::crud::workload::Workload;
use crate::targets::{KvTable, Target};

/// Every cell of the run: the workloads, the systems and each pair's builder.
pub(super) struct Grid<'a> {
    pub workloads: &'a [Workload],
    pub systems: &'a mut [System],
    pub builders: &'a mut [Vec<CellBuilder>],
}

fn round_name(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}

/// The builders of every workload × system, already marked where a system is refused or its
/// reads cannot be trusted.
pub(super) fn builders(
    opts: &CrudOpts,
    workloads: &[Workload],
    systems: &[System],
    segment: Segment,
) -> Vec<Vec<CellBuilder>> {
    let common = &opts.common;
    workloads
        .iter()
        .map(|w| {
            systems
                .iter()
                .map(|s| {
                    let cell = Cell::new(
                        &w.to_string(),
                        s.name(),
                        "ops/s",
                        segment.share(w.connections.into()) as u32,
                        common.rounds,
                    );
                    let mut b = CellBuilder::new(cell, common.ceiling);
                    b.server(&ServerProcess::locate(&s.info, None).shared_by(segment.count));
                    for label in &s.info.labels {
                        b.add_label(label);
                    }
                    if let Some(reason) = &s.refused {
                        b.mark(Status::Refused, reason.clone());
                    } else if let (Some(reason), true) = (&s.reads_invalid, w.kind != Kind::Write) {
                        b.mark(
                            Status::Invalid,
                            format!("{reason}; reads are not timed against wrong data"),
                        );
                    }
                    b
                })
                .collect()
        })
        .collect()
}

/// Measures every window of the schedule (warm-ups discarded, systems in alternating order),
/// recording each cell the moment its window is done; stops early when interrupted. On
/// several workers every window opens at the barrier (measured or not, so every worker meets
/// the same rounds), and after a write window worker 0 checks the rows against every worker's
/// acknowledgements.
pub(super) async fn all(
    opts: &CrudOpts,
    grid: &mut Grid<'_>,
    values: Arc<[String]>,
    run: &mut Recording,
    worker: &mut Worker,
) -> Result<(), Stopped> {
    let common = &opts.common;
    let segment = worker.segment;
    let (_, write_table) = tables(opts);
    let plan = run.window_plan(common, segment, common.rate);
    run.plan_progress(common, grid.workloads.len() * grid.systems.len());
    let steps = schedule(
        grid.workloads.len(),
        grid.systems.len(),
        common.warmup,
        common.rounds,
    );
    // Forks share the tables the first one made: each numbers its windows after the ones
    // before it, so the keys it writes are its own.
    let per_fork = (grid.workloads.len() * grid.systems.len()) as u64
        * u64::from(common.warmup + common.rounds);
    let first = 1 + u64::from(worker.fork().saturating_sub(1)) * per_fork;
    for (window, step) in (first..).zip(steps) {
        if run.interrupted() {
            break;
        }
        let workload = &grid.workloads[step.workload];
        let builder = &mut grid.builders[step.workload][step.system];
        let system = &mut grid.systems[step.system];
        let live = builder.is_live() && system.workers.is_some();
        if !live && !worker.is_part() {
            continue;
        }
        let mix = Mix {
            kind: workload.kind,
            read_keys: opts.read_rows as i64,
            value_len: opts.value_size,
            values: values.clone(),
            window,
            seed: common.seed,
            first_connection: segment.start(workload.connections.into()) as usize,
        };
        let label = format!(
            "{workload} · {} · {}",
            system.info.name,
            step.round.label(common.warmup, common.rounds)
        );
        worker.sync(0).await.map_err(Stopped::Barrier)?;
        let server_before = builder.server_cpu_now();
        let ran = match system.workers.as_mut().filter(|_| live) {
            Some(workers) => {
                run.progress().window(label.clone(), common.duration);
                let n = segment.share(workload.connections.into()) as usize;
                Some(workers.run_window(n, &mix, &plan).await)
            }
            None => None,
        };
        let server_cpu = builder.server_cpu_since(server_before);
        if workload.kind != Kind::Read {
            let (acknowledged, possible) = match &ran {
                Some(Ok(window)) => {
                    let c = window.outcome.recorder.counts;
                    (window.inserts_acknowledged, c.error + c.timeout)
                }
                _ => (0, 0),
            };
            let (acknowledged, possible) = worker
                .sync_pair(acknowledged, possible)
                .await
                .map_err(Stopped::Barrier)?;
            if matches!(ran, Some(Ok(_))) && worker.leads() {
                let checked = Checked {
                    table: write_table,
                    mix: &mix,
                    acknowledged,
                    possible,
                    round: step.round,
                };
                verify_writes(system.target.as_mut(), checked, builder).await;
            }
        }
        match ran {
            None => continue,
            Some(Ok(outcome)) => {
                builder.add(step.round, &outcome.outcome);
                builder.add_server_cpu(step.round, server_cpu);
                run.progress()
                    .line(window_line(&label, &outcome.outcome, "ops/s"));
            }
            Some(Err(message)) => {
                let reason = format!("{}: {message}", round_name(step.round));
                builder.mark(Status::Error, reason);
                run.progress().line(format!("{label}: {message}"));
            }
        }
        run.report.worker = worker.info();
        run.record(builder.to_cell())
            .map_err(|e| Stopped::Failed(e.into()))?;
    }
    Ok(())
}

/// What one write window is checked against: the inserts every worker's connections
/// acknowledged, and how many more may have written their row (errors and timeouts).
struct Checked<'a> {
    table: KvTable,
    mix: &'a Mix,
    acknowledged: u64,
    possible: u64,
    round: Round,
}

/// Checks that the rows a write window left are the ones it acknowledged: at least every
/// acknowledged insert, at most those plus the ones whose outcome is unknown.
async fn verify_writes(target: &mut dyn Target, checked: Checked<'_>, builder: &mut CellBuilder) {
    let (low, high) = checked.mix.write_key_range();
    let round = round_name(checked.round);
    match target.count_kv(checked.table, low, high).await {
        Ok(found) => {
            // Failed or abandoned operations may or may not have written their row.
            let min = checked.acknowledged;
            let max = min + checked.possible;
            if found < min || found > max {
                builder.mark(
                    Status::Invalid,
                    format!("{round}: {found} rows found after {min} acknowledged inserts (at most {max} possible)"),
                );
            }
        }
        Err(e) => builder.mark(
            Status::Error,
            format!("{round}: counting the written rows failed: {e}"),
        ),
    }
}

/// What the figures stand on and what they do not establish.
pub(super) fn notes(opts: &CrudOpts, systems: &[System]) -> Vec<String> {
    let mut notes = vec![
        cluster::topology_note(opts, systems),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".to_owned(),
    ];
    for s in systems
        .iter()
        .filter(|s| s.info.location == Location::Embedded)
    {
        notes.push(format!("{} runs inside the client process: no network and no protocol, and its writers share the client's process (an embedded engine's writers queue on an in-process lock).", s.name()));
    }
    for s in systems.iter().filter(|s| !s.info.labels.is_empty()) {
        notes.push(format!("{} is measured with unmatched durability: its cells are not comparable with the others.", s.name()));
    }
    if opts.common.rate.is_none() {
        notes.push("Closed loop: each connection sends its next request when the previous one is answered, so latency and throughput are two views of the same queue.".into());
    }
    notes
}

/// Puts each system's single-connection write rate beside its durable-write floor.
pub(super) fn floor_notes(report: &mut Report) {
    let mut lines = Vec::new();
    for system in &report.systems {
        let Some(floor) = system.durable_write_floor_ns else {
            continue;
        };
        let Some(write_1c) = report
            .cells
            .iter()
            .find(|c| c.system == system.name && c.workload == "write 1c")
            .and_then(Cell::usable_throughput)
        else {
            continue;
        };
        lines.push(format!(
            "{}: write 1c {} ops/s against a durable-write floor of {} in its data directory (one connection can commit at most {} times/s)",
            system.name,
            format_rate(write_1c.median),
            format_latency_ns(floor),
            format_rate(1e9 / floor as f64)
        ));
    }
    report.notes.extend(lines);
}
