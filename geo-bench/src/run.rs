//! One geo-bench run, as its phases: plan (validate every input before touching anything) →
//! connect and describe → prepare, load, verify indexes and every query against the oracle →
//! measure, interleaved → record → render, on common's run lifecycle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::protocol::CellBuilder as Builder;
use common::protocol::{CellBuilder, schedule};
use common::results::Status;
use common::run::{Begin, Lifecycle, Recording, Summary, Tool};
use common::scale::{BarrierError, Worker};

use crate::measure::{Shared, Slot, builder, clients, finish_cell, floor_notes, notes, one_window};
use crate::opts::Opts;
use crate::report::GeoReport;
use crate::systems::{self, System};

const TOOL: Tool = Tool {
    name: "geo-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "geo",
};

/// What was held equal for every system.
const SECTION: &str =
    "each system at the durability it reports (labelled); one request carries a batch of events";

/// Runs geo-bench. Bad input fails before any system's data is touched.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let plan = crate::plan::plan(opts)?;
    let specs = opts
        .common
        .targets_or(crate::targets::DEFAULT_TARGET)
        .map_err(anyhow::Error::msg)?;
    let segment = common::scale::Segment::new(opts.common.worker_index, opts.common.worker_count)
        .unwrap_or(common::scale::Segment::WHOLE);
    if let Some(w) = plan.workloads.iter().find(|w| clients(w, segment).0 == 0) {
        anyhow::bail!(
            "{w}: {} clients cannot be shared by {} workers (each needs one); use fewer workers or more --clients/--connections",
            w.clients(),
            segment.count
        );
    }
    let sessions = plan
        .workloads
        .iter()
        .map(|w| clients(w, segment).0 as usize)
        .max()
        .unwrap_or(1);
    let (lifecycle, mut worker) =
        Lifecycle::start_joined(TOOL, &opts.common, opts, interrupt).await?;
    let connected = systems::connect_all(
        &specs,
        opts.common.reference.as_deref(),
        &crate::targets::Reach::of(&lifecycle, &opts.common),
    )
    .await;
    let (mut systems, reference) = match connected {
        Ok(connected) => connected,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    let prepared = systems::prepare(
        &mut systems,
        &plan,
        lifecycle.progress(),
        worker.prepares(),
        worker.fork() > 1,
        sessions,
    )
    .await;
    if let Err(e) = prepared {
        let reason = format!("worker {} could not prepare: {e}", segment.index);
        return Err(lifecycle.abandon_worker(&mut worker, &reason, e).await);
    }
    let mut run = lifecycle.begin(Begin {
        section: SECTION.into(),
        systems: systems.iter().map(|s| s.info.clone()).collect(),
        reference: Some(reference),
        data: Some(plan.data_info(opts.common.seed)),
        notes: notes(opts, &plan, &systems),
    })?;
    // The floors were measured as the report began; the insert notes read them from there.
    for (system, info) in systems.iter_mut().zip(&run.report.systems) {
        system.info.durable_write_floor_ns = info.durable_write_floor_ns;
    }
    let mut builders: Vec<Vec<Option<CellBuilder>>> = plan
        .workloads
        .iter()
        .map(|w| {
            systems
                .iter()
                .map(|s| builder(opts, w, s, segment))
                .collect()
        })
        .collect();
    let mut results_sums = vec![vec![0u64; systems.len()]; plan.workloads.len()];
    for (wi, row) in builders.iter().enumerate() {
        for b in row.iter().flatten() {
            run.report
                .upsert_cell(finish_cell(b, &plan.workloads[wi], 0));
        }
    }
    run.save()?;
    let common = &opts.common;
    let window_plan = run.window_plan(common, segment, common.rate);
    run.plan_progress(common, plan.workloads.len() * systems.len());
    let mut window_number: u64 = 0;
    for step in schedule(
        plan.workloads.len(),
        systems.len(),
        common.warmup,
        common.rounds,
    ) {
        if run.interrupted() {
            break;
        }
        let (wi, si) = (step.workload, step.system);
        let Some(b) = builders[wi][si].as_mut() else {
            continue;
        };
        // Numbered and met on every worker, measured or not, so the workers' windows and the
        // barrier's rounds agree when a cell died on one of them only.
        window_number += 1;
        if !b.is_live() || systems[si].workers.is_none() {
            if let Err(e) = meet_unmeasured(&mut worker, &plan.workloads[wi]).await {
                return stopped(opts, &mut systems, run, &worker, &mut builders, &plan, e).await;
            }
            continue;
        }
        let shared = Shared {
            opts,
            plan: &plan,
            window_plan: &window_plan,
            progress: run.progress(),
            segment,
        };
        let slot = Slot {
            system: &mut systems[si],
            workload: &plan.workloads[wi],
            round: step.round,
            window_number,
            builder: b,
            results_sum: &mut results_sums[wi][si],
            worker: &mut worker,
        };
        if let Err(e) = one_window(&shared, slot).await {
            return stopped(opts, &mut systems, run, &worker, &mut builders, &plan, e).await;
        }
        run.report.worker = worker.info();
        run.record(finish_cell(b, &plan.workloads[wi], results_sums[wi][si]))?;
    }
    // Worker 0 cleans up only once every worker is done with its last window.
    if let Err(e) = worker.sync(0).await {
        return stopped(opts, &mut systems, run, &worker, &mut builders, &plan, e).await;
    }
    run.report.worker = worker.info();
    floor_notes(&mut run.report, &systems);
    run.report.extra.insert(
        "insert_curve".into(),
        crate::report::curve_json(&run.report),
    );
    if worker.cleans_up(run.interrupted()) {
        cleanup(opts, &mut systems, &mut run.report.notes).await;
    }
    run.finish(&GeoReport)
}

/// The meetings [`one_window`] has for `workload`, for a window this worker does not measure
/// (free without workers).
async fn meet_unmeasured(
    worker: &mut Worker,
    workload: &crate::workloads::Workload,
) -> Result<(), BarrierError> {
    worker.sync(0).await?;
    if workload.writes() {
        worker.sync_pair(0, 0).await?;
    }
    Ok(())
}

/// The run stopped at the barrier: every cell not yet measured in full says why, and the
/// error (exit 3) goes back with results.json written; or, when a worker was interrupted,
/// the run ends as an interrupted one. Either way the data is dropped, unless kept.
async fn stopped(
    opts: &Opts,
    systems: &mut [System],
    mut run: Recording,
    worker: &Worker,
    builders: &mut [Vec<Option<Builder>>],
    plan: &crate::plan::Plan,
    error: BarrierError,
) -> anyhow::Result<Summary> {
    // Worker 0 drops the data it made, as a run that ends does: every worker is stopping.
    if worker.cleans_up(true) {
        cleanup(opts, systems, &mut run.report.notes).await;
    }
    let mut unfinished = Vec::new();
    for (wi, row) in builders.iter_mut().enumerate() {
        for b in row.iter_mut().flatten() {
            b.mark(Status::Error, format!("stopped: {error}"));
            unfinished.push(finish_cell(b, &plan.workloads[wi], 0));
        }
    }
    run.stopped_at_barrier(unfinished, worker.info(), error, &GeoReport)
}

/// Removes fairbench's data from every system it prepared, unless asked to keep it.
async fn cleanup(opts: &Opts, systems: &mut [System], notes: &mut Vec<String>) {
    if opts.keep_data {
        return;
    }
    for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
        if let Err(e) = system.target.cleanup().await {
            notes.push(format!("cleaning up failed: {e}"));
        }
    }
}

impl common::fork::Forking for Opts {
    fn forking(&self) -> Option<(common::run::Tool, &common::options::CommonOpts)> {
        Some((TOOL, &self.common))
    }
}
