//! The ingest phase: every engine loaded, in rounds interleaved across engines, each into a
//! fresh index (once and untimed when ingest is not a workload, by worker 0 alone). As one of
//! several workers, worker 0 creates each round's index, the round opens at the barrier, each
//! worker sends its `Segment` of the `_bulk` bodies on its share of the senders, and after a
//! second meeting worker 0 counts the index against every worker's acknowledged documents.

use std::sync::Arc;
use std::time::Duration;

use common::deadline::Deadline;
use common::human::format_duration;
use common::phases::window_line;
use common::protocol::{Round, Step, schedule};
use common::results::Status;
use common::scale::BarrierError;
use common::window::WindowOutcome;

use crate::corpus::Bulk;
use crate::state::State;

/// Ingests the corpus: measured rounds when `ingest` is a workload, else once, untimed. Only
/// a barrier failure is an error of the outer result (the run stops).
pub async fn ingest(state: &mut State<'_>) -> Result<anyhow::Result<()>, BarrierError> {
    let opts = state.opts;
    let common = &opts.common;
    let measured = state.plan.measures_ingest();
    let systems = state.systems.len();
    let steps: Vec<Step> = if measured {
        schedule(1, systems, common.warmup, common.rounds).collect()
    } else {
        let once = Round {
            index: 0,
            measured: None,
        };
        (0..systems)
            .map(|system| Step {
                workload: 0,
                round: once,
                system,
            })
            .collect()
    };
    for Step {
        round, system: si, ..
    } in steps
    {
        if state.run.interrupted() {
            return Ok(Ok(()));
        }
        if state.worker.prepares()
            && state.systems[si].broken.is_none()
            && let Err(message) = create(state, si).await
        {
            fail(state, si, measured, round, (Status::Error, message));
        }
        // A measured round opens on every worker or on none (worker 0 may have failed to
        // create the index, another worker's senders may have failed).
        let ready = state.systems[si].broken.is_none();
        let opens = match measured {
            true => {
                let builder = &mut state.slots[0][si].builder;
                crate::scale::window_opens(&mut state.worker, builder, ready).await?
            }
            false => ready,
        };
        if opens {
            let sent = send(state, si, round).await;
            let acknowledged = match measured {
                true => meet_after(state, &sent).await?,
                false => None,
            };
            let sent = sent.and_then(|sent| match past_ceiling(&sent.0, common.ceiling) {
                Some(reason) if !measured => Err((Status::Timeout, reason)),
                _ => Ok(sent),
            });
            match sent {
                Ok((outcome, refresh_ms, server_cpu)) if measured => {
                    let stopped = past_ceiling(&outcome, common.ceiling);
                    let slot = &mut state.slots[0][si];
                    if let Some(reason) = &stopped {
                        slot.builder
                            .mark(Status::Timeout, format!("{}: {reason}", round_name(round)));
                    }
                    slot.record(round, &outcome, server_cpu);
                    if let Some(reason) = stopped {
                        fail(state, si, measured, round, (Status::Timeout, reason));
                    } else {
                        if !round.is_warmup() {
                            slot.refresh_ms.push(refresh_ms);
                        }
                        if let Some((all, possible)) = acknowledged {
                            check_count(state, si, round, all, possible).await;
                        }
                    }
                }
                Ok(_) => {}
                Err(problem) => fail(state, si, measured, round, problem),
            }
        }
        if let Err(e) = state.save() {
            return Ok(Err(e));
        }
    }
    Ok(Ok(()))
}

fn round_name(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}

/// System `si` cannot be loaded (`error`), or its ingest ran past the ceiling (`timeout`):
/// its ingest cell (when measured) and everything after it.
fn fail(
    state: &mut State<'_>,
    si: usize,
    measured: bool,
    round: Round,
    (status, message): (Status, String),
) {
    let label = format!(
        "ingest · {} · {}",
        state.systems[si].name(),
        round_name(round)
    );
    state.run.progress().line(format!("{label}: {message}"));
    if measured {
        state.slots[0][si].builder.mark(status, message.clone());
    }
    state.systems[si].broken = Some((status, message));
}

/// Why an ingest whose requests ran past the ceiling stopped; `None` when none did.
fn past_ceiling(outcome: &WindowOutcome, ceiling: Duration) -> Option<String> {
    let docs = outcome.recorder.counts.timeout;
    (docs > 0).then(|| {
        format!(
            "the ingest stopped at a _bulk request still running at the ceiling (--ceiling {}); {docs} documents in requests past it, {} acknowledged before",
            format_duration(ceiling),
            outcome.recorder.counts.ok
        )
    })
}

/// Creates system `si`'s index afresh and keeps the settings it reads back.
async fn create(state: &mut State<'_>, si: usize) -> Result<(), String> {
    let system = &mut state.systems[si];
    let verified = system
        .target
        .create_index()
        .await
        .map_err(|e| e.to_string())?;
    system.info.verified.extend(verified);
    Ok(())
}

/// What one ingest gave: its outcome, the refresh's milliseconds and the server's CPU time.
type Sent = (WindowOutcome, f64, Option<u64>);

/// One ingest of this worker's share: open its senders, send its bodies, refresh (bounded by
/// --ceiling: it is one request). The outcome's elapsed time includes the refresh; the
/// refresh's own time is returned beside.
async fn send(state: &mut State<'_>, si: usize, round: Round) -> Result<Sent, (Status, String)> {
    let common = &state.opts.common;
    let segment = state.worker.segment;
    let threads = segment.share(state.opts.ingest_threads) as usize;
    let all = &state.material.bulks;
    let bulks: Arc<[Bulk]> = match segment.count {
        1 => all.clone(),
        _ => {
            let range = segment.range(all.len() as u64);
            all[range.start as usize..range.end as usize].into()
        }
    };
    let label = format!(
        "ingest · {} · {}",
        state.systems[si].name(),
        round.label(common.warmup, common.rounds)
    );
    state.run.progress().line(format!("{label}…"));
    let interrupt = state.run.interrupt().clone();
    let system = &mut state.systems[si];
    let workers = system
        .target
        .open_ingest(threads)
        .await
        .map_err(|e| (Status::Error, e.to_string()))?;
    let builder = &state.slots[0][si].builder;
    let server_before = builder.server_cpu_now();
    let mut outcome = workers.run(bulks, common.ceiling, interrupt).await;
    if outcome.recorder.counts.timeout > 0 {
        // The ingest stopped at the ceiling: the engine is not searched, so not refreshed.
        return Ok((outcome, 0.0, None));
    }
    let refreshing = Deadline::after(common.ceiling);
    match refreshing
        .within("the refresh", "--ceiling", system.target.refresh())
        .await
    {
        Ok(refreshed) => refreshed.map_err(|e| (Status::Error, e.to_string()))?,
        Err(past) => return Err((Status::Timeout, past.to_string())),
    }
    let refresh = refreshing.elapsed();
    outcome.elapsed += refresh;
    let server_cpu = state.slots[0][si].builder.server_cpu_since(server_before);
    state
        .run
        .progress()
        .line(window_line(&label, &outcome, "docs/s"));
    Ok((outcome, refresh.as_secs_f64() * 1e3, server_cpu))
}

/// With several workers, every worker meets again after its share and the acknowledged and
/// possibly written documents of all of them come back (to worker 0, which counts); `None`
/// otherwise.
async fn meet_after(
    state: &mut State<'_>,
    sent: &Result<Sent, (Status, String)>,
) -> Result<Option<(u64, u64)>, BarrierError> {
    if !state.worker.is_part() {
        return Ok(None);
    }
    let (acknowledged, possible) = match sent {
        Ok((outcome, _, _)) => {
            let c = outcome.recorder.counts;
            (c.ok, c.error + c.timeout)
        }
        Err(_) => (0, 0),
    };
    // Both figures fit the barrier's pair (--docs is at most u32::MAX).
    let all = state.worker.sync_pair(acknowledged, possible).await?;
    Ok((sent.is_ok() && state.worker.prepares()).then_some(all))
}

/// Worker 0, after every worker's share: the index must hold every acknowledged document, and
/// at most those plus the ones whose request failed.
async fn check_count(state: &mut State<'_>, si: usize, round: Round, all: u64, possible: u64) {
    let system = &mut state.systems[si];
    let counted = match system.target.refresh().await {
        Ok(()) => system.target.count().await,
        Err(e) => Err(e),
    };
    let builder = &mut state.slots[0][si].builder;
    match counted {
        Ok(found) if (all..=all + possible).contains(&found) => {}
        Ok(found) => builder.mark(
            Status::Invalid,
            format!(
                "{}: {found} documents found after {all} acknowledged by the workers (at most {} possible)",
                round_name(round),
                all + possible
            ),
        ),
        Err(e) => builder.mark(
            Status::Error,
            format!(
                "{}: counting the documents failed: {e}",
                round_name(round)
            ),
        ),
    }
}
