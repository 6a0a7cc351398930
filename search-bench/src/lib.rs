//! search-bench: seed 000's search workloads (`_bulk` ingest, match, match_phrase, bool, terms
//! aggregation) on an embedded tantivy index and on any Elasticsearch-API server, every answer
//! verified against the exact truth before anything is timed.

pub mod answer;
pub mod corpus;
pub mod ingest;
pub mod measure;
pub mod opts;
pub mod plan;
pub mod queries;
pub mod report;
pub mod run;
pub mod scale;
pub mod session;
pub mod state;
pub mod systems;
pub mod targets;
pub mod truth;
pub mod verify;
pub mod workloads;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use common::run::Summary;
pub use opts::Opts;

/// What ends `search-bench --help`, before the `compare` example every tool's help ends with.
pub const EXAMPLES: &str = "Examples:
  search-bench
      bulk ingest, match, match_phrase, bool and terms aggregation on an embedded tantivy index
  search-bench --target http://127.0.0.1:9200 --target tantivy --docs 100k
      an Elasticsearch-API server beside tantivy, every answer verified, in one round";

/// What the tooling subcommands render with, and `k8s-manifest`'s check of a worker's
/// arguments: the run's own checks of worker mode, before anything is touched.
pub const TOOLING: common::export::WithWorkerCheck<'static> = common::export::WithWorkerCheck {
    report: &report::SearchReport,
    check: refuse_workers,
};

fn refuse_workers(args: &[String]) -> Result<(), String> {
    common::export::check_worker_args("search-bench", args, |opts: Opts| run::check(&opts))
}

/// Runs the suite on a runtime of its own. Ctrl-C stops it cleanly, or `interrupt` when the caller
/// supplies one.
pub fn run(opts: Opts, interrupt: Option<Arc<AtomicBool>>) -> anyhow::Result<Summary> {
    common::run::block_on("search-bench", interrupt, move |i| async move {
        run::run(&opts, i).await
    })
}
