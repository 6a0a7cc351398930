//! The systems vector-bench drives, one file each. A target knows its engine (how to connect,
//! build an HNSW index with the asked-for parameters, read them back, and search) and nothing of
//! the sweep that calls it. Adding a system is adding a file here and one line in [`open`].

pub mod chroma;
pub mod pgvector;
pub mod qdrant;
pub mod search;
pub mod usearch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use common::options::TargetSpec;
use common::pool::BoxFuture;
use serde::Serialize;

use crate::dataset::{Dataset, Metric};
use crate::workloads::Variant;

pub use search::{Pass, Searchers, Work};

/// Why a target could not do what was asked; every message is one complete sentence.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot connect to {system} at {url}: {message}")]
    Connect {
        system: String,
        url: String,
        message: String,
    },
    #[error("{system}: {message}")]
    Query { system: String, message: String },
    #[error(
        "{system}: {object} exists but was not created by fairbench; refusing to touch it \
         (use another --namespace, or move that object)"
    )]
    Foreign { system: String, object: String },
    #[error(
        "{system}: {object} holds {found}-dimension vectors, the dataset has {wanted}: \
         drop it or choose another --namespace"
    )]
    Dimensions {
        system: String,
        object: String,
        found: usize,
        wanted: usize,
    },
    #[error("`{url}` is not a target vector-bench can drive: {message}")]
    Url { url: String, message: String },
    #[error("{0}")]
    Other(String),
}

/// How a target is known in reports.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    /// Engine family (`usearch`, `pgvector`, `chroma`, `qdrant`).
    pub kind: String,
    pub url_redacted: String,
}

impl Identity {
    /// Refuses an existing collection of fairbench's whose dimension is not the dataset's.
    pub fn check_dimensions(
        &self,
        object: String,
        found: Option<usize>,
        wanted: usize,
    ) -> Result<(), TargetError> {
        match found {
            Some(found) if found != wanted => Err(TargetError::Dimensions {
                system: self.name.clone(),
                object,
                found,
                wanted,
            }),
            _ => Ok(()),
        }
    }

    /// A failed request to this system, as one sentence.
    pub fn error(&self, message: impl std::fmt::Display) -> TargetError {
        TargetError::Query {
            system: self.name.clone(),
            message: message.to_string(),
        }
    }
}

/// What a system reported about itself.
#[derive(Debug, Clone, Default)]
pub struct Description {
    pub version: String,
    /// Settings read from the system: name → value.
    pub settings: BTreeMap<String, String>,
}

/// The index every target builds, with the same parameters.
#[derive(Debug, Clone, Serialize)]
pub struct IndexSpec {
    pub namespace: String,
    pub variant: Variant,
    pub dims: usize,
    pub metric: Metric,
    pub m: usize,
    pub ef_construction: usize,
    pub rows: usize,
}

impl IndexSpec {
    /// The collection/table name of this variant (`fairbench_f32`).
    pub fn collection(&self) -> String {
        format!("{}_{}", self.namespace, self.variant.as_str())
    }
}

/// What building an index cost, and what the times include.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BuildReport {
    /// Seconds until every row was acknowledged.
    pub insert_s: f64,
    /// Seconds from the first row sent until the index answered a query through the index.
    pub build_s: f64,
    /// What the two times cover on this engine (`add() on 2 threads; insert is the build`).
    pub method: String,
    /// The index's own memory figure, for an embedded index.
    pub index_bytes: Option<u64>,
}

/// The control path of a system: everything but the measured searches.
pub trait VectorTarget: Send {
    fn identity(&self) -> &Identity;

    /// Lets the sweep name a system once names are settled.
    fn identity_mut(&mut self) -> &mut Identity;

    /// Version and settings, read from the system itself.
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>>;

    /// How the target offers `variant` (`Ok(how)`), or why it does not (`Err(why)`).
    fn offer(&self, variant: Variant) -> Result<String, String>;

    /// Checks the namespace before anything is written: an object in the way that fairbench did
    /// not create, or one of fairbench's with another dimension, is an error.
    fn check<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>>;

    /// (Re)creates fairbench's collection, loads every row with its category, builds the index
    /// and waits until it answers queries. `done` counts rows sent, for a progress bar.
    fn build<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        data: &'a Arc<Dataset>,
        batch: usize,
        done: &'a AtomicU64,
    ) -> BoxFuture<'a, Result<BuildReport, TargetError>>;

    /// The index's parameters and row count as the system reports them: setting → value.
    fn verify<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>>;

    /// Opens `sessions` search sessions on the built index, before any clock starts.
    fn searchers<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        sessions: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Searchers>, TargetError>>;

    /// Drops fairbench's own collection of `spec`.
    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>>;
}

/// Where the sweep runs when no target is named: the embedded usearch index.
pub const DEFAULT_TARGET: &str = "usearch";

/// Connects to the system `spec` names.
pub async fn open(spec: &TargetSpec) -> Result<Box<dyn VectorTarget>, TargetError> {
    match spec.scheme() {
        "usearch" => Ok(Box::new(usearch::UsearchTarget::open(spec))),
        "postgres" | "postgresql" | "pgvector" => pgvector::PgvectorTarget::open(spec).await,
        "chroma" => chroma::ChromaTarget::open(spec).await,
        "qdrant" => qdrant::QdrantTarget::open(spec).await,
        other => Err(TargetError::Url {
            url: spec.url_redacted(),
            message: format!(
                "unknown scheme `{other}`; use usearch, postgres://… (pgvector), chroma://HOST:PORT or qdrant://HOST:PORT (gRPC)"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("redis://127.0.0.1:6379").unwrap();
        let error = open(&spec).await.err().unwrap().to_string();
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("chroma://"), "{error}");
    }
}
