//! One run of mqtt-bench, as its phases: plan (check every input before anything is sent, raise
//! the file-descriptor limit and check the run fits in it and in the ephemeral ports) → reach
//! (or start) every broker, read what it says about itself and verify a round trip in each
//! protocol → warm up and measure every row, systems and QoS levels interleaved in alternating
//! order → record each cell as it is measured → render, on common's run lifecycle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::bail;
use common::options::TargetSpec;
use common::results::SystemInfo;
use common::run::{Begin, Lifecycle, Summary, Tool};
use common::scale::Segment;

use crate::gate::Gate;
use crate::measure::{self, Windows};
use crate::opts::Opts;
use crate::os::{self, FdLimit};
use crate::report::{self, MqttReport};
use crate::workloads::{self, Baselines, Row};
use crate::{systems, workers};

const TOOL: Tool = Tool {
    name: "mqtt-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "brokers",
};

/// Every input checked before anything is sent or raised (what `k8s-manifest` checks too):
/// the options with the brokers as targets, the targets and this worker's segment.
pub fn check(opts: Opts) -> anyhow::Result<(Opts, Vec<TargetSpec>, Segment)> {
    let opts = opts.with_brokers_as_targets();
    opts.validate()?;
    let specs = systems::specs(&opts.common.targets)?;
    let segment =
        Segment::new(opts.common.worker_index, opts.common.worker_count).unwrap_or(Segment::WHOLE);
    workers::check(&opts, &specs, segment)?;
    Ok((opts, specs, segment))
}

/// Runs every chosen scenario against every system. Bad input fails before anything is sent.
/// With several workers this one joins the start barrier before reaching any broker, takes
/// its share of every quantity, opens every window at the barrier and meets the others once
/// more when it is done.
pub async fn run(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let (opts, specs, segment) = check(opts)?;
    let rows = workloads::rows(&opts);
    let fd = plan(&opts, &rows, &specs, segment)?;
    let (lifecycle, mut worker) =
        Lifecycle::start_joined(TOOL, &opts.common, &opts, interrupt).await?;
    let run_id = opts.common.run_id.as_deref().unwrap_or_default();
    let run_tag = measure::run_tag(worker.is_part().then_some((run_id, segment.index)));
    let access = crate::targets::Reach::of(&lifecycle, &opts.common);
    let prepared = systems::prepare(&opts, &specs, &run_tag, lifecycle.progress(), &access).await;
    let (systems, reference) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            let reason = format!("worker {} could not reach its brokers: {e}", segment.index);
            return Err(lifecycle.abandon_worker(&mut worker, &reason, e).await);
        }
    };
    let infos: Vec<SystemInfo> = systems.iter().map(|s| s.broker.info.clone()).collect();
    let mut run = lifecycle.begin(Begin {
        section: section(&opts, &infos),
        notes: report::notes(&opts, &infos, &fd),
        systems: infos,
        reference: Some(reference),
        data: None,
    })?;
    let endpoint = &systems[0].broker.link.endpoint;
    run.report.extra.insert(
        "client".into(),
        measure::client_capacities(&opts, endpoint, &fd),
    );
    let mut slots = measure::slots(&opts, &systems, &rows, segment);
    for slot in slots.iter().flatten() {
        run.report.upsert_cell(slot.cell());
    }
    run.report.worker = worker.info();
    run.save()?;
    let mut windows = Windows {
        opts: &opts,
        run_tag: &run_tag,
        epoch: Instant::now(),
        payload: measure::payload(&opts).into(),
        next_window: 0,
        baselines: Baselines::default(),
        gate: Gate::new(worker),
    };
    let common = &opts.common;
    run.plan_progress(common, rows.len() * systems.len());
    for (row, round, system) in measure::steps(&rows, systems.len(), common.warmup, common.rounds) {
        if run.interrupted() {
            break;
        }
        let slot = &mut slots[row][system];
        let stop = if slot.is_live() {
            windows
                .round(&rows[row], &systems[system], round, slot, run.progress())
                .await
                .err()
        } else {
            // A cell given up here may be measured on the other workers: meet them anyway,
            // so every worker opens the same windows together.
            windows.gate.arm();
            windows.gate.close().await
        };
        if let Some(e) = stop {
            return workers::stopped(run, &windows.gate.worker, &mut slots, e);
        }
        run.report.worker = windows.gate.worker.info();
        run.record(slots[row][system].cell())?;
    }
    let mut worker = windows.gate.worker;
    // The last meeting: every worker is done with its last window.
    if let Err(e) = worker.sync(0).await {
        return workers::stopped(run, &worker, &mut slots, e);
    }
    run.report.worker = worker.info();
    run.report
        .extra
        .insert("brokers".into(), measure::after_run(&systems));
    run.finish(&MqttReport)
}

/// What was held equal for every system, as the report's section says it (the same on every
/// worker of a run: merge refuses parts of different sections).
fn section(opts: &Opts, infos: &[SystemInfo]) -> String {
    let protocols = opts
        .protocols
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ");
    let workers = opts.common.worker_count;
    let where_ = if workers > 1 {
        format!("{workers} client machines (workers) driving each broker")
    } else if infos
        .iter()
        .any(|s| s.location == common::results::Location::Remote)
    {
        "client here, some brokers on other hosts on one machine".into()
    } else {
        "client and brokers on one machine".into()
    };
    format!(
        "{}-byte payloads, {protocols}, {where_}",
        opts.payload_bytes
    )
}

/// What the machine must allow before anything is sent: source addresses that can be bound
/// here, file descriptors for the largest window (the soft limit is raised to the hard one
/// first) and ephemeral ports for the connections of each source address.
fn plan(
    opts: &Opts,
    rows: &[Row],
    specs: &[TargetSpec],
    segment: Segment,
) -> anyhow::Result<FdLimit> {
    systems::check_source_addrs(&opts.source_addrs)?;
    let fd = os::raise_fd_limit();
    let largest = rows
        .iter()
        .map(|r| u64::from(r.clients(opts, segment)))
        .max()
        .unwrap_or(0);
    // The embedded broker holds the other end of every connection in this same process.
    let ends = if specs.iter().any(|s| s.scheme() == "embedded") {
        2
    } else {
        1
    };
    if largest * ends > fd.connections() {
        bail!(
            "a window of {largest} clients needs {} file descriptors; this process may open {} (hard limit {}; {})",
            largest * ends + os::FD_RESERVE,
            fd.soft,
            fd.hard,
            fd.note.unwrap_or("")
        );
    }
    let sources = opts.source_addrs.len().max(1) as u64;
    let ports = os::ephemeral_ports();
    if largest.div_ceil(sources) > ports {
        bail!(
            "a window of {largest} clients needs {} ephemeral ports per source address, more than the {ports} of ip_local_port_range; spread them with --source-addrs 127.0.0.2,127.0.0.3,… (each local address gives {ports} more)",
            largest.div_ceil(sources)
        );
    }
    Ok(fd)
}

impl common::fork::Forking for Opts {
    fn forking(&self) -> Option<(common::run::Tool, &common::options::CommonOpts)> {
        Some((TOOL, &self.common))
    }
}
