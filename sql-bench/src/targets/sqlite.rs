//! SQLite, embedded in the client process: a database file (by default in the results folder)
//! in WAL mode with `synchronous=FULL`, so a commit is durable when it returns. SQLite admits
//! one writer at a time; writers queue on an in-process lock rather than SQLite's sleeping
//! busy handler, as an application embedding SQLite does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use common::sqlite::connect_durable as connect;
use common::watchdog::Interrupt;
use rusqlite::{Connection, params};

mod docs;
mod ycsb;

use super::{Described, Description, Identity, KvTable, Marked, Target, TargetError};
use crate::durability::Durability;
use crate::session::{BlockingKvSession, KvWorkers, blocking_workers};

/// Every fairbench table carries this prefix (SQLite has no schemas).
const PREFIX: &str = "fairbench_";
/// Lists the tables fairbench created in this file: its ownership marker.
const MARKER_TABLE: &str = "fairbench_objects";

pub struct SqliteTarget {
    identity: Identity,
    path: PathBuf,
    control: Connection,
    write_lock: Arc<Mutex<()>>,
}

fn physical(name: &str) -> String {
    format!("{PREFIX}{name}")
}

impl SqliteTarget {
    /// `sqlite` (a file in the results folder), `sqlite:PATH` or `sqlite://PATH`.
    pub async fn open(
        spec: &TargetSpec,
        results_dir: &Path,
    ) -> Result<Box<dyn Target>, TargetError> {
        let path = common::sqlite::file_of(&spec.url, results_dir, "fairbench.db");
        let name = spec.name.clone().unwrap_or_else(|| "sqlite".into());
        let connect_error = |message: String| TargetError::Connect {
            system: name.clone(),
            url: path.display().to_string(),
            message,
        };
        let control = common::sqlite::create_durable(&path).map_err(connect_error)?;
        Ok(Box::new(SqliteTarget {
            identity: Identity {
                name: name.clone(),
                kind: "sqlite".into(),
                url_redacted: format!("sqlite:{}", path.display()),
            },
            path,
            control,
            write_lock: Arc::new(Mutex::new(())),
        }))
    }

    fn is_ours(&self, table: &str) -> rusqlite::Result<Option<bool>> {
        common::sqlite::ownership(&self.control, table, MARKER_TABLE)
    }

    /// The folder of the database file, where its commits are synced.
    fn folder(&self) -> PathBuf {
        match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    fn create(&mut self, table: KvTable, rows: &[(i64, String)]) -> Result<(), TargetError> {
        let name = physical(table.name);
        let tx = self
            .control
            .transaction()
            .map_err(|e| self.identity.query_error(e))?;
        tx.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name TEXT PRIMARY KEY);
             DROP TABLE IF EXISTS {name};
             CREATE TABLE {name} (k INTEGER PRIMARY KEY, v TEXT NOT NULL);
             INSERT OR IGNORE INTO {MARKER_TABLE} (name) VALUES ('{name}');"
        ))
        .map_err(|e| self.identity.query_error(e))?;
        {
            let mut insert = tx
                .prepare(&format!("INSERT INTO {name} (k, v) VALUES (?1, ?2)"))
                .map_err(|e| self.identity.query_error(e))?;
            for (k, v) in rows {
                insert
                    .execute(params![k, v])
                    .map_err(|e| self.identity.query_error(e))?;
            }
        }
        tx.commit().map_err(|e| self.identity.query_error(e))
    }
}

impl Marked for SqliteTarget {
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
        Box::pin(async move {
            self.is_ours(&physical(name))
                .map_err(|e| self.identity.query_error(e))
        })
    }

    fn object(&self, name: &str) -> String {
        format!("table {} in {}", physical(name), self.path.display())
    }

    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let name = physical(name);
            self.control
                .execute_batch(&format!(
                    "DROP TABLE {name}; DELETE FROM {MARKER_TABLE} WHERE name = '{name}';"
                ))
                .map_err(|e| self.identity.query_error(e))
        })
    }
}

common::identified!(SqliteTarget);

impl Target for SqliteTarget {
    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let read = |sql: &str| {
                common::sqlite::read_text(&self.control, sql)
                    .map_err(|e| self.identity.query_error(e))
            };
            let version = read("SELECT sqlite_version()")?;
            let journal_mode = read("PRAGMA journal_mode")?;
            let synchronous = read("PRAGMA synchronous")?;
            let mut mismatches = Vec::new();
            if !journal_mode.eq_ignore_ascii_case("wal") {
                mismatches.push(format!("journal_mode={journal_mode} (needs wal)"));
            }
            if synchronous.parse::<i64>().unwrap_or(0) < 2 {
                mismatches.push(format!("synchronous={synchronous} (needs 2, FULL)"));
            }
            mismatches.extend(durability.single_node_refusal("SQLite"));
            let settings = BTreeMap::from([
                ("journal_mode".to_owned(), journal_mode),
                ("synchronous".to_owned(), synchronous),
                (
                    "writers".to_owned(),
                    "one at a time, queued in-process".to_owned(),
                ),
            ]);
            Ok(Description {
                system: Described {
                    kind: "sqlite".into(),
                    version: format!("SQLite {version}"),
                    settings,
                    data_dir: Some(self.folder()),
                    location: Location::Embedded,
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
            self.ensure_ours_or_absent(table.name).await?;
            tokio::task::block_in_place(|| self.create(table, rows))
        })
    }

    fn verify_kv<'a>(
        &'a mut self,
        table: KvTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let name = physical(table.name);
            let mut stmt = self
                .control
                .prepare(&format!("PRAGMA table_info({name})"))
                .map_err(|e| self.identity.query_error(e))?;
            let columns: Vec<(String, String, i64)> = stmt
                .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))
                .and_then(Iterator::collect)
                .map_err(|e| self.identity.query_error(e))?;
            let key_is_rowid = columns
                .iter()
                .any(|(col, ty, pk)| col == "k" && ty.eq_ignore_ascii_case("INTEGER") && *pk == 1);
            if !key_is_rowid {
                return Err(self.identity.query_error(format!(
                    "{name} has no INTEGER PRIMARY KEY on k (table_info: {columns:?})"
                )));
            }
            Ok(BTreeMap::from([(
                format!("{}.primary_key", table.name),
                "k (INTEGER PRIMARY KEY: the rowid b-tree)".to_owned(),
            )]))
        })
    }

    fn read_kv(
        &mut self,
        table: KvTable,
    ) -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>> {
        Box::pin(async move {
            let mut stmt = self
                .control
                .prepare(&format!(
                    "SELECT k, v FROM {} ORDER BY k",
                    physical(table.name)
                ))
                .map_err(|e| self.identity.query_error(e))?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(Iterator::collect)
                .map_err(|e| self.identity.query_error(e))
        })
    }

    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            self.control
                .query_row(
                    &format!(
                        "SELECT count(*) FROM {} WHERE k >= ?1 AND k < ?2",
                        physical(table.name)
                    ),
                    [low, high],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n as u64)
                .map_err(|e| self.identity.query_error(e))
        })
    }

    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>> {
        let path = self.path.clone();
        let write_lock = self.write_lock.clone();
        let identity = self.identity.clone();
        let read_sql: Arc<str> =
            format!("SELECT v FROM {} WHERE k = ?1", physical(read.name)).into();
        let write_sql: Arc<str> = format!(
            "INSERT INTO {} (k, v) VALUES (?1, ?2)",
            physical(write.name)
        )
        .into();
        let connector: Connector<SqliteSession> = Arc::new(move || {
            let (path, write_lock, read_sql, write_sql) = (
                path.clone(),
                write_lock.clone(),
                read_sql.clone(),
                write_sql.clone(),
            );
            let identity = identity.clone();
            Box::pin(async move {
                let conn = connect(&path).map_err(|e| identity.query_error(e).to_string())?;
                Ok(SqliteSession {
                    conn,
                    write_lock,
                    read_sql,
                    write_sql,
                })
            })
        });
        blocking_workers(size, connector)
    }

    fn ycsb(&mut self) -> Option<&mut dyn super::YcsbTarget> {
        Some(self)
    }
}

struct SqliteSession {
    conn: Connection,
    write_lock: Arc<Mutex<()>>,
    read_sql: Arc<str>,
    write_sql: Arc<str>,
}

impl BlockingKvSession for SqliteSession {
    fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        let _writer = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut stmt = self.conn.prepare_cached(&self.write_sql).map_err(failed)?;
        stmt.execute(params![key, value]).map(drop).map_err(failed)
    }

    fn read(&mut self, key: i64) -> Result<usize, OpError> {
        let mut stmt = self.conn.prepare_cached(&self.read_sql).map_err(failed)?;
        match stmt.query_row([key], |r| Ok(r.get_ref(0)?.as_str().map(str::len))) {
            Ok(Ok(len)) => Ok(len),
            Ok(Err(e)) => Err(failed(e)),
            Err(rusqlite::Error::QueryReturnedNoRows) => {
                Err(OpError::Failed(format!("key {key} not found")))
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// `sqlite3_interrupt`: the statement stops with SQLITE_INTERRUPT (an insert's
    /// transaction rolled back) and the connection stays usable.
    fn interrupt(&self) -> Option<Interrupt> {
        let handle = self.conn.get_interrupt_handle();
        Some(Arc::new(move || handle.interrupt()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use common::window::WindowPlan;

    use super::*;
    use crate::session::{Kind, Mix};

    fn plan(duration: Duration, ceiling: Duration) -> WindowPlan {
        WindowPlan {
            duration,
            ceiling,
            rate_per_s: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            progress: None,
        }
    }

    fn mix(kind: Kind, window: u64) -> Mix {
        Mix {
            kind,
            read_keys: 1,
            value_len: 4,
            values: vec!["abcd".to_owned()].into(),
            window,
            seed: 42,
            first_connection: 0,
        }
    }

    /// Every insert fires a trigger that joins a 1,000-row table with itself three times (10^9
    /// rows, many seconds): under a 200 ms ceiling each one is stopped by `sqlite3_interrupt`,
    /// counted as a timeout, and the same worker goes on to the next; afterwards the session
    /// answers at once, so nothing is still running on it.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_statement_past_the_ceiling_is_interrupted_and_the_worker_carries_on() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TargetSpec::parse("sqlite").unwrap();
        let mut target = SqliteTarget::open(&spec, dir.path()).await.unwrap();
        let table = KvTable {
            name: "kv",
            value_len: 4,
        };
        target
            .create_kv(table, &[(1, "abcd".into())])
            .await
            .unwrap();
        let path = dir.path().join("sqlite").join("fairbench.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE slow (x INTEGER);
                 WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000)
                 INSERT INTO slow SELECT x FROM c;
                 CREATE TRIGGER slow_insert AFTER INSERT ON fairbench_kv BEGIN
                   SELECT count(*) FROM slow a, slow b, slow c;
                 END;",
            )
            .unwrap();
        let mut workers = target.open_kv_workers(1, table, table).await.unwrap();
        let (duration, ceiling) = (Duration::from_secs(1), Duration::from_millis(200));
        let began = Instant::now();
        let writes = workers
            .run_window(1, &mix(Kind::Write, 1), &plan(duration, ceiling))
            .await
            .unwrap();
        let took = began.elapsed();
        let outcome = &writes.outcome;
        assert_eq!(outcome.stuck_workers, 0, "{outcome:?}");
        assert_eq!(outcome.recorder.counts.ok, 0, "{outcome:?}");
        assert!(
            outcome.recorder.counts.timeout >= 3,
            "one worker, one statement stopped after another: {outcome:?}"
        );
        assert_eq!(outcome.recorder.fatal, None);
        assert!(took < duration + ceiling, "{took:?}");
        // The same session, at once: a read window answers with no timeout.
        let reads = workers
            .run_window(
                1,
                &mix(Kind::Read, 2),
                &plan(Duration::from_millis(200), ceiling),
            )
            .await
            .unwrap();
        let counts = reads.outcome.recorder.counts;
        assert!(counts.ok > 0 && counts.timeout == 0, "{counts:?}");
        assert!(
            reads.outcome.recorder.latency.max() < 50_000_000,
            "{reads:?}"
        );
    }
}
