//! search-bench: seed 000's search workloads (`_bulk` ingest, match, match_phrase, bool, terms
//! aggregation) on an embedded tantivy index and on any Elasticsearch-API server, every answer
//! verified against the exact truth before anything is timed.

pub mod answer;
pub mod corpus;
pub mod queries;
pub mod render;
pub mod suite;
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

#[derive(Parser, Serialize, Debug, Clone)]
#[command(name = "search-bench", version, about)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Documents in the corpus (seed 000: 200k).
    #[arg(long, default_value = "200k", value_parser = common::human::parse_count)]
    pub docs: u64,

    /// Documents per `_bulk` request.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub batch: u64,

    /// Concurrent `_bulk` senders during ingest (the query workloads use --connections).
    #[arg(long, default_value = "8", value_parser = common::human::parse_count)]
    pub ingest_threads: u64,

    /// Queries in each workload's set; every worker cycles through the same sequence.
    #[arg(long, default_value = "256", value_parser = common::human::parse_count)]
    pub queries: u64,

    /// Workloads to run, comma-separated: ingest, match, phrase, bool, agg [default: all].
    /// Without `ingest` the corpus is still loaded once, untimed.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workloads: Vec<String>,

    /// The index search-bench creates (and only ever deletes when it created it).
    #[arg(long, default_value = "fairbench_search", value_parser = index_name)]
    pub index: String,

    /// Bypass Elasticsearch's shard request cache on every search (`request_cache=false`);
    /// by default it serves repeated size-0 aggregations as configured, and the report says so.
    #[arg(long)]
    pub no_request_cache: bool,

    /// Leave the index in place after the run (by default it is deleted).
    #[arg(long)]
    pub keep_index: bool,
}

fn index_name(text: &str) -> Result<String, String> {
    let valid = !text.is_empty()
        && text.len() <= 200
        && !text.starts_with(['_', '-', '+', '.'])
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'));
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a usable index name (lowercase letters, digits, _ and -, not starting with _ or -)"
        ))
    }
}

/// What a finished run leaves: the report (also written to `results_dir`) and the exit code
/// (0: every cell ok; 1: the run finished but some cell is not).
#[derive(Debug)]
pub struct Summary {
    pub report: Report,
    pub results_dir: PathBuf,
    pub exit_code: u8,
}

/// Runs the suite on a runtime of its own; Ctrl-C stops it cleanly.
pub fn run(opts: Opts) -> anyhow::Result<Summary> {
    runtime()?.block_on(async {
        let interrupt = common::interrupt::install();
        suite::run(&opts, interrupt).await
    })
}

/// As [`run`], with the interrupt flag supplied by the caller instead of Ctrl-C.
pub fn run_with_interrupt(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    runtime()?.block_on(suite::run(&opts, interrupt))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("search-bench")
        .build()?)
}
