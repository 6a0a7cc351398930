//! The ycsb run's load phase, timed apart as YCSB's `load` is: every system in turn loads the
//! same records in batches over `--connections` sessions; then its table is counted and a
//! sample read back field by field. A load that fails, times out or does not verify makes
//! every workload of that system say so instead of giving a figure.

use common::phases::window_line;
use common::protocol::Round;
use common::results::Status;
use common::run::Recording;
use serde_json::json;

use super::{Plan, System};
use crate::opts::YcsbOpts;
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
) -> anyhow::Result<()> {
    let load = LoadPlan {
        records: plan.records,
        batch: opts.batch as usize,
        shape: plan.table.shape,
        seed: opts.common.seed,
        ceiling: opts.common.ceiling,
        interrupt: run.interrupt().clone(),
    };
    let connections = opts.common.connections as usize;
    for (index, system) in systems.iter_mut().enumerate() {
        if run.interrupted() {
            break;
        }
        let Some(workers) = system.workers.as_mut() else {
            continue;
        };
        let label = format!("load · {}", system.info.name);
        run.progress().line(format!(
            "{label}: {} records in batches of {} over {connections} connections",
            plan.records, opts.batch
        ));
        let cell = &mut cells[0][index];
        let measured = Round {
            index: 0,
            measured: Some(1),
        };
        let server_before = cell.builder.server_cpu_now();
        let loaded = workers.load(connections, &load).await;
        let server_cpu = cell.builder.server_cpu_since(server_before);
        match loaded {
            Ok(outcome) => {
                cell.builder.add(measured, &outcome);
                cell.builder.add_server_cpu(measured, server_cpu);
                run.progress()
                    .line(window_line(&label, &outcome, "records/s"));
            }
            Err(message) => cell.builder.mark(Status::Error, message),
        }
        if cell.builder.is_live() {
            verify(plan, data, system, cell).await;
        }
        if !cell.builder.is_live() {
            let reason = cell.builder.to_cell().reason.unwrap_or_default();
            system.load_failed = Some(format!("the load did not complete and verify: {reason}"));
        }
        system.keys = Some(std::sync::Arc::new(KeySpace::new(plan.records)));
        run.record(cell.to_cell())?;
    }
    Ok(())
}

/// Counts the loaded table and reads the sample back; a difference makes the load invalid.
async fn verify(plan: &Plan, data: &YcsbData, system: &mut System, cell: &mut YcsbCell) {
    let table = plan.table;
    let ycsb = system.ycsb();
    match ycsb.count_records(&table).await {
        Ok(count) if count == plan.records => {
            cell.facts.insert("records_counted".into(), json!(count));
        }
        Ok(count) => cell.builder.mark(
            Status::Invalid,
            format!(
                "the table holds {count} records after loading {}",
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
