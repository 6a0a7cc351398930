//! The measured phases of a run: ingest every engine (rounds interleaved, each into a fresh
//! index), check what each holds, verify every query's answer, then the timed query windows,
//! interleaved in alternating order. Every cell is written the moment it changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::phases::window_line;
use common::procstat::process_cpu_ns;
use common::progress::Progress;
use common::protocol::{CellBuilder, Round, round_order, rounds};
use common::results::{Cell, Report, Status};
use common::window::{WindowOutcome, WindowPlan};
use common::writer::ResultsDir;
use serde_json::json;

use super::{Material, System, Workload};
use crate::Opts;
use crate::answer::{disagreement, overlap};
use crate::queries::{QueryKind, TOP_K};

/// A cell under construction, with the figures common's builder does not keep.
pub(crate) struct Slot {
    builder: CellBuilder,
    server_cpu_ns: u64,
    server_ops: u64,
    client_cpu_ns: u64,
    refresh_ms: Vec<f64>,
    extra: std::collections::BTreeMap<String, serde_json::Value>,
}

impl Slot {
    fn cell(&self) -> Cell {
        let mut cell = self.builder.to_cell();
        if self.server_ops > 0 && self.server_cpu_ns > 0 {
            let per_op = self.server_cpu_ns as f64 / self.server_ops as f64;
            cell.extra
                .insert("server_cpu_ns_per_op".into(), json!(per_op));
            let share =
                self.client_cpu_ns as f64 / (self.client_cpu_ns + self.server_cpu_ns) as f64;
            cell.extra.insert("client_cpu_share".into(), json!(share));
        }
        cell.extra.extend(self.extra.clone());
        if !self.refresh_ms.is_empty() {
            cell.extra
                .insert("refresh_ms_rounds".into(), json!(self.refresh_ms));
        }
        cell
    }
}

pub(crate) struct Run<'a> {
    pub opts: &'a Opts,
    pub workloads: Vec<Workload>,
    pub systems: Vec<System>,
    pub material: Material,
    pub report: Report,
    pub results: ResultsDir,
    pub progress: Progress,
    pub interrupt: Arc<AtomicBool>,
}

impl Run<'_> {
    pub async fn execute(mut self) -> anyhow::Result<Self> {
        let mut slots = self.slots();
        self.save(&slots)?;
        let measured_ingest = self.workloads.contains(&Workload::Ingest);
        self.ingest(&mut slots, measured_ingest).await?;
        if self.interrupted() {
            // A half-loaded index proves nothing about the engine: stop here.
            self.report.notes.push(
                "The run was interrupted (Ctrl-C) during ingest; nothing after it was measured."
                    .into(),
            );
            self.save(&slots)?;
            return Ok(self);
        }
        self.check_counts(&mut slots).await;
        self.verify(&mut slots).await;
        self.save(&slots)?;
        self.open_searchers(&mut slots).await;
        self.measure_queries(&mut slots).await?;
        if self.interrupted() {
            self.report.notes.push(
                "The run was interrupted (Ctrl-C); cells not measured in full say so.".into(),
            );
        }
        self.save(&slots)?;
        Ok(self)
    }

    fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::SeqCst)
    }

    /// One slot per workload × system, in report order.
    fn slots(&self) -> Vec<Vec<Slot>> {
        let common = &self.opts.common;
        self.workloads
            .iter()
            .map(|w| {
                let connections = match w {
                    Workload::Ingest => self.opts.ingest_threads as u32,
                    Workload::Query(_) => common.connections,
                };
                self.systems
                    .iter()
                    .map(|s| Slot {
                        builder: CellBuilder::new(
                            Cell::new(
                                &w.label(self.opts),
                                s.name(),
                                w.unit(),
                                connections,
                                common.rounds,
                            ),
                            common.ceiling,
                        ),
                        server_cpu_ns: 0,
                        server_ops: 0,
                        client_cpu_ns: 0,
                        refresh_ms: Vec::new(),
                        extra: Default::default(),
                    })
                    .collect()
            })
            .collect()
    }

    fn save(&mut self, slots: &[Vec<Slot>]) -> anyhow::Result<()> {
        self.report.systems = self.systems.iter().map(|s| s.info.clone()).collect();
        for slot in slots.iter().flatten() {
            self.report.upsert_cell(slot.cell());
        }
        self.results.write_results(&self.report)?;
        Ok(())
    }

    fn plan(&self) -> WindowPlan {
        WindowPlan {
            duration: self.opts.common.duration,
            ceiling: self.opts.common.ceiling,
            rate_per_s: self.opts.common.rate,
            interrupt: self.interrupt.clone(),
            progress: self.progress.sender(),
        }
    }

    /// Ingests the corpus: measured rounds when `ingest` is a workload, else once, untimed.
    async fn ingest(&mut self, slots: &mut [Vec<Slot>], measured: bool) -> anyhow::Result<()> {
        let common = &self.opts.common;
        let plan: Vec<Round> = if measured {
            rounds(common.warmup, common.rounds).collect()
        } else {
            vec![Round {
                index: 0,
                measured: None,
            }]
        };
        for round in plan {
            for si in round_order(self.systems.len(), round.index) {
                if self.interrupted() {
                    return Ok(());
                }
                if self.systems[si].broken.is_some() {
                    continue;
                }
                let label = format!(
                    "ingest · {} · {}",
                    self.systems[si].name(),
                    round.label(common.warmup, common.rounds)
                );
                self.progress.line(format!("{label}…"));
                match self.ingest_once(si).await {
                    Ok((outcome, refresh_ms, server_cpu)) => {
                        self.progress.line(window_line(&label, &outcome, "docs/s"));
                        if measured {
                            let slot = &mut slots[0][si];
                            record(slot, round, &outcome, server_cpu);
                            if !round.is_warmup() {
                                slot.refresh_ms.push(refresh_ms);
                            }
                        }
                    }
                    Err(message) => {
                        self.progress.line(format!("{label}: {message}"));
                        if measured {
                            slots[0][si].builder.mark(Status::Error, message.clone());
                        }
                        self.systems[si].broken = Some((Status::Error, message));
                    }
                }
                self.save(slots)?;
            }
        }
        Ok(())
    }

    /// One full ingest into a fresh index: create, open the senders, send every body, refresh.
    /// The outcome's elapsed time includes the refresh.
    async fn ingest_once(
        &mut self,
        si: usize,
    ) -> Result<(WindowOutcome, f64, Option<u64>), String> {
        let threads = self.opts.ingest_threads as usize;
        let bulks = self.material.bulks.clone();
        let ceiling = self.opts.common.ceiling;
        let interrupt = self.interrupt.clone();
        let system = &mut self.systems[si];
        let verified = system
            .engine
            .create_index()
            .await
            .map_err(|e| e.to_string())?;
        system.info.verified.extend(verified);
        let workers = system
            .engine
            .open_ingest(threads)
            .await
            .map_err(|e| e.to_string())?;
        let pid = system.description.server_pid;
        let server_before = pid.and_then(process_cpu_ns);
        let mut outcome = workers.run(bulks, ceiling, interrupt).await;
        let refresh_started = Instant::now();
        system.engine.refresh().await.map_err(|e| e.to_string())?;
        let refresh = refresh_started.elapsed();
        outcome.elapsed += refresh;
        let server_cpu = server_before
            .zip(pid.and_then(process_cpu_ns))
            .map(|(before, after)| after.saturating_sub(before));
        Ok((outcome, refresh.as_secs_f64() * 1e3, server_cpu))
    }

    /// Every engine must hold exactly the corpus; one that does not has no trustworthy query.
    async fn check_counts(&mut self, slots: &mut [Vec<Slot>]) {
        let expected = self.material.corpus.docs.len() as u64;
        let measured_ingest = self.workloads.first() == Some(&Workload::Ingest);
        for (si, system) in self.systems.iter_mut().enumerate() {
            if system.broken.is_none() {
                let problem = match system.engine.count().await {
                    Ok(n) if n == expected => None,
                    Ok(n) => Some((
                        Status::Invalid,
                        format!("the index holds {n} of the {expected} documents sent"),
                    )),
                    Err(e) => Some((Status::Error, format!("counting the documents failed: {e}"))),
                };
                if let (Some((status, reason)), true) = (&problem, measured_ingest) {
                    slots[0][si].builder.mark(*status, reason.clone());
                }
                system.broken = problem;
            }
            if let Some((status, reason)) = &system.broken {
                for (wi, workload) in self.workloads.iter().enumerate() {
                    if let Workload::Query(_) = workload {
                        slots[wi][si].builder.mark(
                            *status,
                            format!("{reason}; queries are not timed against a wrong index"),
                        );
                    }
                }
            }
        }
    }

    /// Runs every query on every engine and compares its answer with the truth; the top-10
    /// overlap with the reference engine is recorded beside it.
    async fn verify(&mut self, slots: &mut [Vec<Slot>]) {
        let reference = self.report.reference.clone().unwrap_or_default();
        let mut top_ids: Vec<Vec<Vec<Vec<String>>>> = vec![Vec::new(); self.systems.len()];
        for (si, system) in self.systems.iter_mut().enumerate() {
            if system.broken.is_some() {
                continue;
            }
            self.progress
                .line(format!("{}: verifying every query's answer", system.name()));
            for (ki, set) in self.material.sets.iter().enumerate() {
                let slot = &mut slots[query_row(&self.workloads, set.kind)][si];
                let mut ids = Vec::with_capacity(set.queries.len());
                for (qi, query) in set.queries.iter().enumerate() {
                    let answer = match system.engine.answer(query, &set.bodies[qi]).await {
                        Ok(answer) => answer,
                        Err(e) => {
                            slot.builder
                                .mark(Status::Error, format!("verification: {e}"));
                            break;
                        }
                    };
                    let expected = &self.material.truth[ki][qi];
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
                top_ids[si].push(ids);
            }
        }
        self.record_overlap(slots, &top_ids, &reference);
    }

    /// Each engine's top-10 beside the reference engine's, query by query: the mean share of
    /// hits they have in common. Reported, never required.
    fn record_overlap(
        &self,
        slots: &mut [Vec<Slot>],
        top_ids: &[Vec<Vec<Vec<String>>>],
        reference: &str,
    ) {
        let Some(ri) = self.systems.iter().position(|s| s.name() == reference) else {
            return;
        };
        for (si, system) in self.systems.iter().enumerate() {
            if si == ri {
                continue;
            }
            for (ki, set) in self.material.sets.iter().enumerate() {
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
                let slot = &mut slots[query_row(&self.workloads, set.kind)][si];
                slot.extra.insert(
                    "top10_overlap".into(),
                    json!({"with": reference, "mean": mean, "queries": overlaps.len()}),
                );
                let _ = system;
            }
        }
    }

    /// Opens every healthy engine's search sessions, before any query clock starts.
    async fn open_searchers(&mut self, slots: &mut [Vec<Slot>]) {
        let n = self.opts.common.connections as usize;
        for (si, system) in self.systems.iter_mut().enumerate() {
            if system.broken.is_some() {
                continue;
            }
            match system.engine.open_search(n, &self.material.sets).await {
                Ok(workers) => system.searchers = Some(workers),
                Err(e) => {
                    for (wi, workload) in self.workloads.iter().enumerate() {
                        if let Workload::Query(_) = workload {
                            slots[wi][si]
                                .builder
                                .mark(Status::Error, format!("opening sessions failed: {e}"));
                        }
                    }
                }
            }
        }
    }

    /// The timed query windows: workload by workload, rounds interleaved across engines.
    async fn measure_queries(&mut self, slots: &mut [Vec<Slot>]) -> anyhow::Result<()> {
        let common = &self.opts.common;
        let plan = self.plan();
        for (wi, workload) in self.workloads.clone().into_iter().enumerate() {
            let Workload::Query(kind) = workload else {
                continue;
            };
            for round in rounds(common.warmup, common.rounds) {
                for si in round_order(self.systems.len(), round.index) {
                    if self.interrupted() {
                        return Ok(());
                    }
                    let slot = &mut slots[wi][si];
                    let system = &mut self.systems[si];
                    let Some(workers) = system.searchers.as_mut() else {
                        continue;
                    };
                    if !slot.builder.is_live() {
                        continue;
                    }
                    let label = format!(
                        "{} · {} · {}",
                        kind.key(),
                        system.info.name,
                        round.label(common.warmup, common.rounds)
                    );
                    self.progress.window(label.clone(), common.duration);
                    let pid = system.description.server_pid;
                    let before = pid.and_then(process_cpu_ns);
                    match workers
                        .run_window(common.connections as usize, kind, &plan)
                        .await
                    {
                        Ok(outcome) => {
                            let server = before
                                .zip(pid.and_then(process_cpu_ns))
                                .map(|(b, a)| a.saturating_sub(b));
                            record(slot, round, &outcome, server);
                            self.progress.line(window_line(&label, &outcome, "q/s"));
                        }
                        Err(message) => {
                            slot.builder.mark(Status::Error, message.clone());
                            self.progress.line(format!("{label}: {message}"));
                        }
                    }
                    self.save(slots)?;
                }
            }
        }
        Ok(())
    }
}

/// The row of a query workload among the planned workloads.
fn query_row(workloads: &[Workload], kind: QueryKind) -> usize {
    workloads
        .iter()
        .position(|w| *w == Workload::Query(kind))
        .expect("only planned workloads have query sets")
}

/// Folds one measured (or warm-up) outcome into its slot.
fn record(slot: &mut Slot, round: Round, outcome: &WindowOutcome, server_cpu: Option<u64>) {
    slot.builder.add(round, outcome);
    if round.is_warmup() {
        return;
    }
    if let Some(ns) = server_cpu {
        let counts = outcome.recorder.counts;
        slot.server_cpu_ns += ns;
        slot.server_ops += counts.ok + counts.error;
        slot.client_cpu_ns += outcome.client_cpu_ns;
    }
}
