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

/// What ends `sql-bench --help`, before the `compare` example every tool's help ends with.
pub const EXAMPLES: &str = "Examples:
  sql-bench crud
      the CRUD suite of the skaidb comparison on an embedded SQLite file (WAL, synchronous=FULL)
  sql-bench app --target postgres://fairbench@127.0.0.1:5432/fairbench --target sqlite
      the nine application scenarios of the 10-engine comparison on PostgreSQL and SQLite";

/// What ends `sql-bench crud --help`.
pub const CRUD_EXAMPLES: &str = "Examples:
  sql-bench crud
      write 1c, write Nc, read Nc and mixed Nc on an embedded SQLite file
  sql-bench crud --target postgres://fairbench@127.0.0.1:5432/fairbench --target mysql://fairbench@127.0.0.1:3306/fairbench
      PostgreSQL and MariaDB, durability matched (C0) and read back, interleaved in one round
  sql-bench crud --config C3 --target postgres://fairbench@127.0.0.1:5432/fairbench --replica postgres=127.0.0.1:5433,127.0.0.1:5434
      a replicated configuration, checked against the primary's own replication status";

/// What ends `sql-bench app --help`.
pub const APP_EXAMPLES: &str = "Examples:
  sql-bench app
      the nine application scenarios on an embedded SQLite file, every answer verified
  sql-bench app --rows 250k --target postgres://fairbench@127.0.0.1:5432/fairbench --target sqlite
      PostgreSQL beside SQLite, indexes matched and read back from each engine's catalog";

/// Each run rendered by its suite's report (what `sql-bench report` renders with).
pub const REPORT: common::export::BySuite<'static> = common::export::BySuite(&[
    ("crud", &report::crud::CrudReport),
    ("app", &report::app::AppReport),
    ("ycsb", &report::ycsb::YcsbReport),
]);

/// What the tooling subcommands render with, and `k8s-manifest`'s check of a worker's
/// arguments: the suite's own checks of worker mode, before anything is touched.
pub const TOOLING: common::export::WithWorkerCheck<'static> = common::export::WithWorkerCheck {
    report: &REPORT,
    check: refuse_workers,
};

fn refuse_workers(args: &[String]) -> Result<(), String> {
    common::export::check_worker_args("sql-bench", args, |opts: Opts| run::check(&opts))
}

/// The command line: the suites with their examples, `compare` and `report` beside them.
pub fn command() -> clap::Command {
    let command = common::cli::command_with_tooling::<Opts>();
    common::cli::with_run_examples(command, EXAMPLES)
        .mut_subcommand("crud", |c| c.after_help(CRUD_EXAMPLES))
        .mut_subcommand("app", |c| c.after_help(APP_EXAMPLES))
}

/// Runs the chosen suite on a runtime of its own. Ctrl-C stops it cleanly, or `interrupt` when the caller
/// supplies one.
pub fn run(opts: Opts, interrupt: Option<Arc<AtomicBool>>) -> anyhow::Result<Summary> {
    common::run::block_on("sql-bench", interrupt, move |i| async move {
        run::run(&opts, i).await
    })
}
