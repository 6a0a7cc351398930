//! Scale-out: several client machines (workers) drive one target as one run. One
//! [`Segment`] splits every quantity the same way, a start barrier opens every measured
//! window on all workers at once ([`barrier`]), each worker writes its usual results folder
//! with a [`WorkerInfo`] block, and [`merge`] makes one run of them (HDR histograms added
//! exactly, throughput summed per round before the median). Kubernetes runs the workers as an
//! Indexed Job ([`manifest`]); there is no coordinator of our own.

pub mod barrier;
pub mod manifest;
pub mod merge;
mod segment;
mod worker;

pub use barrier::{BARRIER_EXIT, Barrier, BarrierError, BarrierRecord, Hello};
pub use segment::Segment;
pub use worker::{PER_WORKER_OPTIONS, Worker, options_hash};
// The blocks results.json carries are defined with it: `crate::results::{WorkerInfo, WorkerPart, WorkerCell}`.

/// The tools (every suite of one: `geo-bench`) or suites of a tool (`sql-bench crud`) whose
/// runs take `--worker-count` above 1; the others refuse it, rather than run N full copies
/// that no merge could add up.
pub const WORKER_TOOLS: &[&str] = &[
    "geo-bench",
    "sql-bench crud",
    "sql-bench ycsb",
    "vector-bench",
    "mqtt-bench",
    "search-bench",
];

/// Whether `tool`'s suite `suite` runs as several workers ([`WORKER_TOOLS`]).
pub fn runs_as_workers(tool: &str, suite: &str) -> bool {
    WORKER_TOOLS
        .iter()
        .any(|entry| match entry.split_once(' ') {
            Some((t, s)) => t == tool && s == suite,
            None => *entry == tool,
        })
}
