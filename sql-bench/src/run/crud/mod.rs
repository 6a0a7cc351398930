//! `sql-bench crud`, as its phases: plan (every input checked before anything is touched) →
//! connect, describe, verify durability and each cluster → prepare and verify the tables →
//! begin the report → warm up and measure, interleaved → read each cluster again → record →
//! render, on common's run lifecycle. As one of several workers (`--worker-count`), each
//! window opens at common's barrier and worker 0 alone prepares, checks and cleans up.

mod cluster;
mod measure;
mod system;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::bail;
use common::options::TargetSpec;
use common::progress::Progress;
use common::results::{Report, Status};
use common::run::{Begin, Lifecycle, Summary, Tool};
use common::scale::{Segment, Worker};

use self::system::{System, measured, tables};
use super::stopped::Stopped;
use crate::opts::CrudOpts;
use crate::report::crud::CrudReport;
use crate::session::{MAX_CONNECTIONS, MAX_WINDOWS};
use crate::suites::crud::data::CrudData;
use crate::suites::crud::workload::Workload;
use crate::systems::{self, Connected};
use crate::targets::KvTable;

pub(crate) const TOOL: Tool = Tool {
    name: "sql-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "crud",
};

/// Runs the suite. Bad input fails before any system's data is touched.
pub async fn run(opts: &CrudOpts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let segment =
        Segment::new(opts.common.worker_index, opts.common.worker_count).unwrap_or(Segment::WHOLE);
    let (workloads, specs) = check(opts)?;
    let (lifecycle, mut worker) =
        Lifecycle::start_joined(TOOL, &opts.common, opts, interrupt).await?;
    let data = CrudData::generate(opts.common.seed, opts.read_rows, opts.value_size);
    let sessions = workloads
        .iter()
        .map(|w| segment.share(w.connections.into()))
        .max()
        .unwrap_or(1) as usize;
    let prepared = prepare(opts, &specs, &data, &lifecycle, &worker).await;
    let mut systems = match prepared {
        Ok(systems) => systems,
        Err(e) => {
            let reason = format!("worker {} could not prepare: {e}", segment.index);
            return Err(lifecycle.abandon_worker(&mut worker, &reason, e).await);
        }
    };
    let mut run = lifecycle.begin(Begin {
        section: cluster::section(opts),
        systems: systems.iter().map(|s| s.info.clone()).collect(),
        reference: opts.common.reference.clone(),
        data: Some(data.info.clone()),
        notes: measure::notes(opts, &systems),
    })?;
    cluster::record_evidence(opts, &systems, &mut run.report);
    let mut builders = measure::builders(opts, &workloads, &systems, segment);
    for b in builders.iter().flatten() {
        run.report.upsert_cell(b.to_cell());
    }
    run.report.worker = worker.info();
    run.save()?;
    // Every worker waits here until worker 0 has made the tables, then opens its sessions.
    let opened = match worker.sync(0).await {
        Ok(_) => open_sessions(opts, &mut systems, sessions, &worker, &mut run.report).await,
        Err(e) => Err(Stopped::Barrier(e)),
    };
    let values: Arc<[String]> = data.write_values.clone().into();
    let mut grid = measure::Grid {
        workloads: &workloads,
        systems: &mut systems,
        builders: &mut builders,
    };
    let measured = match opened {
        Ok(()) => measure::all(opts, &mut grid, values, &mut run, &mut worker).await,
        Err(stopped) => Err(stopped),
    };
    // Worker 0 reads the clusters again and cleans up only once every worker is done.
    let closed = match measured {
        Ok(()) => worker.sync(0).await.map_err(Stopped::Barrier),
        Err(stopped) => Err(stopped),
    };
    match closed {
        Ok(_) => {}
        Err(Stopped::Failed(e)) => {
            worker
                .abort(&format!("worker {} stopped: {e:#}", worker.segment.index))
                .await;
            return Err(e);
        }
        Err(Stopped::Barrier(error)) => {
            let unfinished = builders
                .iter_mut()
                .flatten()
                .map(|b| {
                    b.mark(Status::Error, format!("stopped: {error}"));
                    b.to_cell()
                })
                .collect();
            // Worker 0 drops its tables, as a run that ends does: every worker is stopping.
            if worker.cleans_up(true) {
                cleanup(opts, &mut systems, &mut run.report.notes).await;
            }
            return run.stopped_at_barrier(unfinished, worker.info(), error, &CrudReport);
        }
    }
    run.report.worker = worker.info();
    if run.interrupted() {
        // Said here, before what the clusters and the floors add, as every report orders it.
        run.report.notes.push(common::run::interrupted_note());
    }
    cluster::recheck(opts, &mut systems, &mut builders, &mut run.report).await;
    measure::floor_notes(&mut run.report);
    if worker.cleans_up(run.interrupted()) {
        cleanup(opts, &mut systems, &mut run.report.notes).await;
    }
    run.finish(&CrudReport)
}

/// Every input checked before anything is touched (what `k8s-manifest` checks too): the
/// workloads to run and the targets.
pub(super) fn check(opts: &CrudOpts) -> anyhow::Result<(Vec<Workload>, Vec<TargetSpec>)> {
    let segment =
        Segment::new(opts.common.worker_index, opts.common.worker_count).unwrap_or(Segment::WHOLE);
    let workloads = plan(opts, segment)?;
    let specs = systems::plan_targets(&opts.common)?;
    systems::refuse_embedded_workers(&specs, segment.count)?;
    Ok((workloads, specs))
}

/// The workloads to run, in order; every option checked (each workload's connections must be
/// shared by the workers, one at least each). Fails on bad input only.
fn plan(opts: &CrudOpts, segment: Segment) -> anyhow::Result<Vec<Workload>> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    cluster::check_options(opts)?;
    let connections = opts.common.connections;
    if connections > MAX_CONNECTIONS {
        bail!("--connections {connections} is more than {MAX_CONNECTIONS} connections");
    }
    let workloads = if opts.workloads.is_empty() {
        Workload::defaults(connections)
    } else {
        let parsed = opts
            .workloads
            .iter()
            .map(|w| Workload::parse(w, connections))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::msg)?;
        let mut unique: Vec<Workload> = Vec::new();
        for w in parsed {
            if !unique.contains(&w) {
                unique.push(w);
            }
        }
        unique
    };
    if let Some(w) = workloads
        .iter()
        .find(|w| segment.share(w.connections.into()) == 0)
    {
        bail!(
            "{w}: {} connection(s) cannot be shared by {} workers (each needs one); use fewer workers or more connections",
            w.connections,
            segment.count
        );
    }
    let systems = opts.common.targets.len().max(1) as u64;
    let windows = workloads.len() as u64
        * systems
        * u64::from(opts.common.warmup + opts.common.rounds)
        * u64::from(opts.common.forks.max(1));
    if windows >= MAX_WINDOWS {
        bail!(
            "{windows} windows is more than one run can key uniquely ({MAX_WINDOWS}); use fewer forks, rounds, workloads or targets"
        );
    }
    Ok(workloads)
}

/// Connects to every system, reads what each reports, verifies durability and each cluster,
/// checks the namespace, then creates and verifies the tables. On several workers, worker 0
/// alone touches the namespace and creates the tables.
async fn prepare(
    opts: &CrudOpts,
    specs: &[TargetSpec],
    data: &CrudData,
    lifecycle: &Lifecycle,
    worker: &Worker,
) -> anyhow::Result<Vec<System>> {
    let (read, write) = tables(opts);
    let mut systems = connect_all(opts, specs, lifecycle).await?;
    cluster::verify_all(opts, specs, &mut systems).await?;
    systems::ensure_some_measurable(systems.iter().map(|s| (s.name(), s.refused.as_deref())))?;
    let progress = lifecycle.progress();
    say_refusals(&systems, progress);
    if !worker.prepares() {
        return Ok(systems);
    }
    for system in measured(&mut systems) {
        system.target.check_namespace(&[read, write]).await?;
    }
    for system in measured(&mut systems) {
        progress.line(format!(
            "{}: {} — preparing {}",
            system.name(),
            system.info.version,
            data.info.description
        ));
        create_tables(system, data, read, write).await?;
        cluster::verify_replica_reads(opts, system, data, read).await?;
    }
    Ok(systems)
}

/// Opens `sessions` worker sessions on every measured system. A worker other than worker 0
/// first verifies the tables worker 0 made, from the engine's catalog, into its own report.
async fn open_sessions(
    opts: &CrudOpts,
    systems: &mut [System],
    sessions: usize,
    worker: &Worker,
    report: &mut Report,
) -> Result<(), Stopped> {
    let (read, write) = tables(opts);
    for system in measured(systems) {
        if !worker.prepares() {
            for table in [read, write] {
                let evidence = system.target.verify_kv(table).await.map_err(failed)?;
                if let Some(info) = report
                    .systems
                    .iter_mut()
                    .find(|i| i.name == system.info.name)
                {
                    info.verified.extend(evidence.clone());
                }
                system.info.verified.extend(evidence);
            }
        }
        let workers = system.target.open_kv_workers(sessions, read, write).await;
        system.workers = Some(workers.map_err(failed)?);
    }
    Ok(())
}

fn failed(error: impl Into<anyhow::Error>) -> Stopped {
    Stopped::Failed(error.into())
}

/// Says which systems are refused or measured labelled.
fn say_refusals(systems: &[System], progress: &Progress) {
    for system in systems {
        if let Some(reason) = &system.refused {
            progress.line(format!("{}: refused — {reason}", system.name()));
        } else if system
            .info
            .labels
            .iter()
            .any(|l| common::verdict::label_kind(l) == common::verdict::UNMATCHED_DURABILITY)
        {
            progress.line(format!(
                "{}: measured with unmatched durability, labelled",
                system.name()
            ));
        }
    }
}

/// Opens every target and reads what it reports about itself (see [`systems::connect_all`]).
async fn connect_all(
    opts: &CrudOpts,
    specs: &[TargetSpec],
    lifecycle: &Lifecycle,
) -> anyhow::Result<Vec<System>> {
    let connected = systems::connect_all(
        specs,
        &crate::targets::Reach::of(lifecycle, &opts.common),
        opts.config,
        opts.allow_unmatched_durability,
        opts.common.reference.as_deref(),
    )
    .await?;
    Ok(connected
        .into_iter()
        .map(|c: Connected| System {
            target: c.target,
            info: c.info,
            workers: None,
            refused: c.refused,
            settings_checks: c.settings_checks,
            reads_invalid: None,
            cluster: Default::default(),
        })
        .collect())
}

/// Creates both tables, verifies them from the engine's catalog and reads the read table back.
async fn create_tables(
    system: &mut System,
    data: &CrudData,
    read: KvTable,
    write: KvTable,
) -> anyhow::Result<()> {
    system.target.create_kv(read, &data.read_rows).await?;
    system.target.create_kv(write, &[]).await?;
    for table in [read, write] {
        let evidence = system.target.verify_kv(table).await?;
        system.info.verified.extend(evidence);
    }
    let found = system.target.read_kv(read).await?;
    system.reads_invalid = data.read_table_mismatch(&found);
    Ok(())
}

/// Drops fairbench's tables from every system it prepared, unless asked to keep them.
async fn cleanup(opts: &CrudOpts, systems: &mut [System], notes: &mut Vec<String>) {
    if opts.keep_data {
        return;
    }
    let (read, write) = tables(opts);
    for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
        for table in [read, write] {
            if let Err(e) = system.target.drop_kv(table).await {
                notes.push(format!("cleaning up failed: {e}"));
            }
        }
    }
}
