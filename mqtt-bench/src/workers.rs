//! mqtt-bench as one of several workers of a run (`--worker-count`): which scenarios split
//! (connection storms by clients and connect rate, many-to-many by publishers, subscribers,
//! topics and rate; a topic's publisher and subscribers stay on one worker), what is refused
//! before anything is sent, and the run stopped at the barrier with every cell saying why.

use anyhow::bail;
use common::options::TargetSpec;
use common::results::Status;
use common::run::Recording;
use common::scale::{BarrierError, Segment, Worker};

use crate::measure::Slot;
use crate::opts::{Opts, Scenario};

/// The scenarios whose every quantity splits across workers.
pub const SPLIT: [Scenario; 3] = [Scenario::Connect, Scenario::Idle, Scenario::ManyToMany];

/// Refuses what worker mode cannot split: a scenario of one topic, a broker inside this
/// process, a broker process whose CPU and memory serve every worker, or a quantity smaller
/// than the number of workers (each needs at least one).
pub fn check(opts: &Opts, specs: &[TargetSpec], segment: Segment) -> anyhow::Result<()> {
    let n = segment.count;
    if n == 1 {
        return Ok(());
    }
    if let Some(s) = opts.chosen().into_iter().find(|s| !SPLIT.contains(s)) {
        bail!(
            "--worker-count {n}: the {s} scenario has one topic, whose publisher and subscribers stay on one worker, so it cannot be shared; worker mode runs --scenarios connect,idle,many-to-many"
        );
    }
    if specs.iter().any(|s| s.scheme() == "embedded") {
        bail!(
            "--worker-count {n} drives one broker from several machines: name it with --broker URL (an embedded broker would be one per worker)"
        );
    }
    if !opts.broker_pids.is_empty() {
        bail!(
            "--worker-count {n}: --broker-pid cannot be used, the broker's CPU and memory serve every worker's clients and no worker can divide them by its own"
        );
    }
    let chosen = opts.chosen();
    let mut shared = Vec::new();
    if chosen.contains(&Scenario::Connect) || chosen.contains(&Scenario::Idle) {
        shared.push((opts.clients, "--clients"));
    }
    if chosen.contains(&Scenario::ManyToMany) {
        let m2m = opts.many_to_many;
        shared.extend([
            (m2m.publishers as u64, "publishers of --many-to-many"),
            (m2m.subscribers as u64, "subscribers of --many-to-many"),
            (opts.topics as u64, "--topics"),
        ]);
    }
    if let Some((total, what)) = shared.into_iter().find(|(t, _)| *t < u64::from(n)) {
        bail!(
            "{total} {what} cannot be shared by {n} workers (each needs at least one); use fewer workers or more"
        );
    }
    Ok(())
}

/// The run stopped at the barrier: every cell not yet measured in full says why, the worker
/// block records the failure, results.json is written, and the error (exit 3) goes back.
pub fn stopped(
    mut run: Recording,
    worker: &Worker,
    slots: &mut [Vec<Slot>],
    error: BarrierError,
) -> anyhow::Error {
    for slot in slots.iter_mut().flatten() {
        slot.mark(Status::Error, format!("stopped: {error}"));
        run.report.upsert_cell(slot.cell());
    }
    run.report.worker = worker.info();
    run.report
        .notes
        .push(format!("The run stopped at the start barrier: {error}."));
    if let Err(e) = run.save() {
        return anyhow::Error::from(e).context(error.to_string());
    }
    error.into()
}
