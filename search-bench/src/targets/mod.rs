//! The engines search-bench drives, one file each. An engine knows how to create its index,
//! take `_bulk` bodies, answer a query and open the measured sessions; it knows nothing of
//! the workloads that call it. Adding an engine is adding a file here and one line in
//! [`REGISTRY`].

pub mod elastic;
pub mod tantivy;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::options::TargetSpec;
use common::pool::BoxFuture;
pub use common::reach::{Reach, TlsState};
pub use common::target::{
    Described, Identified, Identity, TargetError, is_local_host, location_of_host, op_error,
};

use crate::answer::Answer;
use crate::queries::{Query, QuerySet};
use crate::session::{IngestWorkers, SearchWorkers};

/// What an engine reported about itself.
#[derive(Debug, Clone, Default)]
pub struct Description {
    /// `opensearch`, `elasticsearch`, `tantivy`; the version as the engine reported it (`GET /`,
    /// the library's own version constant); where it runs; where it keeps its index on this
    /// machine, when it can tell (the run measures the durable-write floor there). Settings are
    /// read back when the index is created.
    pub system: Described,
    /// The process serving the index, when it runs on this machine: its CPU time is read
    /// around every window. `None` for an embedded engine (its CPU is the client's).
    pub server_pid: Option<u32>,
    /// What a reader of the report must know about how this engine was measured.
    pub notes: Vec<String>,
    /// The TLS of its connections; `None` for an embedded engine.
    pub tls: Option<TlsState>,
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
pub trait Target: Identified + Send {
    /// Name, version and where it runs, read from the engine itself.
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>>;

    /// Fails with [`foreign`]'s error when the index exists and is not search-bench's.
    fn check_index(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Creates the index afresh (dropping search-bench's own previous one) with the explicit
    /// mapping, and returns the settings and field types read back from the engine.
    fn create_index(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>>;

    /// Opens `n` sessions that each send `_bulk` bodies, before any clock starts.
    fn open_ingest(&mut self, n: usize) -> BoxFuture<'_, Result<IngestWorkers, TargetError>>;

    /// Makes every acknowledged document searchable (and durable).
    fn refresh(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Documents the index holds, as the engine counts them.
    fn count(&mut self) -> BoxFuture<'_, Result<u64, TargetError>>;

    /// Runs one query (`body` is its Elasticsearch request) and reads the whole answer.
    fn answer<'a>(
        &'a mut self,
        query: &'a Query,
        body: &'a Bytes,
    ) -> BoxFuture<'a, Result<Answer, TargetError>>;

    /// Opens `n` search sessions over the query sets, before any clock starts.
    fn open_search<'a>(
        &'a mut self,
        n: usize,
        sets: &'a [QuerySet],
    ) -> BoxFuture<'a, Result<Box<dyn SearchWorkers>, TargetError>>;

    /// Drops search-bench's own index.
    fn drop_index(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;
}

/// How a registered engine is opened from its `--target`, as [`Reach`] says.
pub type Open = for<'a> fn(
    &'a TargetSpec,
    &'a IndexSpec,
    &'a Reach,
) -> BoxFuture<'a, Result<Box<dyn Target>, TargetError>>;

/// One engine search-bench can drive: the URL schemes that name it, how they are written (for
/// the error that lists the choices) and how it is opened.
pub struct Kind {
    pub schemes: &'static [&'static str],
    pub written: &'static str,
    pub open: Open,
}

impl Kind {
    const fn new(schemes: &'static [&'static str], written: &'static str, open: Open) -> Kind {
        Kind {
            schemes,
            written,
            open,
        }
    }
}

/// Every engine, one line each (kept on one line each by hand, hence no rustfmt).
#[rustfmt::skip]
pub const REGISTRY: &[Kind] = &[
    Kind::new(&["tantivy"], "tantivy[:DIR]", tantivy::open),
    Kind::new(&["http", "https"], "http[s]://HOST:PORT (Elasticsearch, OpenSearch)", elastic::open),
];

/// Where a run goes when nothing else is said: the embedded tantivy index.
pub const DEFAULT_TARGET: &str = "tantivy";

/// Connects to the engine `spec` names, as `reach` says.
pub async fn open(
    spec: &TargetSpec,
    index: &IndexSpec,
    reach: &Reach,
) -> Result<Box<dyn Target>, TargetError> {
    match REGISTRY.iter().find(|k| k.schemes.contains(&spec.scheme())) {
        Some(kind) => (kind.open)(spec, index, reach).await,
        None => {
            let written: Vec<&str> = REGISTRY.iter().map(|k| k.written).collect();
            Err(TargetError::unknown_scheme(spec, &written.join(" or ")))
        }
    }
}

/// An index (or folder) in the way that search-bench did not create: said with the flag that
/// gets around it.
pub fn foreign(identity: &Identity, object: &str) -> TargetError {
    TargetError::Other(format!(
        "{}: {object} exists but was not created by search-bench; refusing to touch it \
         (use --index to name another index, or move that one)",
        identity.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::testing::refusal;

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("solr://127.0.0.1:8983").unwrap();
        let index = IndexSpec {
            name: "x".into(),
            request_cache: true,
        };
        let error = refusal(open(&spec, &index, &Reach::default()).await);
        assert!(error.contains("unknown scheme `solr`"), "{error}");
        assert!(
            error.ends_with("use tantivy[:DIR] or http[s]://HOST:PORT (Elasticsearch, OpenSearch)"),
            "{error}"
        );
    }
}
