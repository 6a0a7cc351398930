//! MariaDB and MySQL through mysql_async: one connection per worker over TCP (the client's
//! switch to a Unix socket is turned off, so every server is reached the same way), statements
//! prepared before the window opens. fairbench's tables live in the `fairbench` database and
//! carry a table comment that marks them as fairbench's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::BoxFuture;
use common::results::Location;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Statement};

pub mod cluster;
mod docs;
mod tls;
mod ycsb;

use super::{
    Described, Description, Identity, KvTable, Marked, Reach, Target, TargetError, TlsState,
    location_of_host, op_error,
};
use crate::durability::Durability;
use crate::replication::ClusterEvidence;
use crate::session::{KvSession, KvWorkers, Routed, async_workers};

const DATABASE: &str = "fairbench";
const MARKER: &str = "created by fairbench";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows per multi-row INSERT when loading a table.
const LOAD_BATCH: usize = 500;

pub struct MysqlTarget {
    identity: Identity,
    opts: Opts,
    control: Conn,
    /// Where workers send their point reads instead of the primary (`--read-from replicas`).
    read_replicas: Vec<Opts>,
    tls: tls::MyTls,
    /// How replicas named later are reached (their passwords, `--insecure-skip-verify`).
    reach: Reach,
}

/// mysql_async keeps up to 128 I/O buffers of up to 4 MiB each for reuse
/// (`MYSQL_ASYNC_BUFFER_POOL_CAP`, read once, from the environment only). The app's batches of
/// 5,000 documents are 3 MB statements, and that pool held 214 MiB of the client's memory at
/// 3.5 million rows, against 37 MiB for PostgreSQL; with 8 buffers the same 100,000-row run
/// peaks at 49 MiB instead of 131 MiB, in the same time. A value the user set is kept. Call
/// it before any other thread exists.
#[allow(unsafe_code)]
pub fn bound_buffer_pool() {
    const CAP: &str = "MYSQL_ASYNC_BUFFER_POOL_CAP";
    if std::env::var_os(CAP).is_none() {
        // SAFETY: called first thing in `main`, while the process has one thread.
        unsafe { std::env::set_var(CAP, "8") };
    }
}

fn physical(name: &str) -> String {
    format!("{DATABASE}.{name}")
}

/// The connection settings of a `mysql://` (or `mariadb://`) URL, always over TCP, with the
/// password from its file or variable when the URL has none and the TLS `settings` ask for.
pub(crate) fn parse_opts(spec: &TargetSpec, reach: &Reach) -> Result<Opts, TargetError> {
    build_opts(spec, reach, &tls::MyTls::unprobed(reach.tls(spec)?))
}

fn build_opts(spec: &TargetSpec, reach: &Reach, tls: &tls::MyTls) -> Result<Opts, TargetError> {
    let url = common::tls::strip_params(&reach.url(spec)).replacen("mariadb://", "mysql://", 1);
    let parsed = Opts::from_url(&url).map_err(|e| TargetError::Url {
        url: spec.url_redacted(),
        message: common::redact::redact_text(&e.to_string()),
    })?;
    Ok(OptsBuilder::from_opts(parsed)
        .prefer_socket(false)
        .ssl_opts(tls.ssl_opts()?)
        .into())
}

pub(crate) async fn connect(opts: &Opts, identity: &Identity) -> Result<Conn, TargetError> {
    let failure = |message: String| identity.connect_error(message);
    match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts.clone())).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => {
            if let Some(tls) = common::tls::explain(&e, opts.ip_or_hostname()) {
                return Err(failure(tls.to_string()));
            }
            let text = e.to_string();
            let hint = if text.contains("refused") {
                " — is the server running? (scripts/services start)"
            } else if text.contains("1045") && opts.ssl_opts().is_none() {
                " — the server may accept only TLS (ssl-mode=REQUIRED, VERIFY_CA or VERIFY_IDENTITY)"
            } else {
                ""
            };
            Err(failure(format!("{text}{hint}")))
        }
        Err(_) => Err(failure(format!(
            "no answer within {}s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

impl MysqlTarget {
    /// `mysql://user:password@host:port/db` or the same with `mariadb://`.
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let settings = reach.tls(spec)?;
        // The URL is checked before any handshake (a bad port is the URL's fault, not the
        // network's).
        build_opts(spec, reach, &tls::MyTls::unprobed(settings.clone()))?;
        let tls = tls::MyTls::probe(settings, &spec.url).await?;
        let opts = build_opts(spec, reach, &tls)?;
        let identity = Identity {
            name: spec
                .name
                .clone()
                .unwrap_or_else(|| spec.scheme().to_owned()),
            kind: "mysql".into(),
            url_redacted: spec.url_redacted(),
        };
        let control = connect(&opts, &identity).await?;
        Ok(Box::new(MysqlTarget {
            identity,
            opts,
            control,
            read_replicas: Vec::new(),
            tls,
            reach: reach.clone(),
        }))
    }

    fn error(&self, e: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(e)
    }

    async fn variables(&mut self, names: &[&str]) -> Result<BTreeMap<String, String>, TargetError> {
        let list = names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(",");
        let rows: Vec<(String, String)> = self
            .control
            .query(format!(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({list})"
            ))
            .await
            .map_err(|e| self.identity.query_error(e))?;
        Ok(rows.into_iter().collect())
    }
}

impl Marked for MysqlTarget {
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
        Box::pin(async move {
            let comment: Option<String> = self
                .control
                .exec_first(
                    "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                    (DATABASE, name),
                )
                .await
                .map_err(|e| self.identity.query_error(e))?;
            Ok(comment.map(|c| c == MARKER))
        })
    }

    fn object(&self, name: &str) -> String {
        format!("table {}", physical(name))
    }

    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.control
                .query_drop(format!("DROP TABLE {}", physical(name)))
                .await
                .map_err(|e| self.error(e))
        })
    }
}

common::identified!(MysqlTarget);

impl Target for MysqlTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(TlsState {
            settings: self.tls.settings.clone(),
            negotiated: self.tls.negotiated.clone(),
        })
    }

    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let version: String = self
                .control
                .query_first("SELECT VERSION()")
                .await
                .map_err(|e| self.error(e))?
                .unwrap_or_default();
            let mut settings = self
                .variables(&[
                    "innodb_flush_log_at_trx_commit",
                    "log_bin",
                    "sync_binlog",
                    "rpl_semi_sync_master_enabled",
                    "default_storage_engine",
                    "datadir",
                ])
                .await?;
            settings.insert("transport".into(), "tcp".into());
            let kind = if version.contains("MariaDB") {
                "mariadb"
            } else {
                "mysql"
            };
            let location = location_of_host(self.opts.ip_or_hostname());
            let data_dir = settings
                .remove("datadir")
                .filter(|_| location == Location::Local)
                .map(PathBuf::from);
            let checks = cluster::settings_checks(&settings, durability);
            let mismatches = crate::durability::mismatches(&checks);
            let pretty = match kind {
                "mariadb" => format!("MariaDB {version}"),
                _ => format!("MySQL {version}"),
            };
            Ok(Description {
                system: Described {
                    kind: kind.into(),
                    version: pretty,
                    settings,
                    data_dir,
                    location,
                },
                mismatches,
                settings_checks: Some(checks),
            })
        })
    }

    fn read_cluster<'a>(
        &'a self,
        replicas: &'a [TargetSpec],
        durability: Durability,
    ) -> BoxFuture<'a, Result<ClusterEvidence, TargetError>> {
        let (opts, identity) = (self.opts.clone(), self.identity.clone());
        let reach = self.reach.clone();
        Box::pin(
            async move { cluster::verify(&opts, &identity, replicas, durability, &reach).await },
        )
    }

    fn route_reads(&mut self, replicas: &[TargetSpec]) -> Result<(), TargetError> {
        self.read_replicas = replicas
            .iter()
            .map(|replica| parse_opts(replica, &self.reach))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    fn create_kv<'a>(
        &'a mut self,
        table: KvTable,
        rows: &'a [(i64, String)],
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(table.name).await?;
            let name = physical(table.name);
            for ddl in [
                format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"),
                format!("DROP TABLE IF EXISTS {name}"),
                format!(
                    "CREATE TABLE {name} (k BIGINT PRIMARY KEY, v VARCHAR({}) NOT NULL) ENGINE=InnoDB COMMENT='{MARKER}'",
                    table.value_len
                ),
            ] {
                self.control
                    .query_drop(ddl)
                    .await
                    .map_err(|e| self.error(e))?;
            }
            for chunk in rows.chunks(LOAD_BATCH) {
                let placeholders = vec!["(?, ?)"; chunk.len()].join(",");
                let params: Vec<mysql_async::Value> = chunk
                    .iter()
                    .flat_map(|(k, v)| [(*k).into(), v.as_str().into()])
                    .collect();
                self.control
                    .exec_drop(
                        format!("INSERT INTO {name} (k, v) VALUES {placeholders}"),
                        params,
                    )
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
            let engine: Option<String> = self
                .control
                .exec_first(
                    "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                    (DATABASE, table.name),
                )
                .await
                .map_err(|e| self.error(e))?;
            let key: Option<String> = self
                .control
                .exec_first(
                    "SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) FROM information_schema.STATISTICS
                      WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY'",
                    (DATABASE, table.name),
                )
                .await
                .map_err(|e| self.error(e))?;
            if key.as_deref() != Some("k") {
                return Err(self.error(format!(
                    "{} has no primary key on k (information_schema.STATISTICS shows {key:?})",
                    physical(table.name)
                )));
            }
            if engine.as_deref() != Some("InnoDB") {
                return Err(self.error(format!(
                    "{} uses engine {engine:?}, not InnoDB: its commits are not durable the same way",
                    physical(table.name)
                )));
            }
            Ok(BTreeMap::from([
                (
                    format!("{}.primary_key", table.name),
                    "k (information_schema.STATISTICS)".to_owned(),
                ),
                (format!("{}.engine", table.name), "InnoDB".to_owned()),
            ]))
        })
    }

    fn read_kv(
        &mut self,
        table: KvTable,
    ) -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>> {
        Box::pin(async move {
            self.control
                .query(format!(
                    "SELECT k, v FROM {} ORDER BY k",
                    physical(table.name)
                ))
                .await
                .map_err(|e| self.error(e))
        })
    }

    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let count: Option<u64> = self
                .control
                .exec_first(
                    format!(
                        "SELECT COUNT(*) FROM {} WHERE k >= ? AND k < ?",
                        physical(table.name)
                    ),
                    (low, high),
                )
                .await
                .map_err(|e| self.error(e))?;
            Ok(count.unwrap_or(0))
        })
    }

    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>> {
        let identity = self.identity.clone();
        let read_sql: Arc<str> =
            format!("SELECT v FROM {} WHERE k = ?", physical(read.name)).into();
        let write_sql: Arc<str> =
            format!("INSERT INTO {} (k, v) VALUES (?, ?)", physical(write.name)).into();
        let connector = Routed::connector(
            self.opts.clone(),
            self.read_replicas.clone(),
            move |opts: Opts| {
                let (identity, read_sql, write_sql) =
                    (identity.clone(), read_sql.clone(), write_sql.clone());
                Box::pin(async move { open_session(&opts, &identity, &read_sql, &write_sql).await })
            },
        );
        async_workers(size, connector)
    }

    fn ycsb(&mut self) -> Option<&mut dyn super::YcsbTarget> {
        Some(self)
    }
}

/// Opens one worker connection and prepares its statements, before any clock starts.
async fn open_session(
    opts: &Opts,
    identity: &Identity,
    read_sql: &str,
    write_sql: &str,
) -> Result<MysqlSession, String> {
    let mut conn = connect(opts, identity).await.map_err(|e| e.to_string())?;
    let read = conn
        .prep(read_sql)
        .await
        .map_err(|e| identity.query_error(e).to_string())?;
    let insert = conn
        .prep(write_sql)
        .await
        .map_err(|e| identity.query_error(e).to_string())?;
    Ok(MysqlSession {
        killer: Killer::of(&conn, opts, identity),
        conn,
        read,
        insert,
    })
}

struct MysqlSession {
    conn: Conn,
    read: Statement,
    insert: Statement,
    killer: Killer,
}

/// How a worker's statement that passed the ceiling is stopped on the server: the server's id
/// of the worker's connection, and how to reach the server for `KILL QUERY`.
struct Killer {
    id: u32,
    opts: Opts,
    identity: Identity,
}

impl Killer {
    fn of(conn: &Conn, opts: &Opts, identity: &Identity) -> Killer {
        Killer {
            id: conn.id(),
            opts: opts.clone(),
            identity: identity.clone(),
        }
    }

    /// [`Operation::cancel`](common::driver::Operation::cancel): `KILL QUERY` from a
    /// connection of its own. The worker's connection is then given up (its killed statement's
    /// reply is still on the way) and reopened before the next window.
    async fn kill(&self) -> Result<(), OpError> {
        let mut control = connect(&self.opts, &self.identity)
            .await
            .map_err(|e| OpError::Fatal(format!("KILL QUERY could not connect: {e}")))?;
        control
            .query_drop(format!("KILL QUERY {}", self.id))
            .await
            .map_err(|e| OpError::Fatal(format!("KILL QUERY failed: {e}")))?;
        let _ = control.disconnect().await;
        Err(OpError::Fatal(
            "statement killed on the server at the ceiling; its connection is reopened".into(),
        ))
    }
}

fn my_op_error(e: mysql_async::Error) -> OpError {
    op_error(e.is_fatal(), e)
}

impl KvSession for MysqlSession {
    async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        self.conn
            .exec_drop(&self.insert, (key, value))
            .await
            .map_err(my_op_error)
    }

    async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        match self
            .conn
            .exec_first::<String, _, _>(&self.read, (key,))
            .await
        {
            Ok(Some(value)) => Ok(value.len()),
            Ok(None) => Err(OpError::Failed(format!("key {key} not found"))),
            Err(e) => Err(my_op_error(e)),
        }
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.killer.kill().await
    }
}
