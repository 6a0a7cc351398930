//! The systems sql-bench drives, one file each. A target knows its engine (how to connect,
//! create, load, verify and query) and nothing of the suite that calls it. Adding a system is
//! adding a file here and one line in [`open`].

pub mod couchdb;
pub mod cql;
pub mod docs;
pub mod marker;
pub mod mongodb;
pub mod mysql;
pub mod postgres;
pub mod sql;
pub mod sqlite;
pub mod ycsb;

use std::collections::BTreeMap;

use common::options::TargetSpec;
use common::pool::BoxFuture;
pub use common::reach::{Reach, TlsState};
pub use common::target::{
    Described, Identified, Identity, TargetError, host_of, is_local_host, location_of_host,
    location_of_url, op_error,
};

use crate::durability::{Check, Durability};
use crate::replication::ClusterEvidence;
use crate::session::KvWorkers;
pub use docs::DocTarget;
pub use marker::Marked;
pub use ycsb::YcsbTarget;

/// What a system reported about itself, and how it compares with the durability asked for.
#[derive(Debug, Clone, Default)]
pub struct Description {
    pub system: Described,
    /// Each setting that does not give the asked-for durability, as `setting=value (needs …)`.
    pub mismatches: Vec<String>,
    /// For an engine whose cluster it can read ([`Target::read_cluster`]): every check of its
    /// own settings against the durability asked for (`mismatches` holds the failed ones).
    pub settings_checks: Option<Vec<Check>>,
}

/// A two-column key/value table (`k BIGINT PRIMARY KEY, v VARCHAR(value_len)`), by logical name;
/// each target maps the name into its own namespace.
#[derive(Debug, Clone, Copy)]
pub struct KvTable {
    pub name: &'static str,
    pub value_len: usize,
}

/// The control path of a system: everything but the measured operations. Every engine serves
/// the app suite too ([`DocTarget`], its supertrait: a `dyn Target` is a `dyn DocTarget`).
pub trait Target: DocTarget {
    /// The TLS of its connections; `None` for an embedded system.
    fn tls(&self) -> Option<TlsState> {
        None
    }

    /// Version and settings, read from the system itself, checked against `durability`.
    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>>;

    /// Reads what its cluster reports (on a connection of its own) and checks it against
    /// `durability`; `replicas` are the URLs given for it, each asked for its own status. A
    /// replica that cannot be reached is a failed check, not an error. Only engines that
    /// return [`Description::settings_checks`] are asked.
    fn read_cluster<'a>(
        &'a self,
        replicas: &'a [TargetSpec],
        durability: Durability,
    ) -> BoxFuture<'a, Result<ClusterEvidence, TargetError>> {
        let _ = (replicas, durability);
        Box::pin(async { Ok(ClusterEvidence::default()) })
    }

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
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            for table in tables {
                self.ensure_ours_or_absent(table.name).await?;
            }
            Ok(())
        })
    }

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
    fn drop_kv(&mut self, table: KvTable) -> BoxFuture<'_, Result<(), TargetError>> {
        self.drop_own(table.name)
    }

    /// Opens `size` worker sessions reading `read` and writing `write`, before any clock starts.
    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>>;

    /// The YCSB suite's control path of this engine, when it has one.
    fn ycsb(&mut self) -> Option<&mut dyn YcsbTarget> {
        None
    }
}

/// Where a target lives when nothing else is said: the embedded SQLite database in the results folder.
pub const DEFAULT_TARGET: &str = "sqlite";

/// The schemes of engines that live inside the client's process.
pub const EMBEDDED_SCHEMES: &[&str] = &["sqlite"];

/// Connects to the system `spec` names, as `reach` says (secrets, TLS, the results folder).
pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
    match spec.scheme() {
        "sqlite" => sqlite::SqliteTarget::open(spec, &reach.results_dir).await,
        "postgres" | "postgresql" => postgres::PostgresTarget::open(spec, reach).await,
        "mysql" | "mariadb" => mysql::MysqlTarget::open(spec, reach).await,
        "mongodb" | "mongodb+srv" => mongodb::MongoTarget::open(spec, reach).await,
        "cql" | "cassandra" => cql::CqlTarget::open(spec, reach).await,
        "couchdb" => couchdb::CouchTarget::open(spec, reach).await,
        _ => Err(TargetError::unknown_scheme(
            spec,
            "sqlite[:PATH], postgres://…, mysql://… (mariadb://…), mongodb://…, cql://… \
             (cassandra://…) or couchdb://…",
        )),
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

#[cfg(test)]
mod tests {
    use super::*;
    use common::testing::refusal;

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
        let error = refusal(open(&spec, &Reach::default()).await);
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("postgres://"), "{error}");
    }
}
