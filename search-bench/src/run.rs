//! One search-bench run, as its phases: plan (validate every input before touching anything) →
//! connect, describe and check every index → generate the corpus, queries and exact answers →
//! ingest (measured, interleaved) → verify every engine's count and answers → measure the
//! queries (interleaved) → record → render, on common's run lifecycle. As one of several
//! workers, only worker 0 creates the index, verifies and cleans up, each worker sends its
//! share of the load, and every window opens at the barrier.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::options::TargetSpec;
use common::results::Status;
use common::run::{Begin, Lifecycle, Summary, Tool};
use common::scale::BarrierError;

use crate::opts::Opts;
use crate::plan::{self, Material};
use crate::report::{SearchReport, cpu_notes};
use crate::state::State;
use crate::systems::{self, System};
use crate::targets;
use crate::{ingest, measure, scale, verify};

const TOOL: Tool = Tool {
    name: "search-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "search",
};

/// What was held equal for every engine.
const SECTION: &str = "search workloads, one corpus, identical request bodies";

/// Every input checked before anything is touched (what `k8s-manifest` checks too): the plan
/// and the targets.
pub fn check(opts: &Opts) -> anyhow::Result<(plan::Plan, Vec<TargetSpec>)> {
    let plan = plan::plan(opts)?;
    let specs = opts
        .common
        .targets_or(targets::DEFAULT_TARGET)
        .map_err(anyhow::Error::msg)?;
    scale::refuse(opts, &plan, &specs)?;
    Ok((plan, specs))
}

/// Runs the suite. Bad input fails before any engine's data is touched, and leaves no folder.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let (plan, specs) = check(opts)?;
    let (lifecycle, mut worker) =
        Lifecycle::start_joined(TOOL, &opts.common, opts, interrupt).await?;
    let reach = targets::Reach::of(&lifecycle, &opts.common);
    let connected = systems::connect_all(opts, &specs, &reach).await;
    let (systems, reference) = match connected {
        Ok(connected) => connected,
        Err(e) => {
            // The other workers would wait for this one at the barrier: tell them why not.
            let reason = format!("worker {} could not connect: {e:#}", worker.segment.index);
            return Err(lifecycle.abandon_worker(&mut worker, &reason, e).await);
        }
    };
    // Forks share the index the first one loaded and verified, unless the ingest is itself
    // measured (each fork's rounds make their own) or an engine runs inside this process (its
    // index is this process's handle on a folder: each fork makes its own).
    if plan.measures_ingest()
        || systems
            .iter()
            .any(|s| s.info.location == common::results::Location::Embedded)
    {
        worker = worker.in_fork(0, 1);
    }
    lifecycle.progress().line(format!(
        "generating {} documents, {} queries per workload and their exact answers",
        common::human::format_thousands(opts.docs as f64),
        opts.queries
    ));
    let material = Material::generate(opts, &plan);
    let mut notes = systems::notes(opts, &systems);
    notes.extend(scale::notes(&worker));
    let run = lifecycle.begin(Begin {
        section: SECTION.into(),
        systems: systems.iter().map(|s| s.info.clone()).collect(),
        reference: Some(reference),
        data: Some(material.corpus.info.clone()),
        notes,
    })?;
    let mut state = State::new(opts, &plan, &material, systems, run, worker)?;
    phases(&mut state).await?;
    let State {
        mut systems,
        mut run,
        worker,
        ..
    } = state;
    let notes = cpu_notes(&run.report);
    run.report.notes.extend(notes);
    if worker.cleans_up(run.interrupted()) {
        cleanup(opts, &mut systems, &mut run.report.notes).await;
    }
    run.finish(&SearchReport)
}

/// The measured phases on this worker: ingest, verification (worker 0's), the query windows
/// and the closing meeting; a barrier failure stops the run here ([`stopped`]).
async fn phases(state: &mut State<'_>) -> anyhow::Result<()> {
    // A measured ingest is every worker's (each sends its share); the untimed load is
    // worker 0's alone.
    if state.worker.prepares() || state.plan.measures_ingest() {
        match ingest::ingest(state).await {
            Ok(saved) => saved?,
            Err(e) => return stopped(state, e),
        }
    }
    if state.run.interrupted() {
        // A half-loaded index proves nothing about the engine: stop here.
        state.run.report.notes.push(format!(
            "The run was interrupted ({}) during ingest; nothing after it was measured.",
            common::interrupt::cause()
        ));
    } else {
        // Every fork counts the documents of the index it queries; the answers are verified
        // once, by the fork that loaded it.
        if state.worker.leads() {
            verify::counts(state).await;
        }
        if state.worker.prepares() {
            verify::answers(state).await;
        }
        state.save()?;
        measure::open_searchers(state).await;
        match measure::queries(state).await {
            Ok(saved) => saved?,
            Err(e) => return stopped(state, e),
        }
        if state.run.interrupted() {
            state.run.report.notes.push(common::run::interrupted_note());
        }
    }
    // Worker 0 cleans up only once every worker is done with its last window.
    if let Err(e) = state.worker.sync(0).await {
        return stopped(state, e);
    }
    state.save()
}

/// The run stopped at the barrier: every cell not yet measured in full says why, the worker
/// block records the failure, results.json is written, and the error (exit 3) goes back.
/// When a worker was interrupted, the run ends as an interrupted one instead: the cells as
/// last recorded and a note naming the worker (the worker block still says why, so `merge`
/// refuses the part), and the run goes on to its report.
fn stopped(state: &mut State<'_>, error: BarrierError) -> anyhow::Result<()> {
    if let BarrierError::Interrupted { worker, cause, .. } = &error {
        state
            .run
            .interrupt()
            .store(true, std::sync::atomic::Ordering::SeqCst);
        state.run.report.notes.push(format!(
            "The run was interrupted: worker {worker} was interrupted ({cause}) and stopped every worker at the next meeting; cells not measured in full say so."
        ));
        return state.save();
    }
    for slot in state.slots.iter_mut().flatten() {
        slot.builder
            .mark(Status::Error, format!("stopped: {error}"));
    }
    state
        .run
        .report
        .notes
        .push(format!("The run stopped at the start barrier: {error}."));
    if let Err(e) = state.save() {
        return Err(e.context(error.to_string()));
    }
    Err(error.into())
}

/// Drops search-bench's indexes, unless asked to keep them.
async fn cleanup(opts: &Opts, systems: &mut [System], notes: &mut Vec<String>) {
    if opts.keep_index {
        return;
    }
    for system in systems {
        if let Err(e) = system.target.drop_index().await {
            notes.push(format!("cleaning up failed: {e}"));
        }
    }
}

impl common::fork::Forking for Opts {
    fn forking(&self) -> Option<(common::run::Tool, &common::options::CommonOpts)> {
        Some((TOOL, &self.common))
    }
}
