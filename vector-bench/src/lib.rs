//! vector-bench: HNSW recall@k against exact ground truth, latency and QPS per ef, filtered
//! search, build time and quantized variants, on usearch (embedded), pgvector, Chroma and Qdrant,
//! compared at matched recall.

pub mod curve;
pub mod dataset;
pub mod index;
pub mod opts;
pub mod plan;
pub mod recall;
pub mod report;
pub mod run;
pub mod session;
pub mod systems;
pub mod targets;
pub mod truth;
pub mod workloads;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use common::run::Summary;
pub use opts::Opts;

/// What ends `vector-bench --help`, before the `compare` example every tool's help ends with.
pub const EXAMPLES: &str = "Examples:
  vector-bench
      recall@10 and QPS per ef of usearch's HNSW over 100,000 generated 768-dim vectors
  vector-bench --rows 20k --dims 128 --target usearch --target pgvector=postgres://fairbench@127.0.0.1:5432/vec
      usearch and pgvector on the same data and ground truth, compared at matched recall";

/// Each run rendered by its suite's report (what `vector-bench report` renders with).
pub const REPORT: common::export::BySuite<'static> = common::export::BySuite(&[
    ("hnsw", &report::VectorReport),
    ("ground-truth", &report::TruthReport),
]);

/// What the tooling subcommands render with, and `k8s-manifest`'s check of a worker's
/// arguments: the plan's checks (an embedded index refused as several workers), before anything
/// is touched.
pub const TOOLING: common::export::WithWorkerCheck<'static> = common::export::WithWorkerCheck {
    report: &REPORT,
    check: refuse_workers,
};

fn refuse_workers(args: &[String]) -> Result<(), String> {
    common::export::check_worker_args("vector-bench", args, |opts: Opts| {
        plan::plan(&opts.resolved())
    })
}

/// Runs vector-bench on a runtime of its own. Ctrl-C stops it cleanly, or `interrupt` when the caller
/// supplies one.
pub fn run(opts: Opts, interrupt: Option<Arc<AtomicBool>>) -> anyhow::Result<Summary> {
    common::run::block_on("vector-bench", interrupt, move |i| async move {
        run::run(&opts, i).await
    })
}
