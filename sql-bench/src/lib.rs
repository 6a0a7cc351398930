//! sql-bench: seed 000's CRUD suite and seeds 003/004's application suite across SQLite,
//! PostgreSQL and MariaDB/MySQL, every system durability- and index-matched and its answers
//! verified before it is timed.

pub mod durability;
pub mod query;
pub mod replication;
pub mod suites;
pub mod targets;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::{Parser, Subcommand};
use common::results::Report;
use serde::Serialize;

use crate::suites::app::AppOpts;
use crate::suites::crud::CrudOpts;

#[derive(Parser, Serialize, Debug, Clone)]
#[command(name = "sql-bench", version, about, propagate_version = true)]
pub struct Opts {
    #[command(subcommand)]
    pub suite: Suite,
}

#[derive(Subcommand, Serialize, Debug, Clone)]
#[serde(rename_all = "kebab-case")]
pub enum Suite {
    /// Seed 000's CRUD workloads: write 1c, write/read/mixed at --connections (ops/s, p50/p99).
    Crud(CrudOpts),
    /// Seeds 003/004's nine application-shaped scenarios through one data layer, every engine
    /// index-matched and its answers verified (median/p95 per scenario, won/lost/placement).
    App(AppOpts),
}

/// What a finished run leaves: the report (also written to `results_dir`) and the exit code
/// (0: every cell ok; 1: the run finished but some cell is not).
#[derive(Debug)]
pub struct Summary {
    pub report: Report,
    pub results_dir: PathBuf,
    pub exit_code: u8,
}

/// Runs the chosen suite on a runtime of its own; Ctrl-C stops it cleanly.
pub fn run(opts: Opts) -> anyhow::Result<Summary> {
    runtime()?.block_on(async {
        let interrupt = common::interrupt::install();
        run_suite(&opts, interrupt).await
    })
}

/// As [`run`], with the interrupt flag supplied by the caller instead of Ctrl-C.
pub fn run_with_interrupt(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    runtime()?.block_on(run_suite(&opts, interrupt))
}

async fn run_suite(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    match &opts.suite {
        Suite::Crud(crud) => suites::crud::run(crud, interrupt).await,
        Suite::App(app) => suites::app::run(app, interrupt).await,
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sql-bench")
        .build()?)
}
