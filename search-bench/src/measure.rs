//! The timed query phase (ingest is [`crate::ingest`]): open the search sessions and run the
//! query windows, interleaved in alternating order, each opened at the start barrier when the
//! run has several workers, with the server's CPU read around each one. Every cell is written
//! the moment it changes.

use common::phases::window_line;
use common::protocol::schedule;
use common::results::Status;
use common::scale::BarrierError;

use crate::state::State;
use crate::workloads::Workload;

/// This worker's share of the query connections (all of them without workers).
fn connections(state: &State<'_>) -> usize {
    let total = u64::from(state.opts.common.connections);
    state.worker.segment.share(total) as usize
}

/// Opens every healthy engine's search sessions (this worker's share), before any query
/// clock starts.
pub async fn open_searchers(state: &mut State<'_>) {
    let n = connections(state);
    for si in 0..state.systems.len() {
        let system = &mut state.systems[si];
        if system.broken.is_some() {
            continue;
        }
        match system.target.open_search(n, &state.material.sets).await {
            Ok(workers) => system.searchers = Some(workers),
            Err(e) => {
                let reason = format!("opening sessions failed: {e}");
                state.mark_queries(si, Status::Error, &reason);
            }
        }
    }
}

/// The timed query windows: workload by workload, rounds interleaved across engines. With
/// several workers each window opens at the barrier, on every worker or on none; only a
/// barrier failure is an error here (the run stops).
pub async fn queries(state: &mut State<'_>) -> Result<anyhow::Result<()>, BarrierError> {
    let opts = state.opts;
    let common = &opts.common;
    let plan = state.window_plan();
    let n = connections(state);
    let rows: Vec<(usize, crate::queries::QueryKind)> = state
        .plan
        .workloads
        .iter()
        .enumerate()
        .filter_map(|(wi, w)| match w {
            Workload::Query(kind) => Some((wi, *kind)),
            Workload::Ingest => None,
        })
        .collect();
    state
        .run
        .plan_progress(common, rows.len() * state.systems.len());
    let steps = schedule(
        rows.len(),
        state.systems.len(),
        common.warmup,
        common.rounds,
    );
    for step in steps {
        if state.run.interrupted() {
            return Ok(Ok(()));
        }
        let (wi, kind) = rows[step.workload];
        let si = step.system;
        let slot = &mut state.slots[wi][si];
        let system = &mut state.systems[si];
        let ready = system.searchers.is_some();
        if !crate::scale::window_opens(&mut state.worker, &mut slot.builder, ready).await? {
            continue;
        }
        let Some(workers) = system.searchers.as_mut() else {
            continue;
        };
        let label = format!(
            "{} · {} · {}",
            kind.key(),
            system.info.name,
            step.round.label(common.warmup, common.rounds)
        );
        let progress = state.run.progress();
        progress.window(label.clone(), common.duration);
        let before = slot.builder.server_cpu_now();
        let order = crate::scale::order_of(&state.orders, kind);
        let window = workers.run_window(n, kind, &plan, order).await;
        let server_cpu = slot.builder.server_cpu_since(before);
        match window {
            Ok(outcome) => {
                slot.record(step.round, &outcome, server_cpu);
                progress.line(window_line(&label, &outcome, "q/s"));
            }
            Err(message) => {
                slot.builder.mark(Status::Error, message.clone());
                progress.line(format!("{label}: {message}"));
            }
        }
        if let Err(e) = state.save() {
            return Ok(Err(e));
        }
    }
    Ok(Ok(()))
}
