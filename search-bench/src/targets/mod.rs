//! The engines search-bench drives, one file each. An engine knows how to create its index,
//! take `_bulk` bodies, answer a query and run the measured searches; it knows nothing of the
//! suite. Adding an engine is adding a file here and one line in [`open`].

pub mod elastic;
pub mod tantivy;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bytes::Bytes;
use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::BoxFuture;
use common::window::{WindowOutcome, WindowPlan};

use crate::answer::Answer;
use crate::corpus::Bulk;
use crate::queries::{Query, QueryKind, QuerySet};

/// Why an engine could not do what was asked; every message is one complete sentence.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot connect to {system} at {url}: {message}")]
    Connect {
        system: String,
        url: String,
        message: String,
    },
    #[error("{system}: {message}")]
    Request { system: String, message: String },
    #[error(
        "{system}: {object} exists but was not created by search-bench; refusing to touch it \
         (use --index to name another index, or move that one)"
    )]
    Foreign { system: String, object: String },
    #[error("`{url}` is not a target search-bench can drive: {message}")]
    Url { url: String, message: String },
}

/// How an engine is known in reports.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub kind: String,
    pub url_redacted: String,
}

/// What an engine reported about itself.
#[derive(Debug, Clone, Default)]
pub struct Description {
    /// `opensearch`, `elasticsearch`, `tantivy`.
    pub kind: String,
    /// As the engine reported it (`GET /`, the library's own version constant).
    pub version: String,
    /// The process serving the index, when it runs on this machine: its CPU time is read
    /// around every window. `None` for an embedded engine (its CPU is the client's).
    pub server_pid: Option<u32>,
    pub embedded: bool,
}

/// What the index is created with, the same for every engine.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    pub name: String,
    /// Serve repeated size-0 aggregations from the shard request cache (Elasticsearch's
    /// default) or bypass it on every request (`--no-request-cache`).
    pub request_cache: bool,
}

/// The control path of an engine: everything but the measured operations.
pub trait Engine: Send {
    fn identity(&self) -> &Identity;

    /// Lets the suite name an engine after its kind once it has said what it is.
    fn identity_mut(&mut self) -> &mut Identity;

    /// Name, version and where it runs, read from the engine itself.
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, EngineError>>;

    /// Fails with [`EngineError::Foreign`] when the index exists and is not search-bench's.
    fn check_index(&mut self) -> BoxFuture<'_, Result<(), EngineError>>;

    /// Creates the index afresh (dropping search-bench's own previous one) with the explicit
    /// mapping, and returns the settings and field types read back from the engine.
    fn create_index(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, EngineError>>;

    /// Opens `n` sessions that each send `_bulk` bodies, before any clock starts.
    fn open_ingest(&mut self, n: usize) -> BoxFuture<'_, Result<IngestWorkers, EngineError>>;

    /// Makes every acknowledged document searchable (and durable).
    fn refresh(&mut self) -> BoxFuture<'_, Result<(), EngineError>>;

    /// Documents the index holds, as the engine counts them.
    fn count(&mut self) -> BoxFuture<'_, Result<u64, EngineError>>;

    /// Runs one query (`body` is its Elasticsearch request) and reads the whole answer.
    fn answer<'a>(
        &'a mut self,
        query: &'a Query,
        body: &'a Bytes,
    ) -> BoxFuture<'a, Result<Answer, EngineError>>;

    /// Opens `n` search sessions over the query sets, before any clock starts.
    fn open_search<'a>(
        &'a mut self,
        n: usize,
        sets: &'a [QuerySet],
    ) -> BoxFuture<'a, Result<Box<dyn SearchWorkers>, EngineError>>;

    /// Drops search-bench's own index.
    fn drop_index(&mut self) -> BoxFuture<'_, Result<(), EngineError>>;
}

/// An engine's open search sessions.
pub trait SearchWorkers: Send {
    /// Runs one window of `kind` on the first `n` sessions.
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        kind: QueryKind,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>>;
}

/// One connection's measured searches, for async clients: query `index` of the `kind` set.
pub trait SearchSession: Send + 'static {
    fn search(
        &mut self,
        kind: QueryKind,
        index: usize,
    ) -> impl Future<Output = Result<(), OpError>> + Send;
}

/// The same for in-process engines, each session driven from its own thread.
pub trait BlockingSearchSession: Send + 'static {
    fn search(&mut self, kind: QueryKind, index: usize) -> Result<(), OpError>;
}

/// One connection's `_bulk` requests, for async clients.
pub trait BulkSession: Send + 'static {
    fn bulk(&mut self, bulk: &Bulk) -> impl Future<Output = Result<(), OpError>> + Send;
}

/// The same for in-process engines.
pub trait BlockingBulkSession: Send + 'static {
    fn bulk(&mut self, bulk: &Bulk) -> Result<(), OpError>;
}

/// An engine's open ingest sessions; see [`crate::workloads::ingest`].
pub enum IngestWorkers {
    Async(Box<dyn crate::workloads::ingest::AsyncIngest>),
    Blocking(Box<dyn crate::workloads::ingest::BlockingIngest>),
}

impl std::fmt::Debug for IngestWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IngestWorkers")
    }
}

impl IngestWorkers {
    /// Sends every body once, `sessions` at a time; see [`crate::workloads::ingest::run`].
    pub async fn run(
        self,
        bulks: Arc<[Bulk]>,
        ceiling: Duration,
        interrupt: Arc<AtomicBool>,
    ) -> WindowOutcome {
        match self {
            IngestWorkers::Async(w) => w.run(bulks, ceiling, interrupt).await,
            IngestWorkers::Blocking(w) => {
                tokio::task::spawn_blocking(move || w.run(bulks, ceiling, interrupt))
                    .await
                    .expect("the ingest threads do not panic")
            }
        }
    }
}

/// Where a run goes when nothing else is said: the embedded tantivy index.
pub const DEFAULT_TARGET: &str = "tantivy";

/// Connects to the engine `spec` names. `results_dir` holds an embedded engine's index.
pub async fn open(
    spec: &TargetSpec,
    index: &IndexSpec,
    results_dir: &Path,
) -> Result<Box<dyn Engine>, EngineError> {
    match spec.scheme() {
        "tantivy" => tantivy::TantivyEngine::open(spec, index, results_dir),
        "http" | "https" => elastic::ElasticEngine::open(spec, index).await,
        other => Err(EngineError::Url {
            url: spec.url_redacted(),
            message: format!(
                "unknown scheme `{other}`; use tantivy[:DIR] or http://HOST:PORT (Elasticsearch, OpenSearch)"
            ),
        }),
    }
}

/// Maps a session-level error to the worker's view: a dead connection stops the worker.
pub fn op_error(fatal: bool, message: impl ToString) -> OpError {
    if fatal {
        OpError::Fatal(message.to_string())
    } else {
        OpError::Failed(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("solr://127.0.0.1:8983").unwrap();
        let index = IndexSpec {
            name: "x".into(),
            request_cache: true,
        };
        let error = open(&spec, &index, Path::new("/tmp"))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown scheme `solr`"), "{error}");
        assert!(error.contains("http://HOST:PORT"), "{error}");
    }
}
