//! The ycsb run's load phase, timed apart as YCSB's `load` is: every system in turn loads the
//! same records in batches over `--connections` sessions; then its table is counted and a
//! sample read back field by field. A load that fails, times out or does not verify makes
//! every workload of that system say so instead of giving a figure. On several workers the
//! load opens at the barrier, each worker loads its range of the records (YCSB's
//! `insertstart`/`insertcount`) on its share of the connections, and after a second meeting
//! worker 0 counts the whole table against every worker's acknowledged records; a third
//! meeting tells every worker whether the load verified.

use std::sync::Arc;

use common::phases::window_line;
use common::protocol::Round;
use common::results::Status;
use common::run::Recording;
use common::scale::Worker;
use serde_json::json;

use super::{Plan, System};
use crate::opts::YcsbOpts;
use crate::run::stopped::Stopped;
use crate::session::ycsb::LoadPlan;
use crate::session::ycsb::keys::KeySpace;
use crate::suites::ycsb::cells::YcsbCell;
use crate::suites::ycsb::data::YcsbData;

/// Loads every measured system, one after the other, and checks what each holds.
pub(super) async fn all(
    opts: &YcsbOpts,
    plan: &Plan,
    data: &YcsbData,
    systems: &mut [System],
    cells: &mut [Vec<YcsbCell>],
    run: &mut Recording,
    worker: &mut Worker,
) -> Result<(), Stopped> {
    let segment = worker.segment;
    let load = LoadPlan {
        first: segment.start(plan.records),
        records: segment.share(plan.records),
        batch: opts.batch as usize,
        shape: plan.table.shape,
        seed: opts.common.seed,
        ceiling: opts.common.ceiling,
        interrupt: run.interrupt().clone(),
    };
    let connections = segment.share(opts.common.connections.into()) as usize;
    for (index, system) in systems.iter_mut().enumerate() {
        if run.interrupted() {
            break;
        }
        if system.refused.is_some() {
            continue;
        }
        let label = format!("load · {}", system.info.name);
        run.progress().line(format!(
            "{label}: {} records in batches of {} over {connections} connections",
            load.records, opts.batch
        ));
        let cell = &mut cells[0][index];
        let measured = Round {
            index: 0,
            measured: Some(1),
        };
        worker.sync(0).await?;
        let server_before = cell.builder.server_cpu_now();
        let loaded = match system.workers.as_mut() {
            Some(workers) => workers.load(connections, &load).await,
            None => Err("no sessions are open".to_owned()),
        };
        let server_cpu = cell.builder.server_cpu_since(server_before);
        let (acknowledged, possible) = match &loaded {
            Ok(outcome) => {
                let c = outcome.recorder.counts;
                (c.ok, c.error + c.timeout)
            }
            Err(_) => (0, 0),
        };
        let (acknowledged, _) = worker.sync_pair(acknowledged, possible).await?;
        match loaded {
            Ok(outcome) => {
                cell.builder.add(measured, &outcome);
                cell.builder.add_server_cpu(measured, server_cpu);
                run.progress()
                    .line(window_line(&label, &outcome, "records/s"));
            }
            Err(message) => cell.builder.mark(Status::Error, message),
        }
        if cell.builder.is_live() && worker.prepares() {
            verify(plan, data, system, cell, acknowledged).await;
        }
        // A load that did not verify on one worker (worker 0's count included) is every
        // worker's: the workloads would run on the same wrong table.
        let failed_here = u64::from(!cell.builder.is_live());
        let failed = worker.sync(failed_here).await?;
        if failed > 0 {
            let reason = match cell.builder.to_cell().reason {
                Some(reason) if failed_here > 0 => reason,
                _ => format!("the load failed on {failed} of {} workers", segment.count),
            };
            system.load_failed = Some(format!("the load did not complete and verify: {reason}"));
        }
        system.keys = Some(Arc::new(KeySpace::of_worker(
            plan.records,
            segment.index,
            segment.count,
        )));
        run.report.worker = worker.info();
        run.record(cell.to_cell())?;
    }
    Ok(())
}

/// Counts the loaded table and reads the sample back; a difference makes the load invalid.
/// `acknowledged` is the records every worker's sessions acknowledged.
async fn verify(
    plan: &Plan,
    data: &YcsbData,
    system: &mut System,
    cell: &mut YcsbCell,
    acknowledged: u64,
) {
    let table = plan.table;
    let ycsb = system.ycsb();
    match ycsb.count_records(&table).await {
        Ok(count) if count == plan.records && acknowledged == plan.records => {
            cell.facts.insert("records_counted".into(), json!(count));
        }
        Ok(count) => cell.builder.mark(
            Status::Invalid,
            format!(
                "the table holds {count} records after loading {} ({acknowledged} acknowledged)",
                plan.records
            ),
        ),
        Err(e) => cell.builder.mark(
            Status::Error,
            format!("counting the loaded records failed: {e}"),
        ),
    }
    let keys = data.sample_keys();
    match ycsb.read_records(&table, &keys).await {
        Ok(found) => match data.sample_mismatch(&found) {
            None => {
                cell.facts
                    .insert("sample_verified".into(), json!(keys.len()));
                cell.facts
                    .insert("sample_checksum".into(), json!(data.info.checksum));
            }
            Some(problem) => cell.builder.mark(Status::Invalid, problem),
        },
        Err(e) => cell.builder.mark(
            Status::Error,
            format!("reading the sample back failed: {e}"),
        ),
    }
}
