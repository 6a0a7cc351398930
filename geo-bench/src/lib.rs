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

/// What ends `geo-bench --help`, before the `compare` example every tool's help ends with.
pub const EXAMPLES: &str = "Examples:
  geo-bench
      the ArcherDB batch-size curve and the query table on an embedded SQLite R*Tree
  geo-bench --target sqlite --target postgres://fairbench@127.0.0.1:5432/geo --workloads insert
      the insert curve on SQLite and PostGIS, interleaved in one measurement round";

/// Runs geo-bench on a runtime of its own. Ctrl-C stops it cleanly, or `interrupt` when the caller
/// supplies one.
pub fn run(opts: Opts, interrupt: Option<Arc<AtomicBool>>) -> anyhow::Result<Summary> {
    common::run::block_on("geo-bench", interrupt, move |i| async move {
        run::run(&opts, i).await
    })
}
