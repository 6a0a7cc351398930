//! The systems geo-bench drives, one file each. A target knows its engine (how to connect,
//! describe its durability, create and load its store, and answer queries) and nothing of the
//! workloads that call it. Adding a system is adding a file here and one line in [`open`].

pub mod archerdb;
pub mod postgis;
pub mod redis;
pub mod sqlite;

use std::collections::BTreeMap;

use common::options::TargetSpec;
use common::pool::BoxFuture;
pub use common::reach::{Reach, TlsState};
pub use common::target::{
    Described, Identified, Identity, TargetError, is_local_host, location_of_host, op_error,
};

use crate::events::Event;
use crate::session::GeoWorkers;

/// What a system reported about itself.
#[derive(Debug, Clone, Default)]
pub struct Description {
    /// Engine family (`sqlite`, `postgis`, `redis`, `valkey`), version, settings, where it
    /// keeps its data and where it runs.
    pub system: Described,
    /// Whether an acknowledged write has been synced to disk.
    pub durable: bool,
    /// The durability it runs with, in words, as its cells are labelled.
    pub durability: String,
    /// Set when the system does not run as its URL asked (a `durable` target whose
    /// `appendfsync` is not `always`): the system is refused, not measured.
    pub refusal: Option<String>,
    /// How this target answers the queries, for the report (index, exact filtering).
    pub method: Vec<String>,
    /// The name an unnamed system is reported under (`redis-durable`, `postgis`).
    pub default_name: String,
    /// What a reader must know of the whole run because this system is in it.
    pub notes: Vec<String>,
}

/// The control path of a system: everything but the measured operations.
pub trait Target: Identified + Send {
    /// The TLS of its connections; `None` for an embedded system or one without TLS support.
    fn tls(&self) -> Option<TlsState> {
        None
    }

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

/// Where a target lives when nothing else is said: the embedded SQLite R*Tree store in the
/// results folder.
pub const DEFAULT_TARGET: &str = "sqlite";

/// Connects to the system `spec` names, as `reach` says.
pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
    match spec.scheme() {
        "sqlite" => sqlite::SqliteTarget::open(spec, &reach.results_dir),
        "postgres" | "postgresql" | "postgis" => postgis::PostgisTarget::open(spec, reach).await,
        "redis" | "valkey" | "rediss" | "valkeys" => redis::RedisTarget::open(spec, reach).await,
        "archerdb" => archerdb::open(spec),
        _ => Err(TargetError::unknown_scheme(
            spec,
            "sqlite[:PATH], postgres://… (with PostGIS), redis[s]://… or valkey[s]://…",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::testing::refusal;

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("mongodb://127.0.0.1:27017").unwrap();
        let error = refusal(open(&spec, &Reach::default()).await);
        assert!(error.contains("unknown scheme `mongodb`"), "{error}");
        assert!(error.contains("redis[s]://"), "{error}");
    }
}
