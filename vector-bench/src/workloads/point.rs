//! One point of one curve on one system, as a cell: per round, a pass over every query at
//! concurrency 1 (latency, and the answers scored against ground truth) and a QPS window at
//! --connections; warm-up rounds discarded, rounds pooled. The exact scan's points are built
//! the same way, without an ef.

use std::time::Duration;

use common::data::Checksum;
use common::human::format_duration;
use common::protocol::{CellBuilder, Round};
use common::recorder::{encode_histogram, percentiles};
use common::results::{Cell, Status};
use common::servercpu::ServerProcess;
use hdrhistogram::Histogram;
use serde_json::json;

use crate::dataset::Dataset;
use crate::index::Variant;
use crate::recall::{self, Score};
use crate::session::Pass;
use crate::truth::Truth;

use super::{Family, FilterMode, exact_workload};

/// What one point measures: its cell's name and the figures that place it on a curve.
#[derive(Debug, Clone, PartialEq)]
pub struct PointKey {
    pub workload: String,
    pub family: String,
    pub variant: Variant,
    pub filter: FilterMode,
    pub k: usize,
    /// `None` for the exact scan, which has no search breadth.
    pub ef: Option<u64>,
}

impl PointKey {
    pub fn of(family: Family, ef: u64) -> PointKey {
        PointKey {
            workload: family.workload(ef),
            family: family.label(),
            variant: family.variant,
            filter: family.filter,
            k: family.k,
            ef: Some(ef),
        }
    }

    /// The exact scan of a query family's rows (full-precision vectors).
    pub fn exact(filter: FilterMode, k: usize) -> PointKey {
        let workload = exact_workload(filter, k);
        PointKey {
            family: workload.clone(),
            workload,
            variant: Variant::F32,
            filter,
            k,
            ef: None,
        }
    }
}

/// Accumulates the rounds of one point into its cell.
#[derive(Debug)]
pub struct PointBuilder {
    cell: CellBuilder,
    key: PointKey,
    /// Latency at concurrency 1, pooled over measured passes.
    c1: Option<Histogram<u64>>,
    score: Score,
    recall_rounds: Vec<f64>,
    harness_ns_per_query: Vec<f64>,
    ef_reported: Option<String>,
    /// A digest of every answer of the last scored pass: equal digests at two ef points mean
    /// the system answered exactly the same.
    answers_digest: Option<String>,
    ceiling: Duration,
}

impl PointBuilder {
    pub fn new(
        key: PointKey,
        system: &str,
        connections: u32,
        rounds: u32,
        ceiling: Duration,
    ) -> PointBuilder {
        let cell = Cell::new(&key.workload, system, "queries/s", connections, rounds);
        PointBuilder {
            cell: CellBuilder::new(cell, ceiling),
            key,
            c1: None,
            score: Score::default(),
            recall_rounds: Vec::new(),
            harness_ns_per_query: Vec::new(),
            ef_reported: None,
            answers_digest: None,
            ceiling,
        }
    }

    pub fn is_live(&self) -> bool {
        self.cell.is_live()
    }

    pub fn status(&self) -> Status {
        self.cell.status()
    }

    /// Why the cell is not ok, as it stands.
    pub fn reason(&self) -> String {
        self.to_cell().reason.unwrap_or_default()
    }

    pub fn mark(&mut self, status: Status, reason: impl Into<String>) {
        self.cell.mark(status, reason);
    }

    pub fn key(&self) -> &PointKey {
        &self.key
    }

    pub fn answers_digest(&self) -> Option<&str> {
        self.answers_digest.as_deref()
    }

    /// The recall over every measured pass so far.
    pub fn recall(&self) -> Option<f64> {
        self.score.recall()
    }

    /// Records the search breadth the system reports after it was set; a system that does not
    /// run at the asked-for ef is not measuring this point.
    pub fn ef_reported(&mut self, reported: String) {
        if let Some(ef) = self.key.ef
            && reported != ef.to_string()
        {
            self.cell.mark(
                Status::Invalid,
                format!("asked for ef {ef}, the system reports {reported}"),
            );
        }
        self.ef_reported = Some(reported);
    }

    /// Folds in one pass: its failures always, its latency and score only when measured. A
    /// pass that ended at a search past the ceiling makes the cell `timeout`, and adds nothing
    /// else: the rounds before it are what the cell holds.
    pub fn add_pass(&mut self, round: Round, pass: &Pass, data: &Dataset, truth: &Truth) {
        let rec = &pass.recorder;
        let label = round_label(round);
        if let Some(query) = pass.timed_out_at {
            self.cell.mark(
                Status::Timeout,
                format!(
                    "{label}: latency pass: the search of query {query} was still running at the ceiling (--ceiling {}): a timeout, and the pass ended there",
                    format_duration(self.ceiling)
                ),
            );
            return;
        }
        if let Some(fatal) = &rec.fatal {
            self.cell
                .mark(Status::Error, format!("{label}: latency pass: {fatal}"));
        } else if rec.counts.error > 0 {
            self.cell.mark(
                Status::Error,
                format!(
                    "{label}: {} of {} searches failed; first: {}",
                    rec.counts.error,
                    data.query_count(),
                    rec.first_error.as_deref().unwrap_or("unknown error")
                ),
            );
        }
        let mut score = Score::default();
        let mut digest = Checksum::default();
        for (q, answer) in pass.answers.iter().enumerate() {
            score.add(&recall::score(
                data,
                truth,
                q,
                self.key.filter.category(),
                answer,
            ));
            digest.update(&(answer.len() as u64).to_le_bytes());
            answer
                .iter()
                .for_each(|id| digest.update(&id.to_le_bytes()));
        }
        self.answers_digest = Some(digest.hex());
        if let Some(defect) = score.defect() {
            self.cell
                .mark(Status::Invalid, format!("{label}: wrong answers: {defect}"));
        }
        if round.is_warmup() {
            return;
        }
        match &mut self.c1 {
            Some(h) => h
                .add(&rec.latency)
                .expect("histograms of equal precision merge"),
            None => self.c1 = Some(rec.latency.clone()),
        }
        if let Some(r) = score.recall() {
            self.recall_rounds.push(r);
        }
        self.score.add(&score);
        let queries = pass.answers.len().max(1) as f64;
        self.harness_ns_per_query
            .push(pass.wall_ns.saturating_sub(pass.call_ns) as f64 / queries);
    }

    /// Says where the system's server runs, so its CPU is read beside the client's.
    pub fn server(&mut self, server: &ServerProcess) {
        self.cell.server(server);
    }

    /// The server's CPU time now, taken as a QPS window opens.
    pub fn server_cpu_now(&self) -> Option<u64> {
        self.cell.server_cpu_now()
    }

    /// The server's CPU time since `before`, taken as the QPS window closes.
    pub fn server_cpu_since(&self, before: Option<u64>) -> Option<u64> {
        self.cell.server_cpu_since(before)
    }

    /// Folds in one QPS window and the server's CPU over it.
    pub fn add_window(
        &mut self,
        round: Round,
        outcome: &common::window::WindowOutcome,
        server_cpu_ns: Option<u64>,
    ) {
        self.cell.add(round, outcome);
        self.cell.add_server_cpu(round, server_cpu_ns);
    }

    /// The cell as it stands: throughput is QPS at --connections; `latency_ns` is at
    /// concurrency 1 (the window's own latency moves to `extra.latency_at_connections_ns`).
    pub fn to_cell(&self) -> Cell {
        let mut cell = self.cell.to_cell();
        let at_connections = cell.latency_ns.take();
        let window_histogram = cell.histogram_b64.take();
        cell.latency_ns = self.c1.as_ref().and_then(percentiles);
        cell.histogram_b64 = self.c1.as_ref().map(encode_histogram);
        let extra = &mut cell.extra;
        let key = &self.key;
        extra.insert("variant".into(), json!(key.variant));
        extra.insert("filter".into(), json!(key.filter));
        extra.insert("family".into(), json!(key.family));
        extra.insert("ef".into(), json!(key.ef));
        extra.insert("k".into(), json!(key.k));
        extra.insert("recall".into(), json!(self.score.recall()));
        extra.insert("recall_rounds".into(), json!(self.recall_rounds));
        extra.insert("score".into(), json!(self.score));
        extra.insert("latency_concurrency".into(), json!(1));
        extra.insert("latency_at_connections_ns".into(), json!(at_connections));
        extra.insert(
            "latency_at_connections_histogram_b64".into(),
            json!(window_histogram),
        );
        extra.insert(
            "harness_ns_per_query".into(),
            json!(median(&self.harness_ns_per_query)),
        );
        extra.insert("ef_reported".into(), json!(self.ef_reported));
        extra.insert("answers_digest".into(), json!(self.answers_digest));
        cell
    }
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| sorted[sorted.len() / 2])
}

pub fn round_label(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}
