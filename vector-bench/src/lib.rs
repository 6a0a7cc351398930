//! vector-bench: HNSW recall@k against exact ground truth, latency and QPS per ef, filtered
//! search, build time and quantized variants, on usearch (embedded), pgvector, Chroma and Qdrant,
//! compared at matched recall.

pub mod curve;
pub mod dataset;
pub mod memory;
pub mod recall;
pub mod report;
pub mod targets;
pub mod truth;
pub mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use common::options::CommonOpts;
use common::results::Report;
use serde::Serialize;

use crate::dataset::Metric;
use crate::workloads::{FilterMode, Variant};

/// `vector-bench`: with no `--target`, the sweep on an embedded usearch index over a generated
/// dataset (seed 000: 100,000 × 768, cosine, m = 16, ef_construction = 200, k = 10).
#[derive(Parser, Serialize, Debug, Clone)]
#[command(
    name = "vector-bench",
    version,
    about,
    // A sweep measures many points (ef × filter × variant); shorter windows keep the seed's
    // default run to minutes. Both remain flags with the same meaning as in every tool.
    mut_arg("duration", |a| a.default_value("2s")),
    mut_arg("rounds", |a| a.default_value("3"))
)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// The vectors: `generated` (a seeded Gaussian mixture), an ann-benchmarks `.hdf5` file,
    /// or a TEXMEX `.fvecs`/`.bvecs` base file (with --query-file).
    #[arg(long, default_value = "generated", value_name = "generated|PATH")]
    pub data: String,

    /// TEXMEX query vectors (`.fvecs`/`.bvecs`) for a TEXMEX base file.
    #[arg(long, value_name = "PATH")]
    pub query_file: Option<PathBuf>,

    /// TEXMEX ground truth (`.ivecs`) for the unfiltered queries; checked against the exact
    /// ground truth vector-bench computes.
    #[arg(long, value_name = "PATH")]
    pub truth_file: Option<PathBuf>,

    /// Rows of generated data (or the first rows of a file).
    #[arg(long, default_value = "100k", value_parser = common::human::parse_count)]
    pub rows: u64,

    /// Dimensions of generated data.
    #[arg(long, default_value = "768", value_parser = common::human::parse_count)]
    pub dims: u64,

    /// Clusters of the generated Gaussian mixture.
    #[arg(long, default_value = "64", value_parser = common::human::parse_count)]
    pub clusters: u64,

    /// Queries per ef point.
    #[arg(long, default_value = "250", value_parser = common::human::parse_count)]
    pub queries: u64,

    /// Neighbours asked for and scored (recall@k).
    #[arg(long, default_value = "10", value_parser = common::human::parse_count)]
    pub k: u64,

    /// The ef (search breadth) points of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "32,64,128,256", value_parser = common::human::parse_count)]
    pub ef: Vec<u64>,

    /// HNSW links per node, the same on every target.
    #[arg(long, default_value = "16", value_parser = common::human::parse_count)]
    pub m: u64,

    /// HNSW build breadth, the same on every target.
    #[arg(long, default_value = "200", value_parser = common::human::parse_count)]
    pub ef_construction: u64,

    /// Distance (generated data; a file's own metric wins when it names one).
    #[arg(long, value_enum, default_value = "cosine")]
    pub metric: Metric,

    /// Query families: unfiltered, and filtered to a category holding 10% or 1% of the rows.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,10pct,1pct"
    )]
    pub filters: Vec<FilterMode>,

    /// Index variants: full-precision f32, scalar int8, binary (each where the target offers
    /// it; rescoring on where offered).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "f32,int8,binary"
    )]
    pub variants: Vec<Variant>,

    /// Rows per insert batch.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub batch: u64,

    /// Prefix of every collection, table or index vector-bench creates.
    #[arg(long, default_value = "fairbench")]
    pub namespace: String,

    /// A server's PID (`NAME=PID`), to report its resident memory after each build.
    #[arg(long = "server-pid", value_name = "NAME=PID")]
    pub server_pids: Vec<String>,

    /// Where ground truth for generated data is cached (default ~/.cache/fairbench/vector-bench).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Leave the collections and tables in place after the run (by default they are dropped).
    #[arg(long)]
    pub keep_data: bool,

    /// Only compute the exact ground truth (ignoring any cache, then caching it), report its
    /// time and, when the data ships neighbour lists, how well they agree; measure no target.
    #[arg(long)]
    pub truth_only: bool,
}

/// What a finished run leaves: the report (also written to `results_dir`) and the exit code
/// (0: every cell ok; 1: the run finished but some cell is not).
#[derive(Debug)]
pub struct Summary {
    pub report: Report,
    pub results_dir: PathBuf,
    pub exit_code: u8,
}

/// Runs the sweep on a runtime of its own; Ctrl-C stops it cleanly.
pub fn run(opts: Opts) -> anyhow::Result<Summary> {
    runtime()?.block_on(async {
        let interrupt = common::interrupt::install();
        workloads::sweep::run(&opts, interrupt).await
    })
}

/// As [`run`], with the interrupt flag supplied by the caller instead of Ctrl-C.
pub fn run_with_interrupt(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    runtime()?.block_on(workloads::sweep::run(&opts, interrupt))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("vector-bench")
        .build()?)
}
