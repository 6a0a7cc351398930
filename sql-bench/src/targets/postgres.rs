//! PostgreSQL (and servers speaking its protocol) through tokio-postgres: one connection per
//! worker, no pool, statements prepared before the window opens. fairbench's tables live in
//! the `fairbench` schema and carry a comment that marks them as fairbench's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::BoxFuture;
pub(crate) use common::postgres::{Canceller, Link, connect, message};
use common::results::Location;
use tokio_postgres::{Client, Statement};

pub mod cluster;
mod cockroach;
mod docs;
mod wire;
mod ycsb;

use super::{
    Described, Description, Identity, KvTable, Marked, Reach, Target, TargetError, TlsState,
    op_error,
};
use crate::durability::Durability;
use crate::replication::ClusterEvidence;
use crate::session::{KvSession, KvWorkers, Routed, async_workers};

const SCHEMA: &str = "fairbench";
const MARKER: &str = "created by fairbench";

pub struct PostgresTarget {
    identity: Identity,
    link: Link,
    control: Client,
    /// Where workers send their point reads instead of the primary (`--read-from replicas`).
    read_replicas: Vec<Link>,
    /// How replicas named later are reached (their passwords, `--insecure-skip-verify`).
    reach: Reach,
}

fn physical(name: &str) -> String {
    format!("{SCHEMA}.{name}")
}

impl PostgresTarget {
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let link = Link::of(spec, reach, &[])?;
        let identity = Identity::of(spec, "postgres");
        let control = connect(&link, &identity).await?;
        Ok(Box::new(PostgresTarget {
            identity,
            link,
            control,
            read_replicas: Vec::new(),
            reach: reach.clone(),
        }))
    }

    fn error(&self, e: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(e)
    }

    async fn query_value(&self, sql: &str) -> Result<String, TargetError> {
        let row = self
            .control
            .query_one(sql, &[])
            .await
            .map_err(|e| self.error(message(&e)))?;
        Ok(row.get(0))
    }

    /// Where the server runs: on this machine when every host the URL names is.
    fn location(&self) -> Location {
        self.link.location()
    }
}

impl Marked for PostgresTarget {
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
        Box::pin(async move {
            let row = self
                .control
                .query_opt(
                    "SELECT coalesce(obj_description(c.oid, 'pg_class'), '')
                       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = $1 AND c.relname = $2",
                    &[&SCHEMA, &name],
                )
                .await
                .map_err(|e| self.error(message(&e)))?;
            Ok(row.map(|r| r.get::<_, String>(0) == MARKER))
        })
    }

    fn object(&self, name: &str) -> String {
        format!("relation {}", physical(name))
    }

    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.control
                .batch_execute(&format!("DROP TABLE {}", physical(name)))
                .await
                .map_err(|e| self.error(message(&e)))
        })
    }
}

common::identified!(PostgresTarget);

impl Target for PostgresTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.link.tls_state())
    }

    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let full = self.query_value("SELECT version()").await?;
            if cockroach::is_cockroach(&full) {
                return cockroach::describe(self, durability, full).await;
            }
            let version = full.split(" on ").next().unwrap_or(&full).to_owned();
            let names = [
                "fsync",
                "synchronous_commit",
                "wal_sync_method",
                "full_page_writes",
                "synchronous_standby_names",
                "data_directory",
            ];
            let mut settings = common::postgres::read_settings(&self.control, &names)
                .await
                .map_err(|e| self.error(message(&e)))?;
            let standbys = self
                .control
                .query_one("SELECT count(*) FROM pg_stat_replication", &[])
                .await
                .map_err(|e| self.error(message(&e)))?
                .get::<_, i64>(0);
            settings.insert("pg_stat_replication.standbys".into(), standbys.to_string());
            let data_dir = settings
                .remove("data_directory")
                .filter(|_| self.location() == Location::Local)
                .map(PathBuf::from);
            let checks = cluster::settings_checks(&settings, durability);
            let mismatches = crate::durability::mismatches(&checks);
            let kind = if full.starts_with("CockroachDB") {
                "cockroachdb"
            } else {
                "postgres"
            };
            Ok(Description {
                system: Described {
                    kind: kind.into(),
                    version,
                    settings,
                    data_dir,
                    location: self.location(),
                },
                mismatches,
                // Only PostgreSQL's own cluster is read (CockroachDB's replicas are its ranges).
                settings_checks: (kind == "postgres").then_some(checks),
            })
        })
    }

    fn read_cluster<'a>(
        &'a self,
        replicas: &'a [TargetSpec],
        durability: Durability,
    ) -> BoxFuture<'a, Result<ClusterEvidence, TargetError>> {
        let (link, identity) = (self.link.clone(), self.identity.clone());
        let reach = self.reach.clone();
        Box::pin(
            async move { cluster::verify(&link, &identity, replicas, durability, &reach).await },
        )
    }

    fn route_reads(&mut self, replicas: &[TargetSpec]) -> Result<(), TargetError> {
        self.read_replicas = replicas
            .iter()
            .map(|replica| Link::of(replica, &self.reach, &[]))
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
            let ddl = format!(
                "CREATE SCHEMA IF NOT EXISTS {SCHEMA};
                 DROP TABLE IF EXISTS {name};
                 CREATE TABLE {name} (k BIGINT PRIMARY KEY, v VARCHAR({}) NOT NULL);
                 COMMENT ON TABLE {name} IS '{MARKER}';",
                table.value_len
            );
            self.control
                .batch_execute(&ddl)
                .await
                .map_err(|e| self.error(message(&e)))?;
            let keys: Vec<i64> = rows.iter().map(|(k, _)| *k).collect();
            let values: Vec<&str> = rows.iter().map(|(_, v)| v.as_str()).collect();
            self.control
                .execute(
                    &format!(
                        "INSERT INTO {name} (k, v) SELECT * FROM unnest($1::bigint[], $2::text[])"
                    ),
                    &[&keys, &values],
                )
                .await
                .map_err(|e| self.error(message(&e)))?;
            Ok(())
        })
    }

    fn verify_kv<'a>(
        &'a mut self,
        table: KvTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let row = self
                .control
                .query_opt(
                    "SELECT c.relpersistence::text,
                            (SELECT string_agg(a.attname, ',' ORDER BY a.attnum)
                               FROM pg_index i
                               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
                              WHERE i.indrelid = c.oid AND i.indisprimary)
                       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = $1 AND c.relname = $2",
                    &[&SCHEMA, &table.name],
                )
                .await
                .map_err(|e| self.error(message(&e)))?
                .ok_or_else(|| self.error(format!("{} does not exist", physical(table.name))))?;
            let persistence: String = row.get(0);
            let primary_key: Option<String> = row.get(1);
            if primary_key.as_deref() != Some("k") {
                return Err(self.error(format!(
                    "{} has no primary key on k (pg_index shows {primary_key:?})",
                    physical(table.name)
                )));
            }
            if persistence != "p" {
                return Err(self.error(format!(
                    "{} is not a logged table (relpersistence={persistence}): its writes skip the WAL",
                    physical(table.name)
                )));
            }
            Ok(BTreeMap::from([
                (
                    format!("{}.primary_key", table.name),
                    "k (btree, pg_index)".to_owned(),
                ),
                (format!("{}.persistence", table.name), "logged".to_owned()),
            ]))
        })
    }

    fn read_kv(
        &mut self,
        table: KvTable,
    ) -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>> {
        Box::pin(async move {
            let rows = self
                .control
                .query(
                    &format!("SELECT k, v FROM {} ORDER BY k", physical(table.name)),
                    &[],
                )
                .await
                .map_err(|e| self.error(message(&e)))?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let row = self
                .control
                .query_one(
                    &format!(
                        "SELECT count(*) FROM {} WHERE k >= $1 AND k < $2",
                        physical(table.name)
                    ),
                    &[&low, &high],
                )
                .await
                .map_err(|e| self.error(message(&e)))?;
            Ok(row.get::<_, i64>(0) as u64)
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
            format!("SELECT v FROM {} WHERE k = $1", physical(read.name)).into();
        let write_sql: Arc<str> = format!(
            "INSERT INTO {} (k, v) VALUES ($1, $2)",
            physical(write.name)
        )
        .into();
        let connector = Routed::connector(
            self.link.clone(),
            self.read_replicas.clone(),
            move |link: Link| {
                let (identity, read_sql, write_sql) =
                    (identity.clone(), read_sql.clone(), write_sql.clone());
                Box::pin(async move { open_session(&link, &identity, &read_sql, &write_sql).await })
            },
        );
        async_workers(size, connector)
    }

    fn ycsb(&mut self) -> Option<&mut dyn super::YcsbTarget> {
        Some(self)
    }
}

/// Which client a worker's session speaks through: sql-bench's own wire session
/// ([`wire`]), unless the server asks for a start-up it does not speak or
/// `FAIRBENCH_PG_CLIENT=tokio-postgres` asks for the driver every other path uses (to measure
/// one against the other).
fn driver_asked() -> bool {
    std::env::var("FAIRBENCH_PG_CLIENT").is_ok_and(|v| v == "tokio-postgres")
}

/// Opens one worker connection and prepares its statements, before any clock starts.
async fn open_session(
    config: &Link,
    identity: &Identity,
    read_sql: &str,
    write_sql: &str,
) -> Result<PgSession, String> {
    if !driver_asked() {
        match wire::WireSession::open(config, read_sql, write_sql).await {
            Ok(session) => return Ok(PgSession::Wire(Box::new(session))),
            Err(wire::OpenError::Failed(why)) => {
                return Err(identity.connect_error(why).to_string());
            }
            Err(wire::OpenError::Unsupported(_)) => {}
        }
    }
    let client = connect(config, identity).await.map_err(|e| e.to_string())?;
    let prepare = |sql| {
        let client = &client;
        async move {
            client
                .prepare(sql)
                .await
                .map_err(|e| identity.query_error(message(&e)).to_string())
        }
    };
    let read = prepare(read_sql).await?;
    let insert = prepare(write_sql).await?;
    Ok(PgSession::Driver(Box::new(DriverSession {
        canceller: Canceller::of(&client, config),
        client,
        read,
        insert,
    })))
}

/// A worker's connection, opened on the lane it runs on.
enum PgSession {
    Wire(Box<wire::WireSession>),
    Driver(Box<DriverSession>),
}

/// A worker's connection through tokio-postgres.
struct DriverSession {
    client: Client,
    read: Statement,
    insert: Statement,
    canceller: Canceller,
}

fn pg_op_error(e: tokio_postgres::Error) -> OpError {
    op_error(e.is_closed(), message(&e))
}

impl KvSession for PgSession {
    async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        match self {
            PgSession::Wire(wire) => wire.insert(key, value).await,
            PgSession::Driver(driver) => driver
                .client
                .execute(&driver.insert, &[&key, &value])
                .await
                .map(drop)
                .map_err(pg_op_error),
        }
    }

    async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        let driver = match self {
            PgSession::Wire(wire) => return wire.read(key).await,
            PgSession::Driver(driver) => driver,
        };
        match driver.client.query_opt(&driver.read, &[&key]).await {
            Ok(Some(row)) => Ok(row.get::<_, &str>(0).len()),
            Ok(None) => Err(OpError::Failed(format!("key {key} not found"))),
            Err(e) => Err(pg_op_error(e)),
        }
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        match self {
            PgSession::Wire(wire) => wire.cancel().await,
            PgSession::Driver(driver) => driver.canceller.cancel().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_postgres::NoTls;

    #[test]
    fn a_statement_cancelled_at_the_ceiling_stops_on_the_server_and_the_session_goes_on() {
        let Some(url) = common::testing::server_url("FAIRBENCH_TEST_POSTGRES_URL") else {
            return;
        };
        let _lock = common::testing::lock_servers();
        common::testing::block_on(async {
            let open = || async {
                let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
                tokio::spawn(connection);
                client
            };
            let (worker, watcher) = (open().await, open().await);
            let hung = worker.simple_query("SELECT pg_sleep(60) -- fairbench cancel test");
            assert!(
                tokio::time::timeout(Duration::from_millis(500), hung)
                    .await
                    .is_err()
            );
            common::postgres::cancel(&worker.cancel_token(), NoTls)
                .await
                .unwrap();
            let still_running = || async {
                let sql = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
                           AND query LIKE '%fairbench cancel test%' AND pid <> pg_backend_pid()";
                watcher.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
            };
            let mut running = still_running().await;
            for _ in 0..40 {
                if running == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                running = still_running().await;
            }
            assert_eq!(running, 0, "the statement is still running on the server");
            // The worker's connection answers the next statement.
            worker.simple_query("SELECT 1").await.unwrap();
        });
    }
}
