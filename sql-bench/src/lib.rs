//! sql-bench: seed 000's CRUD suite and seeds 003/004's application suite across SQLite,
//! PostgreSQL and MariaDB/MySQL (and MongoDB, Cassandra, CouchDB), every system durability-
//! and index-matched and its answers verified before it is timed.

pub mod durability;
pub mod opts;
pub mod query;
pub mod replication;
pub mod report;
pub mod run;
pub mod session;
pub mod suites;
pub mod systems;
pub mod targets;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use common::run::Summary;
pub use opts::{AppOpts, CrudOpts, Opts, Suite, YcsbOpts};

/// Runs the chosen suite on a runtime of its own; Ctrl-C stops it cleanly.
pub fn run(opts: Opts) -> anyhow::Result<Summary> {
    common::run::block_on("sql-bench", None, move |i| async move {
        run::run(&opts, i).await
    })
}

/// As [`run`], with the interrupt flag supplied by the caller instead of Ctrl-C.
pub fn run_with_interrupt(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    common::run::block_on("sql-bench", Some(interrupt), move |i| async move {
        run::run(&opts, i).await
    })
}
