//! The systems sql-bench drives, one file each. A target knows its engine (how to connect,
//! create, load, verify and query) and nothing of the suite that calls it. Adding a system is
//! adding a file here and one line in [`open`].

pub mod couchdb;
pub mod cql;
pub mod mongodb;
pub mod mysql;
pub mod postgres;
pub mod sql;
pub mod sqlite;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::BoxFuture;
use common::window::{WindowOutcome, WindowPlan};

use crate::durability::Durability;
use crate::query::{Collection, CollectionState, DocSession};
use crate::suites::crud::workload::Mix;

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
    #[error("`{url}` is not a target sql-bench can drive: {message}")]
    Url { url: String, message: String },
    /// A message that is already a complete sentence (from a session being opened).
    #[error("{0}")]
    Other(String),
}

/// How a target is known in reports.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    /// Engine family as far as the URL tells (`postgres`, `mysql`, `sqlite`); refined by
    /// [`Description::kind`] once the server has answered.
    pub kind: String,
    pub url_redacted: String,
}

/// What a system reported about itself, and how it compares with the durability asked for.
#[derive(Debug, Clone, Default)]
pub struct Description {
    pub kind: String,
    pub version: String,
    /// Settings read from the system: name → value.
    pub settings: BTreeMap<String, String>,
    /// Where the data lives, when this machine can see it.
    pub data_dir: Option<PathBuf>,
    /// Each setting that does not give the asked-for durability, as `setting=value (needs …)`.
    pub mismatches: Vec<String>,
}

/// A two-column key/value table (`k BIGINT PRIMARY KEY, v VARCHAR(value_len)`), by logical name;
/// each target maps the name into its own namespace.
#[derive(Debug, Clone, Copy)]
pub struct KvTable {
    pub name: &'static str,
    pub value_len: usize,
}

/// The control path of a system: everything but the measured operations.
pub trait Target: Send {
    fn identity(&self) -> &Identity;

    /// Lets the suite name a system after its engine once the server has said what it is.
    fn identity_mut(&mut self) -> &mut Identity;

    /// Version and settings, read from the system itself, checked against `durability`.
    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>>;

    /// Sends the point reads of the workers opened from now on to `replicas` (session i to
    /// replica i mod n); writes stay on this system. A system without replicas refuses.
    fn route_reads(&mut self, replicas: &[TargetSpec]) -> Result<(), TargetError> {
        let _ = replicas;
        Err(TargetError::Other(format!(
            "{}: point reads cannot be sent to replicas",
            self.identity().name
        )))
    }

    /// Fails with [`TargetError::Foreign`] when any of `tables` exists without fairbench's marker.
    fn check_namespace<'a>(
        &'a mut self,
        tables: &'a [KvTable],
    ) -> BoxFuture<'a, Result<(), TargetError>>;

    /// (Re)creates the table in fairbench's namespace, marked as fairbench's, and loads `rows`.
    fn create_kv<'a>(
        &'a mut self,
        table: KvTable,
        rows: &'a [(i64, String)],
    ) -> BoxFuture<'a, Result<(), TargetError>>;

    /// Evidence from the engine's own catalog that the table is as declared (primary key,
    /// storage engine): setting → value, prefixed with the table name.
    fn verify_kv<'a>(
        &'a mut self,
        table: KvTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>>;

    /// Every row, ordered by key, read back for verification.
    fn read_kv(&mut self, table: KvTable)
    -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>>;

    /// Rows with `low <= k < high`.
    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>>;

    /// Drops fairbench's own table.
    fn drop_kv(&mut self, table: KvTable) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Opens `size` worker sessions reading `read` and writing `write`, before any clock starts.
    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>>;

    /// Fails with [`TargetError::Foreign`] when the collection's table exists without
    /// fairbench's marker.
    fn check_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>>;

    /// (Re)creates the collection's table, marked as fairbench's, with its primary key and
    /// exactly the declared secondary indexes, before any row is written.
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>>;

    /// The collection's exact row count and every index, read from the engine's own catalog.
    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>>;

    /// Drops fairbench's own collection table.
    fn drop_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>>;

    /// Opens a session for the collection's document requests (a connection of its own).
    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>>;
}

/// A system's open worker sessions for the key/value workloads.
pub trait KvWorkers: Send {
    /// Runs one window on the first `n` sessions.
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<KvWindow, String>>;
}

/// One key/value window: what was measured, and how many inserts the system acknowledged
/// (checked afterwards against the rows it holds).
#[derive(Debug)]
pub struct KvWindow {
    pub outcome: WindowOutcome,
    pub inserts_acknowledged: u64,
}

/// One connection's measured key/value operations, for async clients.
pub trait KvSession: Send + 'static {
    fn insert(&mut self, key: i64, value: &str)
    -> impl Future<Output = Result<(), OpError>> + Send;
    /// Reads one row by key and returns the length of its value.
    fn read(&mut self, key: i64) -> impl Future<Output = Result<usize, OpError>> + Send;
}

/// The same for synchronous clients, each driven from its own thread.
pub trait BlockingKvSession: Send + 'static {
    fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError>;
    fn read(&mut self, key: i64) -> Result<usize, OpError>;
}

/// Where a target lives when nothing else is said: the embedded SQLite database in the results folder.
pub const DEFAULT_TARGET: &str = "sqlite";

/// Connects to the system `spec` names. `results_dir` holds the embedded databases.
pub async fn open(spec: &TargetSpec, results_dir: &Path) -> Result<Box<dyn Target>, TargetError> {
    match spec.scheme() {
        "sqlite" => sqlite::SqliteTarget::open(spec, results_dir).await,
        "postgres" | "postgresql" => postgres::PostgresTarget::open(spec).await,
        "mysql" | "mariadb" => mysql::MysqlTarget::open(spec).await,
        "mongodb" | "mongodb+srv" => mongodb::MongoTarget::open(spec).await,
        "cql" | "cassandra" => cql::CqlTarget::open(spec).await,
        "couchdb" => couchdb::CouchTarget::open(spec).await,
        other => Err(TargetError::Url {
            url: spec.url_redacted(),
            message: format!(
                "unknown scheme `{other}`; use sqlite[:PATH], postgres://…, mysql://… (mariadb://…), \
                 mongodb://…, cql://… (cassandra://…) or couchdb://…"
            ),
        }),
    }
}

/// The credentials and `host:port` of a URL's authority (`[user[:password]@]host[:port]`),
/// with `default_port` when none is given.
pub fn split_authority(
    authority: &str,
    default_port: u16,
) -> Result<(Option<(String, String)>, String), String> {
    let (user, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let (name, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            (Some((name.to_owned(), password.to_owned())), host)
        }
        None => (None, authority),
    };
    if host.is_empty() {
        return Err("the URL names no host".into());
    }
    let has_port = host
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
    let host_port = if has_port {
        host.to_owned()
    } else {
        format!("{host}:{default_port}")
    };
    Ok((user, host_port))
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

    #[test]
    fn loopback_hosts_are_local() {
        for host in [
            "127.0.0.1",
            "localhost",
            "::1",
            "[::1]",
            "/run/postgresql",
            "",
        ] {
            assert!(is_local_host(host), "{host}");
        }
        for host in ["10.0.0.5", "db.example.com"] {
            assert!(!is_local_host(host), "{host}");
        }
    }

    #[test]
    fn authorities_give_credentials_and_a_port() {
        assert_eq!(
            split_authority("u:p@h:1", 9).unwrap(),
            (Some(("u".into(), "p".into())), "h:1".into())
        );
        assert_eq!(split_authority("h", 9).unwrap(), (None, "h:9".into()));
        assert!(split_authority("u@", 9).is_err());
    }

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("redis://127.0.0.1:6379").unwrap();
        let error = open(&spec, Path::new("/tmp"))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("postgres://"), "{error}");
    }
}
