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
pub use worker::{Worker, WorkerInfo, options_hash};

use crate::options::CommonOpts;

/// The tools whose runs take `--worker-count` above 1 (the others refuse it, rather than run
/// N full copies that no merge could add up).
pub const WORKER_TOOLS: &[&str] = &["geo-bench"];

/// The worker flags that only make sense together (called by [`CommonOpts::validate`]).
pub fn validate(common: &CommonOpts) -> Result<(), String> {
    let (index, count) = (common.worker_index, common.worker_count);
    if index >= count {
        return Err(format!(
            "--worker-index {index} is not below --worker-count {count} (workers are numbered 0 … {})",
            count.saturating_sub(1)
        ));
    }
    if let Some(id) = &common.run_id
        && (id.is_empty() || id.chars().any(char::is_whitespace))
    {
        return Err(format!("--run-id `{id}` must be one word (no spaces)"));
    }
    if count > 1 {
        if common.run_id.is_none() {
            return Err(format!(
                "--worker-count {count} needs --run-id ID, the same for every worker of the run"
            ));
        }
        match &common.barrier {
            None => {
                return Err(format!(
                    "--worker-count {count} needs --barrier HOST:PORT (worker 0 listens there, the others connect)"
                ));
            }
            Some(address) => barrier::parse_address(address)?,
        };
        if common.output.is_none() {
            return Err(
                "--worker-count above 1 needs --output DIR: each worker writes its own part for `merge`".into(),
            );
        }
    }
    Ok(())
}
