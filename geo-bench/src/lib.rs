//! geo-bench: durable geo-event insert throughput across request batch sizes, and id, radius
//! and polygon queries checked against an exact geodesic oracle, on SQLite R*Tree, PostGIS and
//! Redis/Valkey (seed 002), every durability setting read back from the system itself.

pub mod events;
pub mod measure;
pub mod opts;
pub mod oracle;
pub mod plan;
pub mod queries;
pub mod report;
pub mod resp;
pub mod run;
pub mod session;
pub mod systems;
pub mod targets;
pub mod workloads;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use common::run::Summary;
pub use opts::{Family, Opts};

/// Runs geo-bench on a runtime of its own; Ctrl-C stops it cleanly.
pub fn run(opts: Opts) -> anyhow::Result<Summary> {
    common::run::block_on("geo-bench", None, move |i| async move {
        run::run(&opts, i).await
    })
}

/// As [`run`], with the interrupt flag supplied by the caller instead of Ctrl-C.
pub fn run_with_interrupt(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    common::run::block_on("geo-bench", Some(interrupt), move |i| async move {
        run::run(&opts, i).await
    })
}
