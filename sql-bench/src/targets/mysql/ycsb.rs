//! MariaDB's and MySQL's YCSB table and sessions: InnoDB, `ycsb_key VARCHAR(64)` in ASCII with
//! a binary collation (byte order, as on every engine) as the primary key, statements
//! prepared per connection, `CLIENT_FOUND_ROWS` so an update reports the row it matched even
//! when the value was already there, the load one multi-row INSERT per batch and a
//! read-modify-write one transaction (`SELECT … FOR UPDATE`, `UPDATE`, `COMMIT`).

use std::collections::BTreeMap;
use std::sync::Arc;

use common::driver::OpError;
use common::pool::{BoxFuture, Connector};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row, Statement, TxOpts, Value};

use super::{DATABASE, Killer, MARKER, MysqlTarget, connect, my_op_error, physical};
use crate::session::ycsb::{Fetched, Record, YcsbSession, YcsbWorkers, async_workers};
use crate::targets::Marked;
use crate::targets::ycsb::{KEY_LENGTH, YcsbSql, YcsbTable, YcsbTarget, in_order};
use crate::targets::{Identity, TargetError};

impl YcsbTarget for MysqlTarget {
    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(table.name).await?;
            let name = physical(table.name);
            let columns: Vec<String> = (0..table.shape.fields)
                .map(|i| {
                    format!(
                        "field{i} VARCHAR({}) CHARACTER SET ascii NOT NULL",
                        table.shape.field_length
                    )
                })
                .collect();
            for ddl in [
                format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"),
                format!("DROP TABLE IF EXISTS {name}"),
                format!(
                    "CREATE TABLE {name} (ycsb_key VARCHAR({KEY_LENGTH}) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY, {}) ENGINE=InnoDB COMMENT='{MARKER}'",
                    columns.join(", ")
                ),
            ] {
                self.control
                    .query_drop(ddl)
                    .await
                    .map_err(|e| self.error(e))?;
            }
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
                    "SELECT GROUP_CONCAT(COLUMN_NAME) FROM information_schema.STATISTICS
                      WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY'",
                    (DATABASE, table.name),
                )
                .await
                .map_err(|e| self.error(e))?;
            if engine.as_deref() != Some("InnoDB") || key.as_deref() != Some("ycsb_key") {
                return Err(self.error(format!(
                    "{name} is not as created: engine {engine:?}, primary key {key:?}"
                )));
            }
            Ok(BTreeMap::from([
                (
                    format!("{}.primary_key", table.name),
                    "ycsb_key (ascii_bin, information_schema.STATISTICS)".to_owned(),
                ),
                (format!("{}.engine", table.name), "InnoDB".to_owned()),
            ]))
        })
    }

    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(async move {
            let count: Option<u64> = self
                .control
                .query_first(format!("SELECT COUNT(*) FROM {}", physical(table.name)))
                .await
                .map_err(|e| self.error(e))?;
            Ok(count.unwrap_or(0))
        })
    }

    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>> {
        Box::pin(async move {
            let mut found = Vec::new();
            for chunk in keys.chunks(500) {
                let sql = format!(
                    "SELECT ycsb_key, {} FROM {} WHERE ycsb_key IN ({})",
                    table.field_list(),
                    physical(table.name),
                    vec!["?"; chunk.len()].join(",")
                );
                let rows: Vec<Row> = self
                    .control
                    .exec(sql, chunk.to_vec())
                    .await
                    .map_err(|e| self.error(e))?;
                for row in rows {
                    let values: Vec<String> = row.unwrap().into_iter().map(text).collect();
                    found.push((values[0].clone(), values[1..].to_vec()));
                }
            }
            Ok(in_order(keys, found))
        })
    }

    fn open_ycsb_workers<'a>(
        &'a self,
        size: usize,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<Box<dyn YcsbWorkers>, TargetError>> {
        let opts: Opts = OptsBuilder::from_opts(self.opts.clone())
            .client_found_rows(true)
            .into();
        let identity = self.identity.clone();
        let sql = Arc::new(YcsbSql::of(table, physical(table.name), |_| "?".to_owned()));
        let connector: Connector<MyYcsb> = Arc::new(move || {
            let (opts, identity, sql) = (opts.clone(), identity.clone(), sql.clone());
            Box::pin(async move {
                let conn = connect(&opts, &identity).await.map_err(|e| e.to_string())?;
                MyYcsb::prepare(conn, sql, &opts, &identity).await
            })
        });
        async_workers(size, connector)
    }
}

fn text(value: Value) -> String {
    match value {
        Value::Bytes(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        other => other.as_sql(true),
    }
}

/// A worker's connection and its prepared statements.
struct MyYcsb {
    conn: Conn,
    killer: Killer,
    sql: Arc<YcsbSql>,
    read: Statement,
    updates: Vec<Statement>,
    insert: Statement,
    scan: Statement,
    lock: Statement,
    delete: Statement,
}

impl MyYcsb {
    async fn prepare(
        mut conn: Conn,
        sql: Arc<YcsbSql>,
        opts: &Opts,
        identity: &Identity,
    ) -> Result<MyYcsb, String> {
        let error = |e: mysql_async::Error| identity.query_error(e).to_string();
        let mut updates = Vec::with_capacity(sql.updates.len());
        for text in &sql.updates {
            updates.push(conn.prep(text).await.map_err(error)?);
        }
        Ok(MyYcsb {
            read: conn.prep(&sql.read).await.map_err(error)?,
            insert: conn.prep(&sql.insert).await.map_err(error)?,
            scan: conn.prep(&sql.scan).await.map_err(error)?,
            lock: conn.prep(&sql.lock).await.map_err(error)?,
            delete: conn.prep(&sql.delete).await.map_err(error)?,
            updates,
            sql,
            killer: Killer::of(&conn, opts, identity),
            conn,
        })
    }
}

/// One row's fields, counted without copying them out.
fn fetched(row: &Row) -> Fetched {
    let mut got = Fetched {
        records: 1,
        ..Fetched::default()
    };
    for i in 0..row.len() {
        got.fields += 1;
        if let Some(Value::Bytes(bytes)) = row.as_ref(i) {
            got.bytes += bytes.len();
        }
    }
    got
}

impl YcsbSession for MyYcsb {
    async fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        let row: Option<Row> = self
            .conn
            .exec_first(&self.read, (key,))
            .await
            .map_err(my_op_error)?;
        Ok(row.as_ref().map(fetched))
    }

    async fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        self.conn
            .exec_drop(&self.updates[field], (value, key))
            .await
            .map_err(my_op_error)?;
        Ok(self.conn.affected_rows())
    }

    async fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError> {
        let params: Vec<Value> = std::iter::once(key)
            .chain(values.iter().copied())
            .map(Value::from)
            .collect();
        self.conn
            .exec_drop(&self.insert, params)
            .await
            .map_err(my_op_error)
    }

    async fn scan(&mut self, start: &str, count: usize) -> Result<Fetched, OpError> {
        let rows: Vec<Row> = self
            .conn
            .exec(&self.scan, (start, count as u64))
            .await
            .map_err(my_op_error)?;
        let mut got = Fetched::default();
        rows.iter().for_each(|r| got.add(fetched(r)));
        Ok(got)
    }

    async fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<Option<Fetched>, OpError> {
        let mut tx = self
            .conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(my_op_error)?;
        let row: Option<Row> = tx
            .exec_first(&self.lock, (key,))
            .await
            .map_err(my_op_error)?;
        let Some(row) = row else {
            tx.rollback().await.map_err(my_op_error)?;
            return Ok(None);
        };
        tx.exec_drop(&self.updates[field], (value, key))
            .await
            .map_err(my_op_error)?;
        let changed = tx.affected_rows();
        tx.commit().await.map_err(my_op_error)?;
        Ok((changed == 1).then(|| fetched(&row)))
    }

    async fn delete(&mut self, key: &str) -> Result<u64, OpError> {
        self.conn
            .exec_drop(&self.delete, (key,))
            .await
            .map_err(my_op_error)?;
        Ok(self.conn.affected_rows())
    }

    async fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError> {
        let fields = records.first().map_or(0, |r| r.values.len());
        let row = format!("({})", vec!["?"; fields + 1].join(","));
        let sql = format!(
            "INSERT INTO {} (ycsb_key, {}) VALUES {}",
            self.sql.name,
            self.sql.fields,
            vec![row.as_str(); records.len()].join(",")
        );
        let params: Vec<Value> = records
            .iter()
            .flat_map(|r| std::iter::once(&r.key).chain(&r.values))
            .map(|v| Value::from(v.as_str()))
            .collect();
        self.conn.exec_drop(sql, params).await.map_err(my_op_error)
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.killer.kill().await
    }
}
