//! `sql-bench ycsb`, as its phases: plan (every workload file and option checked before
//! anything is touched) → connect, describe and verify durability → create and verify the
//! table, open the sessions → begin the report → load each system (timed, then counted and a
//! sample read back) → each workload's warm-ups and rounds, interleaved, the record count
//! checked after every window that inserts or deletes → record → render. As one of several
//! workers (`--worker-count`), worker 0 alone creates, counts and drops the table, each
//! worker loads its range of the records, and every window opens at common's barrier.

mod load;
mod measure;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::bail;
use common::options::TargetSpec;
use common::results::Status;
use common::results::SystemInfo;
use common::run::{Begin, Lifecycle, Summary, Tool};
use common::scale::{Segment, Worker};

use super::stopped::Stopped;
use crate::opts::YcsbOpts;
use crate::report::ycsb::YcsbReport;
use crate::session::MAX_CONNECTIONS;
use crate::session::ycsb::YcsbWorkers;
use crate::session::ycsb::keys::KeySpace;
use crate::session::ycsb::op::Shape;
use crate::session::ycsb::stats::Kind;
use crate::suites::ycsb::data::YcsbData;
use crate::suites::ycsb::workload::Workload;
use crate::systems::{self, Connected};
use crate::targets::ycsb::YcsbTable;
use crate::targets::{Target, YcsbTarget};

pub(crate) const TOOL: Tool = Tool {
    name: "sql-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "ycsb",
};

/// The table every system's records go to (each engine puts it in fairbench's namespace).
const TABLE: &str = "ycsb";
/// Records loaded unless the flag or the first workload file says otherwise.
const DEFAULT_RECORDS: u64 = 100_000;

/// What the run will do, every input checked.
pub(super) struct Plan {
    pub workloads: Vec<Workload>,
    pub records: u64,
    pub table: YcsbTable,
    /// Connections of each workload (its file's, else `--connections`).
    pub connections: Vec<u32>,
    /// Open-loop rate of each workload (its file's, else `--rate`).
    pub rates: Vec<Option<f64>>,
}

/// One system as the ycsb run sees it.
pub(super) struct System {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    pub refused: Option<String>,
    pub workers: Option<Box<dyn YcsbWorkers>>,
    /// Its table's key space, once loaded.
    pub keys: Option<Arc<KeySpace>>,
    /// Why its workloads cannot be trusted (the load did not complete or verify).
    pub load_failed: Option<String>,
    /// The fewest and most records the table may hold, given what was acknowledged.
    pub expected: (u64, u64),
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The engine's YCSB control path (every measured system has one: checked in prepare).
    pub fn ycsb(&mut self) -> &mut dyn YcsbTarget {
        self.target
            .ycsb()
            .expect("systems without a ycsb control path are refused in prepare")
    }
}

/// Runs the suite. Bad input fails before any system's data is touched.
pub async fn run(opts: &YcsbOpts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let segment =
        Segment::new(opts.common.worker_index, opts.common.worker_count).unwrap_or(Segment::WHOLE);
    let (plan, specs) = check(opts)?;
    let (lifecycle, worker) = Lifecycle::start_joined(TOOL, &opts.common, opts, interrupt).await?;
    // Each fork loads, measures and drops a table of its own: YCSB's load is itself a measured
    // workload (a fork that skipped it would leave the load cell one process), and workloads D
    // and E insert keys that continue the load's sequence, which a second fork would repeat.
    let mut worker = worker.in_fork(0, 1);
    let progress = lifecycle.progress();
    progress.line(format!("sampling {} records…", plan.records));
    let data = YcsbData::generate(opts.common.seed, plan.records, plan.table.shape);
    let mut systems = match prepare(opts, &plan, &specs, &lifecycle, &worker).await {
        Ok(systems) => systems,
        Err(e) => {
            let reason = format!("worker {} could not prepare: {e}", segment.index);
            return Err(lifecycle.abandon_worker(&mut worker, &reason, e).await);
        }
    };
    let mut run = lifecycle.begin(Begin {
        section: format!(
            "{}; YCSB records and request distributions as Java YCSB defines them",
            opts.config.section()
        ),
        systems: systems.iter().map(|s| s.info.clone()).collect(),
        reference: opts.common.reference.clone(),
        data: Some(data.info.clone()),
        notes: measure::notes(opts, &plan, &systems, segment),
    })?;
    let mut cells = measure::cells(opts, &plan, &mut systems, segment);
    for cell in cells.iter().flatten() {
        run.report.upsert_cell(cell.to_cell());
    }
    run.report.worker = worker.info();
    run.save()?;
    // Every worker waits here until worker 0 has made the table, then opens its sessions.
    let mut done = match worker.sync(0).await {
        Ok(_) => open_sessions(&plan, &mut systems, segment).await,
        Err(e) => Err(Stopped::Barrier(e)),
    };
    if done.is_ok() {
        done = load::all(
            opts,
            &plan,
            &data,
            &mut systems,
            &mut cells,
            &mut run,
            &mut worker,
        )
        .await;
    }
    if done.is_ok() {
        done = measure::all(
            opts,
            &plan,
            &data,
            &mut systems,
            &mut cells,
            &mut run,
            &mut worker,
        )
        .await;
    }
    // Worker 0 drops the table only once every worker is done with it.
    if done.is_ok() {
        done = worker.sync(0).await.map(|_| ()).map_err(Stopped::Barrier);
    }
    match done {
        Ok(()) => {}
        Err(Stopped::Failed(e)) => {
            worker
                .abort(&format!("worker {} stopped: {e:#}", segment.index))
                .await;
            return Err(e);
        }
        Err(Stopped::Barrier(error)) => {
            let unfinished = cells
                .iter_mut()
                .flatten()
                .map(|c| {
                    c.builder.mark(Status::Error, format!("stopped: {error}"));
                    c.to_cell()
                })
                .collect();
            // Worker 0 drops its table, as a run that ends does: every worker is stopping.
            if worker.prepares() {
                cleanup(opts, &plan, &mut systems, &mut run.report.notes).await;
            }
            return run.stopped_at_barrier(unfinished, worker.info(), error, &YcsbReport);
        }
    }
    run.report.worker = worker.info();
    if run.interrupted() {
        run.report.notes.push(common::run::interrupted_note());
    }
    if worker.prepares() {
        cleanup(opts, &plan, &mut systems, &mut run.report.notes).await;
    }
    run.finish(&YcsbReport)
}

/// Every input checked before anything is touched (what `k8s-manifest` checks too): the plan
/// and the targets.
pub(super) fn check(opts: &YcsbOpts) -> anyhow::Result<(Plan, Vec<TargetSpec>)> {
    let segment =
        Segment::new(opts.common.worker_index, opts.common.worker_count).unwrap_or(Segment::WHOLE);
    let plan = plan(opts, segment)?;
    let specs = systems::plan_targets(&opts.common)?;
    systems::refuse_embedded_workers(&specs, segment.count)?;
    Ok((plan, specs))
}

/// Every workload file parsed and checked, and the options with them. Fails on bad input only.
fn plan(opts: &YcsbOpts, segment: Segment) -> anyhow::Result<Plan> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    if opts.workloads.is_empty() {
        bail!("--workload names no workload; use a, b, c, d, e, f or a TOML file");
    }
    let workloads = opts
        .workloads
        .iter()
        .map(|w| Workload::load(w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let first = &workloads[0];
    for w in &workloads[1..] {
        if w.shape != first.shape {
            bail!(
                "workload {} has {} fields of {} bytes but {} has {} of {}: every workload of a run reads the same loaded records",
                w.source,
                w.shape.fields,
                w.shape.field_length,
                first.source,
                first.shape.fields,
                first.shape.field_length
            );
        }
    }
    let names: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
    if let Some(twice) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        bail!("workload `{}` is named twice in --workload", twice.1);
    }
    let records = opts.records.or(first.records).unwrap_or(DEFAULT_RECORDS);
    if records == 0 {
        bail!("--records 0: a YCSB run needs at least one record");
    }
    if opts.batch == 0 || opts.batch > 10_000 {
        bail!("--batch {} must be from 1 to 10,000 records", opts.batch);
    }
    let connections: Vec<u32> = workloads
        .iter()
        .map(|w| w.connections.unwrap_or(opts.common.connections))
        .collect();
    if let Some(too_many) = connections.iter().find(|c| **c > MAX_CONNECTIONS) {
        bail!("{too_many} connections is more than {MAX_CONNECTIONS}");
    }
    let rates = workloads
        .iter()
        .map(|w| w.target_rate.or(opts.common.rate))
        .collect();
    refuse_for_workers(opts, &workloads, &connections, segment)?;
    Ok(Plan {
        table: YcsbTable {
            name: TABLE,
            shape: Shape {
                fields: first.shape.fields,
                field_length: first.shape.field_length,
            },
        },
        workloads,
        records,
        connections,
        rates,
    })
}

/// What several workers cannot share, refused before anything is touched: a workload that
/// deletes (its deletes take the oldest record of one sequence, which workers on several
/// machines cannot share) and fewer load or workload connections than workers.
fn refuse_for_workers(
    opts: &YcsbOpts,
    workloads: &[Workload],
    connections: &[u32],
    segment: Segment,
) -> anyhow::Result<()> {
    let count = segment.count;
    if count == 1 {
        return Ok(());
    }
    if let Some(w) = workloads.iter().find(|w| w.proportion(Kind::Delete) > 0.0) {
        bail!(
            "--worker-count {count}: workload {} deletes, and its deletes take the oldest record of one sequence that {count} workers cannot share; run it on one machine",
            w.name
        );
    }
    if opts.common.connections < count {
        bail!(
            "--worker-count {count}: the load's {} connection(s) cannot be shared by {count} workers (each needs one); use fewer workers or more --connections",
            opts.common.connections
        );
    }
    if let Some((w, c)) = workloads
        .iter()
        .zip(connections)
        .find(|(_, c)| segment.share(u64::from(**c)) == 0)
    {
        bail!(
            "--worker-count {count}: workload {}'s {c} connection(s) cannot be shared by {count} workers (each needs one); use fewer workers or more connections",
            w.name
        );
    }
    Ok(())
}

/// Connects to every system and reads what it reports, refuses those without a YCSB path;
/// worker 0 (or a run alone) checks the namespace and creates and verifies the table.
async fn prepare(
    opts: &YcsbOpts,
    plan: &Plan,
    specs: &[TargetSpec],
    lifecycle: &Lifecycle,
    worker: &Worker,
) -> anyhow::Result<Vec<System>> {
    let connected = systems::connect_all(
        specs,
        &crate::targets::Reach::of(lifecycle, &opts.common),
        opts.config,
        opts.allow_unmatched_durability,
        opts.common.reference.as_deref(),
    )
    .await?;
    let mut systems: Vec<System> = connected
        .into_iter()
        .map(|c: Connected| System {
            target: c.target,
            info: c.info,
            refused: c.refused,
            workers: None,
            keys: None,
            load_failed: None,
            expected: (plan.records, plan.records),
        })
        .collect();
    for system in &mut systems {
        if system.refused.is_none() && system.target.ycsb().is_none() {
            system.refused = Some("this engine has no YCSB table and sessions".into());
        }
    }
    systems::ensure_some_measurable(systems.iter().map(|s| (s.name(), s.refused.as_deref())))?;
    let progress = lifecycle.progress();
    for system in systems.iter().filter(|s| s.refused.is_some()) {
        let reason = system.refused.as_deref().unwrap_or_default();
        progress.line(format!("{}: refused — {reason}", system.name()));
    }
    if !worker.prepares() {
        return Ok(systems);
    }
    let table = plan.table;
    for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
        system.ycsb().check_table(&table).await?;
    }
    for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
        progress.line(format!(
            "{}: {} — creating its YCSB table",
            system.name(),
            system.info.version
        ));
        let evidence = system.ycsb().create_table(&table).await?;
        system.info.verified.extend(evidence);
    }
    Ok(systems)
}

/// Opens every measured system's sessions on the table (worker 0's, made before the meeting
/// this follows): as many as the largest workload's share of this worker.
async fn open_sessions(
    plan: &Plan,
    systems: &mut [System],
    segment: Segment,
) -> Result<(), Stopped> {
    let sessions = plan
        .connections
        .iter()
        .map(|c| segment.share(u64::from(*c)))
        .max()
        .unwrap_or(1) as usize;
    for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
        let workers = system.ycsb().open_ycsb_workers(sessions, &plan.table).await;
        system.workers = Some(workers.map_err(|e| Stopped::Failed(e.into()))?);
    }
    Ok(())
}

/// Drops the YCSB table from every system it was made on, unless asked to keep it.
async fn cleanup(opts: &YcsbOpts, plan: &Plan, systems: &mut [System], notes: &mut Vec<String>) {
    if opts.keep_data {
        return;
    }
    for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
        // Close the sessions first: some engines wait for them before dropping a table.
        system.workers = None;
        if let Err(e) = system.ycsb().drop_table(&plan.table).await {
            notes.push(format!("cleaning up failed: {e}"));
        }
    }
}
