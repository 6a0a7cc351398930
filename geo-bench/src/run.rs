//! One geo-bench run, as its phases: plan (validate every input before touching anything) →
//! connect and describe → prepare, load, verify indexes and every query against the oracle →
//! measure, interleaved → record → render, on common's run lifecycle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::protocol::{CellBuilder, schedule};
use common::run::{Begin, Lifecycle, Summary, Tool};
use common::window::WindowPlan;

use crate::measure::{Shared, Slot, builder, finish_cell, floor_notes, notes, one_window};
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
    let lifecycle = Lifecycle::start(TOOL, &opts.common, opts, interrupt)?;
    let connected = systems::connect_all(
        &specs,
        opts.common.reference.as_deref(),
        lifecycle.results_path(),
    )
    .await;
    let (mut systems, reference) = match connected {
        Ok(connected) => connected,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    if let Err(e) = systems::prepare(&mut systems, &plan, lifecycle.progress()).await {
        return Err(lifecycle.abandon(e));
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
        .map(|w| systems.iter().map(|s| builder(opts, w, s)).collect())
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
    let window_plan = WindowPlan {
        duration: common.duration,
        ceiling: common.ceiling,
        rate_per_s: common.rate,
        interrupt: run.interrupt().clone(),
        progress: run.progress().sender(),
    };
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
        if !b.is_live() || systems[si].workers.is_none() {
            continue;
        }
        window_number += 1;
        let shared = Shared {
            opts,
            plan: &plan,
            window_plan: &window_plan,
            progress: run.progress(),
        };
        let slot = Slot {
            system: &mut systems[si],
            workload: &plan.workloads[wi],
            round: step.round,
            window_number,
            builder: b,
            results_sum: &mut results_sums[wi][si],
        };
        one_window(&shared, slot).await;
        run.record(finish_cell(b, &plan.workloads[wi], results_sums[wi][si]))?;
    }
    floor_notes(&mut run.report, &systems);
    run.report.extra.insert(
        "insert_curve".into(),
        crate::report::curve_json(&run.report),
    );
    cleanup(opts, &mut systems, &mut run.report.notes).await;
    run.finish(&GeoReport)
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
