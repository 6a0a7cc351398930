//! PostgreSQL's YCSB table and sessions: `ycsb_key VARCHAR(64) COLLATE "C"` (byte order, so a
//! scan from a key means the same on every engine) as the primary key, one `VARCHAR` per
//! field; every statement prepared per connection; the load as one `unnest` INSERT per batch;
//! a read-modify-write as one transaction (`SELECT … FOR UPDATE`, `UPDATE`, `COMMIT`).

use std::collections::BTreeMap;
use std::sync::Arc;

use common::driver::OpError;
use common::pool::{BoxFuture, Connector};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use super::{
    Canceller, Link, MARKER, PostgresTarget, SCHEMA, connect, message, pg_op_error, physical,
};
use crate::session::ycsb::{Fetched, Record, YcsbSession, YcsbWorkers, async_workers};
use crate::targets::Marked;
use crate::targets::ycsb::{KEY_LENGTH, YcsbSql, YcsbTable, YcsbTarget, in_order};
use crate::targets::{Identity, TargetError};

/// The statements of one table, by the text each is prepared from: YCSB's, and the load of a
/// batch as one `unnest` of a text array per column.
#[derive(Debug, Clone)]
struct Sql {
    ycsb: YcsbSql,
    load: String,
}

impl Sql {
    fn of(table: &YcsbTable) -> Sql {
        let ycsb = YcsbSql::of(table, physical(table.name), |i| format!("${i}"));
        let arrays: Vec<String> = (1..=table.shape.fields + 1)
            .map(|i| format!("${i}::text[]"))
            .collect();
        let load = format!(
            "INSERT INTO {} (ycsb_key, {}) SELECT * FROM unnest({})",
            ycsb.name,
            ycsb.fields,
            arrays.join(", ")
        );
        Sql { ycsb, load }
    }
}

impl YcsbTarget for PostgresTarget {
    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(table.name).await?;
            let name = physical(table.name);
            let columns: Vec<String> = (0..table.shape.fields)
                .map(|i| format!("field{i} VARCHAR({}) NOT NULL", table.shape.field_length))
                .collect();
            let ddl = format!(
                "CREATE SCHEMA IF NOT EXISTS {SCHEMA};
                 DROP TABLE IF EXISTS {name};
                 CREATE TABLE {name} (ycsb_key VARCHAR({KEY_LENGTH}) COLLATE \"C\" PRIMARY KEY, {});
                 COMMENT ON TABLE {name} IS '{MARKER}';",
                columns.join(", ")
            );
            self.control
                .batch_execute(&ddl)
                .await
                .map_err(|e| self.error(message(&e)))?;
            self.verify_ycsb(table).await
        })
    }

    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(async move {
            let row = self
                .control
                .query_one(
                    &format!("SELECT count(*) FROM {}", physical(table.name)),
                    &[],
                )
                .await
                .map_err(|e| self.error(message(&e)))?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT ycsb_key, {} FROM {} WHERE ycsb_key = ANY($1)",
                table.field_list(),
                physical(table.name)
            );
            let rows = self
                .control
                .query(&sql, &[&keys])
                .await
                .map_err(|e| self.error(message(&e)))?;
            let found = rows
                .iter()
                .map(|r| {
                    let values = (1..=table.shape.fields).map(|i| r.get(i)).collect();
                    (r.get(0), values)
                })
                .collect();
            Ok(in_order(keys, found))
        })
    }

    fn open_ycsb_workers<'a>(
        &'a self,
        size: usize,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<Box<dyn YcsbWorkers>, TargetError>> {
        let (config, identity) = (self.link.clone(), self.identity.clone());
        let sql = Arc::new(Sql::of(table));
        let connector: Connector<PgYcsb> = Arc::new(move || {
            let (config, identity, sql) = (config.clone(), identity.clone(), sql.clone());
            Box::pin(async move {
                let client = connect(&config, &identity)
                    .await
                    .map_err(|e| e.to_string())?;
                PgYcsb::prepare(client, &sql, &config, &identity).await
            })
        });
        async_workers(size, connector)
    }
}

impl PostgresTarget {
    /// The catalog's evidence that the table has its primary key on `ycsb_key` and is logged.
    async fn verify_ycsb(
        &self,
        table: &YcsbTable,
    ) -> Result<BTreeMap<String, String>, TargetError> {
        let row = self
            .control
            .query_one(
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
            .map_err(|e| self.error(message(&e)))?;
        let persistence: String = row.get(0);
        let key: Option<String> = row.get(1);
        if key.as_deref() != Some("ycsb_key") || persistence != "p" {
            return Err(self.error(format!(
                "{} is not as created: primary key {key:?}, relpersistence {persistence}",
                physical(table.name)
            )));
        }
        Ok(BTreeMap::from([
            (
                format!("{}.primary_key", table.name),
                "ycsb_key (btree, COLLATE \"C\", pg_index)".to_owned(),
            ),
            (format!("{}.persistence", table.name), "logged".to_owned()),
        ]))
    }
}

/// A worker's connection and its prepared statements.
struct PgYcsb {
    client: Client,
    canceller: Canceller,
    read: Statement,
    updates: Vec<Statement>,
    insert: Statement,
    scan: Statement,
    lock: Statement,
    delete: Statement,
    load: Statement,
}

impl PgYcsb {
    async fn prepare(
        client: Client,
        sql: &Sql,
        link: &Link,
        identity: &Identity,
    ) -> Result<PgYcsb, String> {
        let prepare = |text: &str| {
            let (client, text) = (&client, text.to_owned());
            async move {
                client
                    .prepare(&text)
                    .await
                    .map_err(|e| identity.query_error(message(&e)).to_string())
            }
        };
        let mut updates = Vec::with_capacity(sql.ycsb.updates.len());
        for text in &sql.ycsb.updates {
            updates.push(prepare(text).await?);
        }
        Ok(PgYcsb {
            read: prepare(&sql.ycsb.read).await?,
            updates,
            insert: prepare(&sql.ycsb.insert).await?,
            scan: prepare(&sql.ycsb.scan).await?,
            lock: prepare(&sql.ycsb.lock).await?,
            delete: prepare(&sql.ycsb.delete).await?,
            load: prepare(&sql.load).await?,
            canceller: Canceller::of(&client, link),
            client,
        })
    }
}

fn fetched(row: &Row) -> Fetched {
    Fetched::record((0..row.len()).map(|i| row.get::<_, &str>(i)))
}

impl YcsbSession for PgYcsb {
    async fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        let row = self.client.query_opt(&self.read, &[&key]).await;
        row.map(|r| r.as_ref().map(fetched)).map_err(pg_op_error)
    }

    async fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        self.client
            .execute(&self.updates[field], &[&value, &key])
            .await
            .map_err(pg_op_error)
    }

    async fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError> {
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(values.len() + 1);
        params.push(&key);
        params.extend(values.iter().map(|v| v as &(dyn ToSql + Sync)));
        self.client
            .execute(&self.insert, &params)
            .await
            .map(drop)
            .map_err(pg_op_error)
    }

    async fn scan(&mut self, start: &str, count: usize) -> Result<Fetched, OpError> {
        let rows = self
            .client
            .query(&self.scan, &[&start, &(count as i64)])
            .await
            .map_err(pg_op_error)?;
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
        let tx = self.client.transaction().await.map_err(pg_op_error)?;
        let Some(row) = tx
            .query_opt(&self.lock, &[&key])
            .await
            .map_err(pg_op_error)?
        else {
            return Ok(None);
        };
        let changed = tx
            .execute(&self.updates[field], &[&value, &key])
            .await
            .map_err(pg_op_error)?;
        tx.commit().await.map_err(pg_op_error)?;
        Ok((changed == 1).then(|| fetched(&row)))
    }

    async fn delete(&mut self, key: &str) -> Result<u64, OpError> {
        self.client
            .execute(&self.delete, &[&key])
            .await
            .map_err(pg_op_error)
    }

    async fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError> {
        let keys: Vec<&str> = records.iter().map(|r| r.key.as_str()).collect();
        let fields = records.first().map_or(0, |r| r.values.len());
        let columns: Vec<Vec<&str>> = (0..fields)
            .map(|f| records.iter().map(|r| r.values[f].as_str()).collect())
            .collect();
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&keys];
        params.extend(columns.iter().map(|c| c as &(dyn ToSql + Sync)));
        self.client
            .execute(&self.load, &params)
            .await
            .map(drop)
            .map_err(pg_op_error)
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.canceller.cancel().await
    }
}
