//! Cassandra and ScyllaDB through the `scylla` driver (CQL): one session with one connection
//! per worker, every statement at the consistency the configuration maps to. fairbench's
//! tables live in its own keyspace (`fairbench` unless the URL names another `fairbench…`
//! one) and carry a table comment that marks them as fairbench's.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::tls::rustls::ClientConfig;
use scylla::client::PoolSize;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::deserialize::row::DeserializeRow;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::response::PagingState;
use scylla::serialize::row::SerializeRow;
use scylla::statement::Consistency;
use scylla::statement::prepared::PreparedStatement;

mod docs;
mod durability;
mod tls;
mod ycsb;

use super::{
    Described, Description, Identity, KvTable, Marked, Reach, Target, TargetError, TlsState,
    location_of_url, op_error, split_authority,
};
use crate::durability::Durability;
use crate::session::{KvSession, KvWorkers, async_workers};
use durability::{check, requirement};

const DEFAULT_KEYSPACE: &str = "fairbench";
const DEFAULT_PORT: u16 = 9042;
const MARKER: &str = "created by fairbench";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows per page when paging through a result (seed 003's adapter used 5,000).
const PAGE_ROWS: i32 = 5_000;

/// Where a CQL target lives, from `cql://[user:password@]host[:port][/keyspace][?count=paged]`
/// (TLS parameters removed), and the TLS every session connects with.
#[derive(Debug, Clone)]
struct Address {
    host_port: String,
    user: Option<(String, String)>,
    keyspace: String,
    /// Count by paging from the start, as an application does once its `COUNT(*)` times out.
    count_paged: bool,
    /// The system's one TLS configuration; `None` = plaintext.
    tls: Option<Arc<ClientConfig>>,
}

impl Address {
    /// The host, without the port (and without the brackets of an IPv6 literal).
    fn host(&self) -> &str {
        let host = self.host_port.rsplit_once(':').map_or("", |(host, _)| host);
        host.trim_start_matches('[').trim_end_matches(']')
    }
}

fn parse_address(url: &str) -> Result<Address, String> {
    let rest = url.split_once("://").map(|(_, rest)| rest).ok_or(
        "a CQL target looks like cql://host:9042 or cassandra://user:password@host:9042/fairbench",
    )?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (user, host_port) = split_authority(authority, DEFAULT_PORT)?;
    let keyspace = if path.is_empty() {
        DEFAULT_KEYSPACE
    } else {
        path
    };
    if !keyspace.starts_with(DEFAULT_KEYSPACE)
        || !keyspace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!(
            "keyspace `{keyspace}`: fairbench writes only into its own keyspace, named fairbench or fairbench_…"
        ));
    }
    let mut count_paged = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair {
            "count=paged" => count_paged = true,
            "count=server" => count_paged = false,
            other => return Err(format!("unknown option `{other}` (there is count=paged)")),
        }
    }
    Ok(Address {
        host_port,
        user,
        keyspace: keyspace.to_owned(),
        count_paged,
        tls: None,
    })
}

pub struct CqlTarget {
    identity: Identity,
    address: Address,
    /// The configuration `describe` was asked for; fairbench's keyspace is created for it.
    durability: Durability,
    consistency: Consistency,
    control: Arc<Session>,
    tls: TlsState,
}

/// Whether the connection is gone (as opposed to the server refusing one request).
fn is_lost(e: &ExecutionError) -> bool {
    matches!(
        e,
        ExecutionError::ConnectionPoolError(_)
            | ExecutionError::EmptyPlan
            | ExecutionError::LastAttemptError(RequestAttemptError::BrokenConnectionError(_))
    )
}

/// Whether the server gave up on a read at its own timeout (`read_request_timeout`, …).
fn is_server_timeout(e: &ExecutionError) -> bool {
    matches!(
        e,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::ReadTimeout { .. },
            _
        ))
    )
}

/// Opens a session with one connection, every statement at `consistency`; over TLS when the
/// address carries a configuration (the handshake is part of connecting, never of an operation).
async fn connect(
    address: &Address,
    identity: &Identity,
    consistency: Consistency,
) -> Result<Session, TargetError> {
    let profile = ExecutionProfile::builder()
        .consistency(consistency)
        .request_timeout(None)
        .build()
        .into_handle();
    let mut builder = SessionBuilder::new()
        .known_node(&address.host_port)
        .connection_timeout(CONNECT_TIMEOUT)
        .pool_size(PoolSize::PerHost(NonZeroUsize::MIN))
        .fetch_schema_metadata(false)
        .default_execution_profile_handle(profile);
    builder = tls::with_tls(builder, address.tls.as_ref());
    if let Some((user, password)) = &address.user {
        builder = builder.user(user, password);
    }
    match tokio::time::timeout(CONNECT_TIMEOUT * 2, builder.build()).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) => {
            let message = match &address.tls {
                Some(_) => tls::explain(&e, address.host()).unwrap_or_else(|| {
                    format!("{e} — is the server running? (scripts/services start)")
                }),
                None => format!(
                    "{e} — is the server running (scripts/services start), and does this port \
                     take plaintext? (a TLS port needs sslmode=verify-full and cacert=)"
                ),
            };
            Err(identity.connect_error(message))
        }
        Err(_) => Err(identity.connect_error(format!(
            "no answer within {}s",
            CONNECT_TIMEOUT.as_secs() * 2
        ))),
    }
}

/// Every row of an unpaged statement, typed.
async fn rows<R>(session: &Session, cql: &str, values: impl SerializeRow) -> Result<Vec<R>, String>
where
    R: for<'f> DeserializeRow<'f, 'f>,
{
    let result = session
        .query_unpaged(cql, values)
        .await
        .map_err(|e| e.to_string())?;
    let rows = result.into_rows_result().map_err(|e| e.to_string())?;
    rows.rows::<R>()
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<R>, _>>()
        .map_err(|e| e.to_string())
}

/// A read that failed: the driver's error, a statement the server would not prepare, or a
/// row that did not decode.
#[derive(Debug, thiserror::Error)]
enum CqlError {
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    #[error(transparent)]
    Prepare(#[from] scylla::errors::PrepareError),
    #[error("a row did not decode: {0}")]
    Decode(String),
}

fn decode(e: impl std::fmt::Display) -> CqlError {
    CqlError::Decode(e.to_string())
}

/// Pages through a prepared statement's result, handing each row to `each`.
async fn each_row<R, V>(
    session: &Session,
    statement: &PreparedStatement,
    values: &V,
    mut each: impl FnMut(R),
) -> Result<(), CqlError>
where
    R: for<'f> DeserializeRow<'f, 'f>,
    V: SerializeRow + ?Sized,
{
    let mut paging = PagingState::start();
    loop {
        let (result, next) = session
            .execute_single_page(statement, values, paging)
            .await?;
        let page = result.into_rows_result().map_err(decode)?;
        for row in page.rows::<R>().map_err(decode)? {
            each(row.map_err(decode)?);
        }
        match next.into_paging_control_flow() {
            std::ops::ControlFlow::Continue(state) => paging = state,
            std::ops::ControlFlow::Break(()) => return Ok(()),
        }
    }
}

impl CqlTarget {
    /// `cql://…` or `cassandra://…`; the password from its file or variable when the URL has
    /// none. TLS with `sslmode=` (and `cacert=`), see [`tls`]: probed first, so a certificate
    /// that does not verify fails at once in one line.
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let url = common::tls::strip_params(&reach.url(spec));
        let mut address = parse_address(&url).map_err(|message| TargetError::Url {
            url: spec.url_redacted(),
            message: common::redact::redact_text(&message),
        })?;
        let (tls, config) = tls::open(spec, reach).await?;
        address.tls = config;
        let identity = Identity::of(spec, "cql");
        let durability = Durability::C0;
        let consistency = requirement(durability).consistency;
        let control = Arc::new(connect(&address, &identity, consistency).await?);
        Ok(Box::new(CqlTarget {
            identity,
            address,
            durability,
            consistency,
            control,
            tls,
        }))
    }

    fn error(&self, e: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(e)
    }

    fn keyspace(&self) -> &str {
        &self.address.keyspace
    }

    fn physical(&self, name: &str) -> String {
        format!("{}.{name}", self.keyspace())
    }

    async fn rows<R>(&self, cql: &str, values: impl SerializeRow) -> Result<Vec<R>, TargetError>
    where
        R: for<'f> DeserializeRow<'f, 'f>,
    {
        rows(&self.control, cql, values)
            .await
            .map_err(|e| self.error(e))
    }

    async fn execute(&self, cql: &str) -> Result<(), TargetError> {
        self.control
            .query_unpaged(cql, ())
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// Replication and `durable_writes` of fairbench's keyspace, when it exists.
    async fn keyspace_settings(
        &self,
    ) -> Result<Option<(BTreeMap<String, String>, bool)>, TargetError> {
        let found: Vec<(BTreeMap<String, String>, bool)> = self
            .rows(
                "SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = ?",
                (self.keyspace(),),
            )
            .await?;
        Ok(found.into_iter().next())
    }

    /// Creates fairbench's keyspace when it is missing, with the replication the configuration
    /// asks for and the commit log on.
    async fn ensure_keyspace(&self, durability: Durability) -> Result<(), TargetError> {
        let factor = requirement(durability).replication_factor;
        self.execute(&format!(
            "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = \
             {{'class': 'SimpleStrategy', 'replication_factor': {factor}}} AND durable_writes = true",
            self.keyspace()
        ))
        .await
    }

    /// Drops the table when it is fairbench's, then creates it with `columns` (CQL), marked.
    async fn recreate(&mut self, name: &str, columns: &str) -> Result<(), TargetError> {
        self.ensure_ours_or_absent(name).await?;
        self.ensure_keyspace(self.durability).await?;
        let table = self.physical(name);
        self.execute(&format!("DROP TABLE IF EXISTS {table}"))
            .await?;
        self.execute(&format!(
            "CREATE TABLE {table} ({columns}) WITH comment = '{MARKER}'"
        ))
        .await
    }

    /// The server's own settings, read from its virtual tables: `system_views.settings`
    /// (Cassandra 4+) or `system.config` (ScyllaDB).
    async fn server_settings(&self, names: &[&str]) -> BTreeMap<String, String> {
        let mut found = BTreeMap::new();
        for name in names {
            let cassandra: Result<Vec<(String, Option<String>)>, _> = self
                .rows(
                    "SELECT name, value FROM system_views.settings WHERE name = ?",
                    (*name,),
                )
                .await;
            let rows = match cassandra {
                Ok(rows) => rows,
                Err(_) => self
                    .rows(
                        "SELECT name, value FROM system.config WHERE name = ?",
                        (*name,),
                    )
                    .await
                    .unwrap_or_default(),
            };
            for (key, value) in rows {
                found.insert(key, value.unwrap_or_default().trim_matches('"').to_owned());
            }
        }
        found
    }

    /// Engine and version as the server reports them.
    async fn version(&self) -> Result<(String, String), TargetError> {
        let local: Vec<(Option<String>, Option<String>)> = self
            .rows(
                "SELECT release_version, cql_version FROM system.local WHERE key = 'local'",
                (),
            )
            .await?;
        let (release, cql) = local.into_iter().next().unwrap_or((None, None));
        let (release, cql) = (release.unwrap_or_default(), cql.unwrap_or_default());
        let scylla: Result<Vec<(Option<String>,)>, _> = self
            .rows(
                "SELECT version FROM system.versions WHERE key = 'local'",
                (),
            )
            .await;
        Ok(match scylla {
            Ok(rows) if !rows.is_empty() => (
                "scylladb".into(),
                format!(
                    "ScyllaDB {}, CQL {cql} (Cassandra-compat {release})",
                    rows[0].0.clone().unwrap_or_default()
                ),
            ),
            _ => (
                "cassandra".into(),
                format!("Apache Cassandra {release}, CQL {cql}"),
            ),
        })
    }
}

impl Marked for CqlTarget {
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
        Box::pin(async move {
            let found: Vec<(Option<String>,)> = self
                .rows(
                    "SELECT comment FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
                    (self.keyspace(), name),
                )
                .await?;
            Ok(found
                .into_iter()
                .next()
                .map(|(comment,)| comment.as_deref() == Some(MARKER)))
        })
    }

    fn object(&self, name: &str) -> String {
        format!("table {}", self.physical(name))
    }

    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.execute(&format!("DROP TABLE {}", self.physical(name)))
                .await
        })
    }
}

common::identified!(CqlTarget);

impl Target for CqlTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
    }

    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let (kind, version) = self.version().await?;
            self.durability = durability;
            self.consistency = requirement(durability).consistency;
            let mut settings = self
                .server_settings(&[
                    "commitlog_sync",
                    "commitlog_sync_period",
                    "commitlog_sync_group_window",
                    "read_request_timeout",
                    "range_request_timeout",
                ])
                .await;
            let peers: Vec<(std::net::IpAddr,)> =
                self.rows("SELECT peer FROM system.peers", ()).await?;
            let keyspace = self.keyspace_settings().await?;
            let mismatches = check(durability, &settings, peers.len(), keyspace.as_ref());
            settings.insert(
                "consistency".into(),
                format!("{:?} (every statement)", self.consistency),
            );
            settings.insert(
                "document_mapping".into(),
                "app records: each top-level scalar field becomes a typed column on the first insert that carries it (ALTER TABLE ADD, inside that batch's time)".into(),
            );
            settings.insert("system.peers".into(), peers.len().to_string());
            settings.insert(
                "keyspace".into(),
                match &keyspace {
                    Some((replication, durable)) => format!(
                        "{} {replication:?}, durable_writes={durable}",
                        self.keyspace()
                    ),
                    None => format!(
                        "{} (created with SimpleStrategy, replication_factor {}, durable_writes=true)",
                        self.keyspace(),
                        requirement(durability).replication_factor
                    ),
                },
            );
            Ok(Description {
                system: Described {
                    kind,
                    version,
                    settings,
                    data_dir: None,
                    location: location_of_url(&self.identity.url_redacted),
                },
                mismatches,
                settings_checks: None,
            })
        })
    }

    fn create_kv<'a>(
        &'a mut self,
        table: KvTable,
        rows: &'a [(i64, String)],
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.recreate(table.name, "k bigint PRIMARY KEY, v text")
                .await?;
            let insert = self
                .control
                .prepare(format!(
                    "INSERT INTO {} (k, v) VALUES (?, ?)",
                    self.physical(table.name)
                ))
                .await
                .map_err(|e| self.error(e))?;
            for (k, v) in rows {
                self.control
                    .execute_unpaged(&insert, (k, v))
                    .await
                    .map_err(|e| self.error(e))?;
            }
            Ok(())
        })
    }

    fn verify_kv<'a>(
        &'a mut self,
        table: KvTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let keys: Vec<(String,)> = self
                .rows(
                    "SELECT column_name FROM system_schema.columns \
                     WHERE keyspace_name = ? AND table_name = ? AND kind = 'partition_key' ALLOW FILTERING",
                    (self.keyspace(), table.name),
                )
                .await?;
            if keys.len() != 1 || keys[0].0 != "k" {
                return Err(self.error(format!(
                    "{} has no partition key on k (system_schema.columns shows {keys:?})",
                    self.physical(table.name)
                )));
            }
            Ok(BTreeMap::from([(
                format!("{}.primary_key", table.name),
                "k (partition key, system_schema.columns)".to_owned(),
            )]))
        })
    }

    fn read_kv(
        &mut self,
        table: KvTable,
    ) -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>> {
        Box::pin(async move {
            let select = self
                .control
                .prepare(format!("SELECT k, v FROM {}", self.physical(table.name)))
                .await
                .map_err(|e| self.error(e))?;
            let mut found: Vec<(i64, String)> = Vec::new();
            each_row(&self.control, &select, &(), |row| found.push(row))
                .await
                .map_err(|e| self.error(e))?;
            // CQL returns rows in token order; the check compares in key order.
            found.sort_unstable();
            Ok(found)
        })
    }

    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let counted: Vec<(i64,)> = self
                .rows(
                    &format!(
                        "SELECT COUNT(*) FROM {} WHERE k >= ? AND k < ? ALLOW FILTERING",
                        self.physical(table.name)
                    ),
                    (low, high),
                )
                .await?;
            Ok(counted.first().map_or(0, |c| c.0 as u64))
        })
    }

    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>> {
        let (address, identity, consistency) = (
            self.address.clone(),
            self.identity.clone(),
            self.consistency,
        );
        let read_cql: Arc<str> =
            format!("SELECT v FROM {} WHERE k = ?", self.physical(read.name)).into();
        let write_cql: Arc<str> = format!(
            "INSERT INTO {} (k, v) VALUES (?, ?)",
            self.physical(write.name)
        )
        .into();
        let connector: Connector<CqlSession> = Arc::new(move || {
            let (address, identity) = (address.clone(), identity.clone());
            let (read_cql, write_cql) = (read_cql.clone(), write_cql.clone());
            Box::pin(async move {
                let session = connect(&address, &identity, consistency)
                    .await
                    .map_err(|e| e.to_string())?;
                let prepare = |cql: Arc<str>| {
                    let (session, identity) = (&session, &identity);
                    async move {
                        session
                            .prepare(cql.as_ref())
                            .await
                            .map_err(|e| identity.query_error(e).to_string())
                    }
                };
                let read = prepare(read_cql).await?;
                let insert = prepare(write_cql).await?;
                Ok(CqlSession {
                    session,
                    read,
                    insert,
                })
            })
        });
        async_workers(size, connector)
    }

    fn ycsb(&mut self) -> Option<&mut dyn super::YcsbTarget> {
        Some(self)
    }
}

/// A worker's session (one connection), opened on the lane it runs on.
struct CqlSession {
    session: Session,
    read: PreparedStatement,
    insert: PreparedStatement,
}

fn cql_op_error(e: ExecutionError) -> OpError {
    op_error(is_lost(&e), e)
}

impl KvSession for CqlSession {
    async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        self.session
            .execute_unpaged(&self.insert, (key, value))
            .await
            .map(drop)
            .map_err(cql_op_error)
    }

    async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        let result = self
            .session
            .execute_unpaged(&self.read, (key,))
            .await
            .map_err(cql_op_error)?;
        let rows = result.into_rows_result().map_err(failed)?;
        match rows.maybe_first_row::<(&str,)>() {
            Ok(Some((value,))) => Ok(value.len()),
            Ok(None) => Err(OpError::Failed(format!("key {key} not found"))),
            Err(e) => Err(failed(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_node_the_keyspace_and_the_count_method() {
        let a = parse_address("cql://127.0.0.1").unwrap();
        assert_eq!(a.host_port, "127.0.0.1:9042");
        assert_eq!(a.keyspace, "fairbench");
        assert!(!a.count_paged && a.user.is_none() && a.tls.is_none());
        assert_eq!(a.host(), "127.0.0.1");
        let b = parse_address("cassandra://u:p@127.0.0.1:19042/fairbench_rf3?count=paged").unwrap();
        assert_eq!(b.host_port, "127.0.0.1:19042");
        assert_eq!(b.user, Some(("u".into(), "p".into())));
        assert_eq!(b.keyspace, "fairbench_rf3");
        assert!(b.count_paged);
        assert!(
            parse_address("cql://127.0.0.1/system")
                .unwrap_err()
                .contains("own keyspace")
        );
        assert!(
            parse_address("cql://127.0.0.1/?x=1")
                .unwrap_err()
                .contains("unknown option")
        );
    }
}
