//! The systems geo-bench drives, one file each. A target knows its engine (how to connect,
//! describe its durability, create and load its store, and answer queries) and nothing of the
//! workloads that call it. Adding a system is adding a file here and one line in [`open`].

pub mod archerdb;
pub mod postgis;
pub mod redis;
pub mod sqlite;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::BoxFuture;

use crate::events::Event;
use crate::queries::Query;
use crate::workloads::workers::GeoWorkers;

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
         (fairbench only writes objects it created: use another database, or move that object)"
    )]
    Foreign { system: String, object: String },
    #[error("`{url}` is not a target geo-bench can drive: {message}")]
    Url { url: String, message: String },
    /// A message that is already a complete sentence.
    #[error("{0}")]
    Other(String),
}

/// How a target is known in reports.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub url_redacted: String,
}

/// What a system reported about itself.
#[derive(Debug, Clone, Default)]
pub struct Description {
    /// Engine family (`sqlite`, `postgis`, `redis`, `valkey`).
    pub kind: String,
    pub version: String,
    /// Settings read back from the system: name → value.
    pub settings: BTreeMap<String, String>,
    /// Whether an acknowledged write has been synced to disk.
    pub durable: bool,
    /// The durability it runs with, in words, as its cells are labelled.
    pub durability: String,
    pub data_dir: Option<PathBuf>,
    /// Set when the system does not run as its URL asked (a `durable` target whose
    /// `appendfsync` is not `always`): the system is refused, not measured.
    pub refusal: Option<String>,
    /// How this target answers the queries, for the report (index, exact filtering).
    pub method: Vec<String>,
}

/// The control path of a system: everything but the measured operations.
pub trait Target: Send {
    fn identity(&self) -> &Identity;

    fn identity_mut(&mut self) -> &mut Identity;

    /// Version, durability and settings, read from the system itself.
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>>;

    /// Creates fairbench's store (the query set and the insert set), after checking that
    /// nothing in the way belongs to someone else.
    fn prepare(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Loads the query set (not measured).
    fn load<'a>(&'a mut self, events: &'a [Event]) -> BoxFuture<'a, Result<(), TargetError>>;

    /// Evidence from the engine's own catalog that the indexes are as declared.
    fn verify_indexes(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>>;

    /// Empties the insert set before an insert window (not measured).
    fn reset_inserts(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Events the insert set holds.
    fn count_inserts(&mut self) -> BoxFuture<'_, Result<u64, TargetError>>;

    /// Removes fairbench's store.
    fn cleanup(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Opens `size` worker sessions before any clock starts.
    fn open_workers(&self, size: usize) -> BoxFuture<'_, Result<Box<dyn GeoWorkers>, TargetError>>;

    /// Whether the sessions take single-point adds pipelined (the `geoadd` workload).
    fn supports_point_adds(&self) -> bool {
        false
    }
}

/// One connection's measured operations, for async clients.
pub trait GeoSession: Send + 'static {
    /// Inserts `batch` as one request (one acknowledgement for all its events).
    fn insert(&mut self, batch: &[Event]) -> impl Future<Output = Result<(), OpError>> + Send;

    /// Answers `query` into `ids` (cleared first).
    fn query(
        &mut self,
        query: &Query,
        ids: &mut Vec<u128>,
    ) -> impl Future<Output = Result<(), OpError>> + Send;

    /// Sends one single-point add per event, pipelined, and waits for every reply. `first`
    /// numbers the members so they are unique.
    fn add_points(
        &mut self,
        events: &[Event],
        first: u64,
    ) -> impl Future<Output = Result<(), OpError>> + Send {
        let _ = (events, first);
        async { Err(OpError::Fatal("this target has no single-point add".into())) }
    }
}

/// The same for synchronous clients, each driven from its own thread.
pub trait BlockingGeoSession: Send + 'static {
    fn insert(&mut self, batch: &[Event]) -> Result<(), OpError>;
    fn query(&mut self, query: &Query, ids: &mut Vec<u128>) -> Result<(), OpError>;
}

/// Where a target lives when nothing else is said: the embedded SQLite R*Tree store in the
/// results folder.
pub const DEFAULT_TARGET: &str = "sqlite";

/// Connects to the system `spec` names. `results_dir` holds the embedded databases.
pub async fn open(spec: &TargetSpec, results_dir: &Path) -> Result<Box<dyn Target>, TargetError> {
    match spec.scheme() {
        "sqlite" => sqlite::SqliteTarget::open(spec, results_dir),
        "postgres" | "postgresql" | "postgis" => postgis::PostgisTarget::open(spec).await,
        "redis" | "valkey" => redis::RedisTarget::open(spec).await,
        "archerdb" => archerdb::open(spec),
        other => Err(TargetError::Url {
            url: spec.url_redacted(),
            message: format!(
                "unknown scheme `{other}`; use sqlite[:PATH], postgres://… (with PostGIS), redis://… or valkey://…"
            ),
        }),
    }
}

/// Whether `host` is this machine, so its data directory can be measured here.
pub fn is_local_host(host: &str) -> bool {
    host.is_empty()
        || host == "localhost"
        || host.starts_with('/')
        || host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A dead connection stops the worker; anything else fails one operation.
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
        let spec = TargetSpec::parse("mongodb://127.0.0.1:27017").unwrap();
        let error = open(&spec, Path::new("/tmp"))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown scheme `mongodb`"), "{error}");
        assert!(error.contains("redis://"), "{error}");
        assert!(is_local_host("127.0.0.1") && !is_local_host("10.1.2.3"));
    }
}
