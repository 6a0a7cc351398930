//! SQLite's YCSB table and sessions: a `WITHOUT ROWID` table keyed by `ycsb_key` (the record
//! lives in the primary key's b-tree, as in InnoDB), every statement cached per connection,
//! writers queued on the in-process lock, the load one transaction per batch and a
//! read-modify-write one `BEGIN IMMEDIATE` transaction.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use common::driver::{OpError, failed};
use common::pool::{BoxFuture, Connector};
use common::watchdog::Interrupt;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, params_from_iter};

use super::{MARKER_TABLE, SqliteTarget, connect, physical};
use crate::session::ycsb::{BlockingYcsbSession, Fetched, Record, YcsbWorkers, blocking_workers};
use crate::targets::Marked;
use crate::targets::TargetError;
use crate::targets::ycsb::{YcsbSql, YcsbTable, YcsbTarget, in_order};

impl YcsbTarget for SqliteTarget {
    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(table.name).await?;
            let name = physical(table.name);
            let columns: Vec<String> = (0..table.shape.fields)
                .map(|i| format!("field{i} TEXT NOT NULL"))
                .collect();
            self.control
                .execute_batch(&format!(
                    "BEGIN;
                     CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name TEXT PRIMARY KEY);
                     DROP TABLE IF EXISTS {name};
                     CREATE TABLE {name} (ycsb_key TEXT PRIMARY KEY, {}) WITHOUT ROWID;
                     INSERT OR IGNORE INTO {MARKER_TABLE} (name) VALUES ('{name}');
                     COMMIT;",
                    columns.join(", ")
                ))
                .map_err(|e| self.identity.query_error(e))?;
            let key: Option<String> = self
                .control
                .query_row(
                    &format!("SELECT name FROM pragma_table_info('{name}') WHERE pk = 1"),
                    [],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| self.identity.query_error(e))?;
            if key.as_deref() != Some("ycsb_key") {
                return Err(self
                    .identity
                    .query_error(format!("{name} has no primary key on ycsb_key ({key:?})")));
            }
            Ok(BTreeMap::from([(
                format!("{}.primary_key", table.name),
                "ycsb_key (WITHOUT ROWID: the primary key's b-tree holds the record)".to_owned(),
            )]))
        })
    }

    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(async move {
            self.control
                .query_row(
                    &format!("SELECT count(*) FROM {}", physical(table.name)),
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n as u64)
                .map_err(|e| self.identity.query_error(e))
        })
    }

    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>> {
        Box::pin(async move {
            let mut stmt = self
                .control
                .prepare(&format!(
                    "SELECT ycsb_key, {} FROM {} WHERE ycsb_key = ?1",
                    table.field_list(),
                    physical(table.name)
                ))
                .map_err(|e| self.identity.query_error(e))?;
            let mut found = Vec::new();
            for key in keys {
                let row = stmt
                    .query_row([key], |r| {
                        let values = (1..=table.shape.fields)
                            .map(|i| r.get(i))
                            .collect::<rusqlite::Result<Vec<String>>>()?;
                        Ok((r.get::<_, String>(0)?, values))
                    })
                    .optional()
                    .map_err(|e| self.identity.query_error(e))?;
                found.extend(row);
            }
            Ok(in_order(keys, found))
        })
    }

    fn open_ycsb_workers<'a>(
        &'a self,
        size: usize,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<Box<dyn YcsbWorkers>, TargetError>> {
        let (path, lock, identity) = (
            self.path.clone(),
            self.write_lock.clone(),
            self.identity.clone(),
        );
        let sql = Arc::new(YcsbSql::of(table, physical(table.name), |i| {
            format!("?{i}")
        }));
        let connector: Connector<SqliteYcsb> = Arc::new(move || {
            let (path, lock, identity, sql): (PathBuf, _, _, _) =
                (path.clone(), lock.clone(), identity.clone(), sql.clone());
            Box::pin(async move {
                let conn = connect(&path).map_err(|e| identity.query_error(e).to_string())?;
                Ok(SqliteYcsb { conn, lock, sql })
            })
        });
        blocking_workers(size, connector)
    }
}

/// A worker's connection; writes take the in-process writer lock first.
struct SqliteYcsb {
    conn: Connection,
    lock: Arc<Mutex<()>>,
    sql: Arc<YcsbSql>,
}

fn fetched(row: &Row<'_>, fields: usize) -> rusqlite::Result<Fetched> {
    let mut got = Fetched {
        records: 1,
        ..Fetched::default()
    };
    for i in 0..fields {
        got.fields += 1;
        got.bytes += match row.get_ref(i)? {
            ValueRef::Text(text) => text.len(),
            _ => {
                return Err(rusqlite::Error::InvalidColumnType(
                    i,
                    format!("field{i}"),
                    row.get_ref(i)?.data_type(),
                ));
            }
        };
    }
    Ok(got)
}

impl SqliteYcsb {
    fn fields(&self) -> usize {
        self.sql.updates.len()
    }

    fn read_row(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        let fields = self.fields();
        let mut stmt = self.conn.prepare_cached(&self.sql.read).map_err(failed)?;
        stmt.query_row([key], |r| fetched(r, fields))
            .optional()
            .map_err(failed)
    }

    fn set_field(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        let mut stmt = self
            .conn
            .prepare_cached(&self.sql.updates[field])
            .map_err(failed)?;
        stmt.execute([value, key]).map(|n| n as u64).map_err(failed)
    }
}

impl BlockingYcsbSession for SqliteYcsb {
    /// `sqlite3_interrupt`: the statement stops with SQLITE_INTERRUPT (its transaction rolled
    /// back) and the connection stays usable.
    fn interrupt(&self) -> Option<Interrupt> {
        let handle = self.conn.get_interrupt_handle();
        Some(Arc::new(move || handle.interrupt()))
    }

    fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        self.read_row(key)
    }

    fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        let lock = self.lock.clone();
        let _writer = lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.set_field(key, field, value)
    }

    fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError> {
        let lock = self.lock.clone();
        let _writer = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stmt = self.conn.prepare_cached(&self.sql.insert).map_err(failed)?;
        let params = std::iter::once(key).chain(values.iter().copied());
        stmt.execute(params_from_iter(params))
            .map(drop)
            .map_err(failed)
    }

    fn scan(&mut self, start: &str, count: usize) -> Result<Fetched, OpError> {
        let fields = self.fields();
        let mut stmt = self.conn.prepare_cached(&self.sql.scan).map_err(failed)?;
        let mut rows = stmt
            .query(rusqlite::params![start, count as i64])
            .map_err(failed)?;
        let mut got = Fetched::default();
        while let Some(row) = rows.next().map_err(failed)? {
            got.add(fetched(row, fields).map_err(failed)?);
        }
        Ok(got)
    }

    fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<Option<Fetched>, OpError> {
        let lock = self.lock.clone();
        let _writer = lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(failed)?;
        let result = self.read_row(key).and_then(|got| match got {
            Some(got) => Ok((self.set_field(key, field, value)? == 1).then_some(got)),
            None => Ok(None),
        });
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        self.conn.execute_batch(end).map_err(failed)?;
        result
    }

    fn delete(&mut self, key: &str) -> Result<u64, OpError> {
        let lock = self.lock.clone();
        let _writer = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stmt = self.conn.prepare_cached(&self.sql.delete).map_err(failed)?;
        stmt.execute([key]).map(|n| n as u64).map_err(failed)
    }

    fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError> {
        let lock = self.lock.clone();
        let _writer = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = self.conn.transaction().map_err(failed)?;
        {
            let mut stmt = tx.prepare_cached(&self.sql.insert).map_err(failed)?;
            for r in records {
                let params =
                    std::iter::once(r.key.as_str()).chain(r.values.iter().map(String::as_str));
                stmt.execute(params_from_iter(params)).map_err(failed)?;
            }
        }
        tx.commit().map_err(failed)
    }
}
