//! Before any query is timed: every engine must hold exactly the corpus, and every query's
//! answer must match the exact one computed from the corpus (total hits, aggregation buckets).
//! A wrong answer marks its cell invalid with the query that showed it; the top-10 overlap with
//! the reference engine is recorded beside, never required.

use common::results::Status;
use serde_json::json;

use crate::answer::{disagreement, overlap};
use crate::queries::TOP_K;
use crate::state::State;
use crate::workloads::Workload;

/// Checks what each engine holds; one that does not hold the corpus has no trustworthy query.
pub async fn counts(state: &mut State<'_>) {
    let expected = state.material.corpus.docs.len() as u64;
    let measured_ingest = state.plan.workloads.first() == Some(&Workload::Ingest);
    for si in 0..state.systems.len() {
        let system = &mut state.systems[si];
        if system.broken.is_none() {
            let problem = match system.target.count().await {
                Ok(n) if n == expected => None,
                Ok(n) => Some((
                    Status::Invalid,
                    format!("the index holds {n} of the {expected} documents sent"),
                )),
                Err(e) => Some((Status::Error, format!("counting the documents failed: {e}"))),
            };
            if let (Some((status, reason)), true) = (&problem, measured_ingest) {
                state.slots[0][si].builder.mark(*status, reason.clone());
            }
            system.broken = problem;
        }
        if let Some((status, reason)) = state.systems[si].broken.clone() {
            let reason = format!("{reason}; queries are not timed against a wrong index");
            state.mark_queries(si, status, &reason);
        }
    }
}

/// Runs every query on every engine and compares its answer with the truth; the top-10
/// overlap with the reference engine is recorded beside it.
pub async fn answers(state: &mut State<'_>) {
    let mut top_ids: Vec<Vec<Vec<Vec<String>>>> = vec![Vec::new(); state.systems.len()];
    for (si, ids) in top_ids.iter_mut().enumerate() {
        if state.systems[si].broken.is_some() {
            continue;
        }
        let line = format!(
            "{}: verifying every query's answer",
            state.systems[si].name()
        );
        state.run.progress().line(line);
        for ki in 0..state.material.sets.len() {
            ids.push(answers_of_set(state, si, ki).await);
        }
    }
    record_overlap(state, &top_ids);
}

/// Checks the answers of system `si` to set `ki`, up to the first wrong one; returns the top
/// hits of every answer checked.
async fn answers_of_set(state: &mut State<'_>, si: usize, ki: usize) -> Vec<Vec<String>> {
    let set = &state.material.sets[ki];
    let slot = &mut state.slots[state.plan.query_row(set.kind)][si];
    let system = &mut state.systems[si];
    let mut ids = Vec::with_capacity(set.queries.len());
    for (qi, query) in set.queries.iter().enumerate() {
        let answer = match system.target.answer(query, &set.bodies[qi]).await {
            Ok(answer) => answer,
            Err(e) => {
                slot.builder
                    .mark(Status::Error, format!("verification: {e}"));
                break;
            }
        };
        let expected = &state.material.truth[ki][qi];
        let size = if set.kind.ranked() { TOP_K } else { 0 };
        if let Some(why) = disagreement(expected, &answer, size) {
            slot.builder.mark(
                Status::Invalid,
                format!(
                    "query {qi} {}: {why}",
                    String::from_utf8_lossy(&set.bodies[qi])
                ),
            );
            break;
        }
        ids.push(answer.top_ids);
    }
    slot.extra
        .insert("queries_verified".into(), json!(ids.len()));
    ids
}

/// Each engine's top-10 beside the reference engine's, query by query: the mean share of
/// hits they have in common. Reported, never required.
fn record_overlap(state: &mut State<'_>, top_ids: &[Vec<Vec<Vec<String>>>]) {
    let reference = state.run.report.reference.clone().unwrap_or_default();
    let Some(ri) = state.systems.iter().position(|s| s.name() == reference) else {
        return;
    };
    for si in (0..state.systems.len()).filter(|si| *si != ri) {
        for (ki, set) in state.material.sets.iter().enumerate() {
            if !set.kind.ranked() {
                continue;
            }
            let (Some(mine), Some(theirs)) = (top_ids[si].get(ki), top_ids[ri].get(ki)) else {
                continue;
            };
            let overlaps: Vec<f64> = mine
                .iter()
                .zip(theirs)
                .filter_map(|(a, b)| overlap(a, b))
                .collect();
            if overlaps.is_empty() {
                continue;
            }
            let mean = overlaps.iter().sum::<f64>() / overlaps.len() as f64;
            let slot = &mut state.slots[state.plan.query_row(set.kind)][si];
            slot.extra.insert(
                "top10_overlap".into(),
                json!({"with": reference, "mean": mean, "queries": overlaps.len()}),
            );
        }
    }
}
