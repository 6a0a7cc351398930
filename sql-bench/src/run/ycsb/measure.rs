//! The ycsb run's measurement: one cell per workload × system, every window in common's
//! interleaved schedule with the same generator streams on every system, the record count
//! checked after each window that inserts or deletes, and the notes the figures stand on. On
//! several workers every window opens at the barrier (measured or not, so every worker meets
//! the same rounds), each worker draws from its own seed on its share of the connections and
//! the rate, and after a window that inserts worker 0 counts the table against every
//! worker's acknowledged inserts.

use std::sync::Arc;

use common::phases::window_line;
use common::protocol::{CellBuilder, schedule};
use common::results::{Cell, Status};
use common::run::Recording;
use common::scale::{Segment, Worker};
use common::servercpu::ServerProcess;
use serde_json::json;

use super::{Plan, System};
use crate::opts::YcsbOpts;
use crate::run::stopped::Stopped;
use crate::session::ycsb::YcsbWindow;
use crate::session::ycsb::keys::{SCRAMBLED_ZETAN, SkewedLatest};
use crate::session::ycsb::op::{Mix, Request};
use crate::session::ycsb::stats::Kind;
use crate::suites::ycsb::cells::{LOAD, YcsbCell};
use crate::suites::ycsb::data::YcsbData;

/// Row 0: each system's load; then one row per workload, in the order given.
pub(super) fn cells(
    opts: &YcsbOpts,
    plan: &Plan,
    systems: &mut [System],
    segment: Segment,
) -> Vec<Vec<YcsbCell>> {
    let common = &opts.common;
    let share = |connections: u32| segment.share(connections.into()) as u32;
    let new = |workload: &str, system: &System, unit: &str, connections: u32, rounds: u32| {
        let mut b = CellBuilder::new(
            Cell::new(workload, system.name(), unit, connections, rounds),
            common.ceiling,
        );
        b.server(&ServerProcess::locate(&system.info, None));
        for label in &system.info.labels {
            b.add_label(label);
        }
        if let Some(reason) = &system.refused {
            b.mark(Status::Refused, reason.clone());
        }
        b
    };
    let mut rows = vec![
        systems
            .iter()
            .map(|s| {
                let mut cell = YcsbCell::new(
                    new(LOAD, s, "records/s", share(common.connections), 1),
                    None,
                );
                cell.facts.insert("records".into(), json!(plan.records));
                cell.facts.insert("batch".into(), json!(opts.batch));
                cell
            })
            .collect::<Vec<_>>(),
    ];
    for (index, workload) in plan.workloads.iter().enumerate() {
        let row = systems
            .iter_mut()
            .map(|system| {
                let b = new(
                    &workload.name,
                    system,
                    "ops/s",
                    share(plan.connections[index]),
                    common.rounds,
                );
                let mut cell = YcsbCell::new(b, Some(workload));
                if workload.request == Request::Zipfian {
                    cell.expected_hottest_share = Some(1.0 / SCRAMBLED_ZETAN);
                }
                if system.refused.is_none() {
                    let ycsb = system.ycsb();
                    for kind in workload.kinds() {
                        if let Some(reason) = ycsb.refuses(kind) {
                            cell.builder.mark(Status::Refused, reason);
                        }
                        if let Some(how) = ycsb.answered_by(kind) {
                            cell.answered_by(kind, how);
                        }
                    }
                }
                cell
            })
            .collect();
        rows.push(row);
    }
    rows
}

/// Measures every window of the schedule (warm-ups discarded, systems in alternating order),
/// recording each cell the moment its window is done; stops early when interrupted.
pub(super) async fn all(
    opts: &YcsbOpts,
    plan: &Plan,
    data: &YcsbData,
    systems: &mut [System],
    cells: &mut [Vec<YcsbCell>],
    run: &mut Recording,
    worker: &mut Worker,
) -> Result<(), Stopped> {
    let common = &opts.common;
    let segment = worker.segment;
    let values: Arc<[String]> = data.write_values.clone().into();
    run.plan_progress(common, plan.workloads.len() * systems.len());
    let steps = schedule(
        plan.workloads.len(),
        systems.len(),
        common.warmup,
        common.rounds,
    );
    for step in steps {
        if run.interrupted() {
            break;
        }
        let workload = &plan.workloads[step.workload];
        let cell = &mut cells[step.workload + 1][step.system];
        let system = &mut systems[step.system];
        if let Some(reason) = &system.load_failed {
            cell.builder.mark(Status::Error, reason.clone());
        }
        let keys = system.keys.clone().filter(|_| cell.builder.is_live());
        let live = keys.is_some() && system.workers.is_some();
        if !live && !worker.is_part() {
            run.record(cell.to_cell())?;
            continue;
        }
        let label = format!(
            "{} · {} · {}",
            workload.name,
            system.info.name,
            step.round.label(common.warmup, common.rounds)
        );
        let window_plan = run.window_plan(common, segment, plan.rates[step.workload]);
        let connections = segment.share(plan.connections[step.workload].into()) as usize;
        worker.sync(0).await?;
        let mut server_cpu = None;
        let ran = match (keys, system.workers.as_mut()) {
            (Some(keys), Some(workers)) => {
                let mix = Mix {
                    thresholds: workload.thresholds(),
                    request: workload.request,
                    records: plan.records,
                    zipfian_max: workload.zipfian_max(plan.records),
                    scan: workload.scan,
                    shape: plan.table.shape,
                    values: values.clone(),
                    latest: (workload.request == Request::Latest)
                        .then(|| SkewedLatest::new(keys.last())),
                    keys,
                    // The same streams on every system: workload, then round.
                    stream: ((step.workload as u64 + 1) << 16) | u64::from(step.round.index),
                    seed: segment.seed(common.seed),
                    ceiling: common.ceiling,
                };
                run.progress().window(label.clone(), common.duration);
                let server_before = cell.builder.server_cpu_now();
                let ran = workers.run_window(connections, &mix, &window_plan).await;
                server_cpu = cell.builder.server_cpu_since(server_before);
                Some(ran)
            }
            _ => None,
        };
        if workload.kinds().any(Kind::changes_count) {
            let (inserted, possible) = match &ran {
                Some(Ok(window)) => {
                    let inserts = window.stats.kind(Kind::Insert);
                    let unknown = window.outcome.stuck_workers as u64;
                    (inserts.ok, inserts.error + unknown)
                }
                _ => (0, 0),
            };
            let (inserted, possible) = worker.sync_pair(inserted, possible).await?;
            if let (Some(Ok(window)), true) = (&ran, worker.prepares()) {
                let round = step.round.label(common.warmup, common.rounds);
                let changed = Changed {
                    inserted,
                    possible,
                    window,
                };
                verify_count(plan, system, changed, cell, round).await;
            }
        }
        match ran {
            None => continue,
            Some(Ok(window)) => {
                cell.add(step.round, &window);
                cell.builder.add_server_cpu(step.round, server_cpu);
                run.progress()
                    .line(window_line(&label, &window.outcome, "ops/s"));
            }
            Some(Err(message)) => {
                cell.builder
                    .mark(Status::Error, format!("{label}: {message}"));
                run.progress().line(format!("{label}: {message}"));
            }
        }
        run.report.worker = worker.info();
        run.record(cell.to_cell())?;
    }
    Ok(())
}

/// What one window changed: the inserts every worker acknowledged, how many more may have
/// written their record (errors, stuck sessions), and this worker's window (its deletes: a
/// run that deletes has one worker).
struct Changed<'a> {
    inserted: u64,
    possible: u64,
    window: &'a YcsbWindow,
}

/// Checks that the table holds what the acknowledged inserts and deletes leave: at least every
/// acknowledged change, at most those plus the ones whose outcome is unknown.
async fn verify_count(
    plan: &Plan,
    system: &mut System,
    changed: Changed<'_>,
    cell: &mut YcsbCell,
    round: String,
) {
    let deletes = changed.window.stats.kind(Kind::Delete);
    let unknown = changed.window.outcome.stuck_workers as u64;
    let (min, max) = system.expected;
    let min = (min + changed.inserted).saturating_sub(deletes.ok + deletes.error + unknown);
    let max = (max + changed.inserted + changed.possible).saturating_sub(deletes.ok);
    system.expected = (min, max);
    match system.ycsb().count_records(&plan.table).await {
        Ok(found) if (min..=max).contains(&found) => {
            cell.facts.insert("records_counted".into(), json!(found));
        }
        Ok(found) => cell.builder.mark(
            Status::Invalid,
            format!("{round}: the table holds {found} records; the acknowledged inserts and deletes leave from {min} to {max}"),
        ),
        Err(e) => cell
            .builder
            .mark(Status::Error, format!("{round}: counting the records failed: {e}")),
    }
}

/// What the figures stand on and what they do not establish.
pub(super) fn notes(
    opts: &YcsbOpts,
    plan: &Plan,
    systems: &[System],
    segment: Segment,
) -> Vec<String> {
    let mut notes = vec![
        "Every system is one node and the client ran on this machine, beside any local server: the client's CPU time is taken from the servers'.".to_owned(),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".to_owned(),
        format!(
            "Each system loaded the same {} records (timed apart, as YCSB's load), then ran the workloads in order on what the earlier ones left (inserts and updates included), each worker drawing the same operations and keys on every system.",
            plan.records
        ),
        "Keys are Java YCSB's (user + FNV-1a 64 of the key number, least significant byte first); go-ycsb hashes the bytes in the opposite order, so its keys (and which keys are hot) differ.".to_owned(),
    ];
    if segment.count > 1 {
        notes.push(format!(
            "{n} workers drove each system: each loaded its range of the records on its share of the connections, and each drew its operations and keys from a seed of its own over every loaded record; worker i of {n} inserts key numbers {records} + i, {records} + i + {n}, … (none inserted twice), and its `latest` is the newest of its own inserts (before its first, the newest loaded record).",
            n = segment.count,
            records = plan.records,
        ));
    }
    if systems.iter().any(|s| s.info.kind == "sqlite") {
        notes.push("SQLite runs inside the client process: no network and no protocol, and its writers queue on an in-process lock (one writer at a time).".into());
    }
    for s in systems.iter().filter(|s| !s.info.labels.is_empty()) {
        notes.push(format!("{} is measured with unmatched durability: its cells are not comparable with the others.", s.name()));
    }
    if plan.rates.iter().all(Option::is_none) && opts.common.rate.is_none() {
        notes.push("Closed loop: each connection sends its next request when the previous one is answered, so latency and throughput are two views of the same queue.".into());
    }
    notes
}
