//! The cells of a ycsb run: one for each system's load and one per workload × system, each a
//! common [`CellBuilder`] plus what the suite adds under `extra`: per-operation counts,
//! shares, throughput and latency (with its HDR histogram), how the engine answered, and what
//! the key chooser asked for.

use std::collections::BTreeMap;

use common::protocol::{CellBuilder, Round};
use common::recorder::{encode_histogram, percentiles};
use common::results::Cell;
use serde_json::{Value, json};

use super::workload::Workload;
use crate::session::ycsb::YcsbWindow;
use crate::session::ycsb::op::Request;
use crate::session::ycsb::stats::{Kind, OpStats};

/// The name of each system's load cell.
pub const LOAD: &str = "load";

/// One workload × system: the shared figures and the per-operation ones.
#[derive(Debug, Clone)]
pub struct YcsbCell {
    pub builder: CellBuilder,
    workload: Option<Workload>,
    /// Pooled over the measured rounds.
    stats: OpStats,
    measured_ns: u128,
    answered_by: BTreeMap<Kind, String>,
    /// What the cell adds under `extra` beyond the operations (workload, counts verified…).
    pub facts: serde_json::Map<String, Value>,
    /// The share of requests the distribution gives its most frequent key.
    pub expected_hottest_share: Option<f64>,
}

impl YcsbCell {
    pub fn new(builder: CellBuilder, workload: Option<&Workload>) -> YcsbCell {
        let mut facts = serde_json::Map::new();
        if let Some(w) = workload {
            facts.insert("workload".into(), describe(w));
        }
        YcsbCell {
            builder,
            workload: workload.cloned(),
            stats: OpStats::default(),
            measured_ns: 0,
            answered_by: BTreeMap::new(),
            facts,
            expected_hottest_share: None,
        }
    }

    pub fn answered_by(&mut self, kind: Kind, how: String) {
        self.answered_by.insert(kind, how);
    }

    /// Folds one window in (warm-ups only count their failures, as the builder does).
    pub fn add(&mut self, round: Round, window: &YcsbWindow) {
        self.builder.add(round, &window.outcome);
        if round.is_warmup() {
            return;
        }
        self.stats.merge(&window.stats);
        self.measured_ns += window.outcome.elapsed.as_nanos();
    }

    /// The cell as it stands, with the per-operation figures under `extra`.
    pub fn to_cell(&self) -> Cell {
        let mut cell = self.builder.to_cell();
        let mut extra: BTreeMap<String, Value> = self.facts.clone().into_iter().collect();
        if let Some(workload) = &self.workload {
            extra.insert("operations".into(), self.operations(workload));
            extra.insert("keys".into(), self.keys(workload));
        }
        cell.extra = extra;
        cell
    }

    fn operations(&self, workload: &Workload) -> Value {
        let total = self.stats.total().max(1) as f64;
        let seconds = self.measured_ns as f64 / 1e9;
        let mut operations = serde_json::Map::new();
        for kind in workload.kinds() {
            let stats = self.stats.kind(kind);
            let mut op = json!({
                "proportion": workload.proportion(kind),
                "share": (stats.ok + stats.error) as f64 / total,
                "ok": stats.ok,
                "error": stats.error,
                "throughput_per_s": if seconds > 0.0 { stats.ok as f64 / seconds } else { 0.0 },
            });
            if let Some(h) = stats.latency.as_ref() {
                op["latency_ns"] = json!(percentiles(h));
                op["histogram_b64"] = json!(encode_histogram(h));
            }
            if stats.raced_delete > 0 {
                op["raced_delete"] = json!(stats.raced_delete);
            }
            if let Some(e) = &stats.first_error {
                op["first_error"] = json!(e);
            }
            if let Some(how) = self.answered_by.get(&kind) {
                op["answered_by"] = json!(how);
            }
            operations.insert(kind.word().into(), op);
        }
        Value::Object(operations)
    }

    fn keys(&self, workload: &Workload) -> Value {
        let keys = self.stats.keys;
        let share = |n: u64| {
            if keys.chosen > 0 {
                n as f64 / keys.chosen as f64
            } else {
                0.0
            }
        };
        let mut out = json!({
            "distribution": workload.request.word(),
            "chosen": keys.chosen,
            "newest_share": share(keys.newest),
            "inserted_by_run_share": share(keys.inserted_by_run),
        });
        if workload.request == Request::Zipfian {
            out["hottest_share"] = json!(share(keys.hottest));
            if let Some(expected) = self.expected_hottest_share {
                out["expected_hottest_share"] = json!(expected);
            }
        }
        out
    }
}

/// A workload's definition, as the cell records it.
fn describe(w: &Workload) -> Value {
    let mut out = json!({
        "name": w.name,
        "source": w.source,
        "description": w.description,
        "distribution": w.distribution(),
        "fields": w.shape.fields,
        "field_length": w.shape.field_length,
    });
    if w.proportion(Kind::Scan) > 0.0 {
        out["scan_length"] = json!({
            "min": w.scan.min,
            "max": w.scan.max,
            "distribution": if w.scan.zipfian { "zipfian" } else { "uniform" },
        });
    }
    out
}
