//! Cassandra's and ScyllaDB's YCSB table and sessions: `ycsb_key text PRIMARY KEY` (the
//! partition key, verified in `system_schema.columns`) and one `text` column per field, every
//! statement prepared per connection and sent at the configuration's consistency. What CQL
//! cannot do as the workload means it is said: partitions are ordered by the token of their
//! key, so a scan from a key is refused; `UPDATE` and `DELETE` are blind writes that do not
//! say whether the record was there; a read-modify-write is a lightweight transaction (the
//! read, then `UPDATE … IF field = the value read`, both again when the field changed in
//! between). The load sends each batch's records as concurrent single-partition inserts (a
//! multi-partition `BATCH` of 1 KB records passes the server's batch size limit and is slower,
//! as Cassandra documents).

use std::collections::BTreeMap;
use std::sync::Arc;

use common::driver::{OpError, failed};
use common::pool::{BoxFuture, Connector};
use futures_util::future::try_join_all;
use scylla::client::session::Session;
use scylla::deserialize::row::ColumnIterator;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::Row;

use super::{CqlTarget, PAGE_ROWS, connect, cql_op_error, each_row};
use crate::session::ycsb::stats::Kind;
use crate::session::ycsb::{Fetched, Record, YcsbSession, YcsbWorkers, async_workers};
use crate::targets::TargetError;
use crate::targets::ycsb::{YcsbTable, YcsbTarget, in_order};

/// Inserts of one load batch in flight at once on a worker's connection.
const LOAD_IN_FLIGHT: usize = 64;
/// Keys in one `IN` when the load's sample is read back.
const READ_CHUNK: usize = 100;

const SCAN_REFUSED: &str = "CQL orders a table's partitions by the token of their key \
    (Murmur3Partitioner), not by the key: a scan from a key in key order cannot be asked \
    (YCSB's Cassandra binding scans a token() range, which is other records)";
const UPDATE_ANSWERED_BY: &str = "UPDATE is a blind write (an upsert): the server does not say \
    whether the record existed, so it counts as one changed, as in YCSB's Cassandra binding";
const DELETE_ANSWERED_BY: &str = "DELETE is a blind write: the server does not say whether the \
    record existed, so it counts as one deleted";
const RMW_ANSWERED_BY: &str = "a lightweight transaction: SELECT, then UPDATE … IF field = the \
    value read (Paxos compare-and-set; a record changed in between is read again and the write \
    retried, as PostgreSQL's row lock would make it wait)";
/// Compare-and-sets in a row that find the field changed before a read-modify-write fails.
const CONFLICT_RETRIES: usize = 16;

/// The statements of one table, by the text each is prepared from.
#[derive(Debug, Clone)]
struct Cql {
    read: String,
    updates: Vec<String>,
    swaps: Vec<String>,
    insert: String,
    delete: String,
}

impl Cql {
    fn of(table: &YcsbTable, name: &str) -> Cql {
        let fields = table.field_list();
        let n = table.shape.fields;
        Cql {
            read: format!("SELECT {fields} FROM {name} WHERE ycsb_key = ?"),
            updates: (0..n)
                .map(|i| format!("UPDATE {name} SET field{i} = ? WHERE ycsb_key = ?"))
                .collect(),
            swaps: (0..n)
                .map(|i| {
                    format!("UPDATE {name} SET field{i} = ? WHERE ycsb_key = ? IF field{i} = ?")
                })
                .collect(),
            insert: format!(
                "INSERT INTO {name} (ycsb_key, {fields}) VALUES ({})",
                vec!["?"; n + 1].join(", ")
            ),
            delete: format!("DELETE FROM {name} WHERE ycsb_key = ?"),
        }
    }
}

impl CqlTarget {
    /// The partition key from `system_schema.columns` and the partitioner from `system.local`.
    async fn verify_ycsb(
        &self,
        table: &YcsbTable,
    ) -> Result<BTreeMap<String, String>, TargetError> {
        let keys: Vec<(String,)> = self
            .rows(
                "SELECT column_name FROM system_schema.columns \
                 WHERE keyspace_name = ? AND table_name = ? AND kind = 'partition_key' ALLOW FILTERING",
                (self.keyspace(), table.name),
            )
            .await?;
        if keys.len() != 1 || keys[0].0 != "ycsb_key" {
            return Err(self.error(format!(
                "{} has no partition key on ycsb_key (system_schema.columns shows {keys:?})",
                self.physical(table.name)
            )));
        }
        let partitioner: Vec<(Option<String>,)> = self
            .rows(
                "SELECT partitioner FROM system.local WHERE key = 'local'",
                (),
            )
            .await?;
        let partitioner = partitioner.into_iter().next().and_then(|p| p.0);
        Ok(BTreeMap::from([
            (
                format!("{}.primary_key", table.name),
                "ycsb_key (partition key, system_schema.columns)".to_owned(),
            ),
            (
                format!("{}.partitioner", table.name),
                partitioner.unwrap_or_else(|| "not reported".into()),
            ),
        ]))
    }
}

impl YcsbTarget for CqlTarget {
    fn refuses(&self, kind: Kind) -> Option<String> {
        (kind == Kind::Scan).then(|| SCAN_REFUSED.to_owned())
    }

    fn answered_by(&self, kind: Kind) -> Option<String> {
        let how = match kind {
            Kind::Update => UPDATE_ANSWERED_BY,
            Kind::Delete => DELETE_ANSWERED_BY,
            Kind::ReadModifyWrite => RMW_ANSWERED_BY,
            _ => return None,
        };
        Some(how.to_owned())
    }

    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let columns: Vec<String> = (0..table.shape.fields)
                .map(|i| format!("field{i} text"))
                .collect();
            self.recreate(
                table.name,
                &format!("ycsb_key text PRIMARY KEY, {}", columns.join(", ")),
            )
            .await?;
            self.verify_ycsb(table).await
        })
    }

    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(async move {
            // Paged through the keys: exact, and never the server's range timeout of a COUNT(*).
            let mut keys = self
                .control
                .prepare(format!(
                    "SELECT ycsb_key FROM {}",
                    self.physical(table.name)
                ))
                .await
                .map_err(|e| self.error(e))?;
            keys.set_page_size(PAGE_ROWS);
            let mut count = 0_u64;
            each_row(&self.control, &keys, &(), |_: (String,)| count += 1)
                .await
                .map_err(|e| self.error(e))?;
            Ok(count)
        })
    }

    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>> {
        Box::pin(async move {
            let cql = format!(
                "SELECT ycsb_key, {} FROM {} WHERE ycsb_key IN ?",
                table.field_list(),
                self.physical(table.name)
            );
            let mut found = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(READ_CHUNK) {
                let rows: Vec<Row> = self.rows(&cql, (chunk.to_vec(),)).await?;
                for row in rows {
                    // A null field reads as empty: the sample check names the record.
                    let mut text = row.columns.iter().map(|c| {
                        c.as_ref()
                            .and_then(|v| v.as_text())
                            .cloned()
                            .unwrap_or_default()
                    });
                    let key = text.next().unwrap_or_default();
                    found.push((key, text.collect()));
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
        // `describe` set the consistency the configuration asks for: every session sends it.
        let (address, identity, consistency) = (
            self.address.clone(),
            self.identity.clone(),
            self.consistency,
        );
        let cql = Arc::new(Cql::of(table, &self.physical(table.name)));
        let connector: Connector<CqlYcsb> = Arc::new(move || {
            let (address, identity, cql) = (address.clone(), identity.clone(), cql.clone());
            Box::pin(async move {
                let session = connect(&address, &identity, consistency)
                    .await
                    .map_err(|e| e.to_string())?;
                CqlYcsb::prepare(session, &cql)
                    .await
                    .map_err(|e| identity.query_error(e).to_string())
            })
        });
        async_workers(size, connector)
    }
}

/// A worker's session (one connection) and its prepared statements.
struct CqlYcsb {
    session: Session,
    read: PreparedStatement,
    updates: Vec<PreparedStatement>,
    swaps: Vec<PreparedStatement>,
    insert: PreparedStatement,
    delete: PreparedStatement,
}

impl CqlYcsb {
    async fn prepare(session: Session, cql: &Cql) -> Result<CqlYcsb, String> {
        let prepare = |text: &str| {
            let (session, text) = (&session, text.to_owned());
            async move { session.prepare(text).await.map_err(|e| e.to_string()) }
        };
        let mut updates = Vec::with_capacity(cql.updates.len());
        let mut swaps = Vec::with_capacity(cql.swaps.len());
        for (update, swap) in cql.updates.iter().zip(&cql.swaps) {
            updates.push(prepare(update).await?);
            swaps.push(prepare(swap).await?);
        }
        Ok(CqlYcsb {
            read: prepare(&cql.read).await?,
            insert: prepare(&cql.insert).await?,
            delete: prepare(&cql.delete).await?,
            updates,
            swaps,
            session,
        })
    }

    /// Every field of the record, as the rows of a read return them; `None` when absent.
    async fn read_fields(&self, key: &str) -> Result<Option<(Fetched, Vec<String>)>, OpError> {
        let result = self
            .session
            .execute_unpaged(&self.read, (key,))
            .await
            .map_err(cql_op_error)?;
        let rows = result.into_rows_result().map_err(failed)?;
        let Some(row) = rows.maybe_first_row::<Row>().map_err(failed)? else {
            return Ok(None);
        };
        let values: Vec<String> = row
            .columns
            .into_iter()
            .map(|c| c.and_then(|v| v.into_string()).unwrap_or_default())
            .collect();
        let got = Fetched::record(values.iter().map(String::as_str));
        Ok(Some((got, values)))
    }
}

/// What a read's row holds, counted from the frame without copying it out.
fn fetched(result: QueryResult) -> Result<Option<Fetched>, OpError> {
    let rows = result.into_rows_result().map_err(failed)?;
    let Some(columns) = rows.maybe_first_row::<ColumnIterator>().map_err(failed)? else {
        return Ok(None);
    };
    let mut got = Fetched {
        records: 1,
        ..Fetched::default()
    };
    for column in columns {
        let column = column.map_err(failed)?;
        got.fields += 1;
        got.bytes += column.slice.map_or(0, |s| s.as_slice().len());
    }
    Ok(Some(got))
}

/// Whether a lightweight transaction's `[applied]` (its first column) is true.
fn applied(result: QueryResult) -> Result<bool, OpError> {
    let rows = result.into_rows_result().map_err(failed)?;
    let Some(mut columns) = rows.maybe_first_row::<ColumnIterator>().map_err(failed)? else {
        return Err(failed("a conditional update returned no [applied] row"));
    };
    let first = columns.next().transpose().map_err(failed)?;
    Ok(first
        .and_then(|c| c.slice)
        .is_some_and(|s| s.as_slice() == [1]))
}

impl YcsbSession for CqlYcsb {
    async fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        let result = self
            .session
            .execute_unpaged(&self.read, (key,))
            .await
            .map_err(cql_op_error)?;
        fetched(result)
    }

    async fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        self.session
            .execute_unpaged(&self.updates[field], (value, key))
            .await
            .map(|_| 1)
            .map_err(cql_op_error)
    }

    async fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError> {
        let mut bound: Vec<&str> = Vec::with_capacity(values.len() + 1);
        bound.push(key);
        bound.extend_from_slice(values);
        self.session
            .execute_unpaged(&self.insert, bound)
            .await
            .map(drop)
            .map_err(cql_op_error)
    }

    async fn scan(&mut self, start: &str, _count: usize) -> Result<Fetched, OpError> {
        // Refused before any window (YcsbTarget::refuses); never reached.
        Err(OpError::Fatal(format!("scan from {start}: {SCAN_REFUSED}")))
    }

    async fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<Option<Fetched>, OpError> {
        for _ in 0..CONFLICT_RETRIES {
            let Some((got, values)) = self.read_fields(key).await? else {
                return Ok(None);
            };
            let result = self
                .session
                .execute_unpaged(&self.swaps[field], (value, key, values[field].as_str()))
                .await
                .map_err(cql_op_error)?;
            if applied(result)? {
                return Ok(Some(got));
            }
        }
        Err(OpError::Failed(format!(
            "read-modify-write {key}: field{field} changed between the read and the write \
             {CONFLICT_RETRIES} times in a row"
        )))
    }

    async fn delete(&mut self, key: &str) -> Result<u64, OpError> {
        self.session
            .execute_unpaged(&self.delete, (key,))
            .await
            .map(|_| 1)
            .map_err(cql_op_error)
    }

    async fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError> {
        for chunk in records.chunks(LOAD_IN_FLIGHT) {
            let inserts = chunk.iter().map(|r| {
                let mut bound: Vec<&str> = Vec::with_capacity(r.values.len() + 1);
                bound.push(&r.key);
                bound.extend(r.values.iter().map(String::as_str));
                self.session.execute_unpaged(&self.insert, bound)
            });
            try_join_all(inserts).await.map_err(cql_op_error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ycsb::op::Shape;

    #[test]
    fn every_field_has_its_own_update_and_conditional_update() {
        let table = YcsbTable {
            name: "ycsb",
            shape: Shape {
                fields: 2,
                field_length: 10,
            },
        };
        let cql = Cql::of(&table, "fairbench.ycsb");
        assert_eq!(
            cql.swaps[1],
            "UPDATE fairbench.ycsb SET field1 = ? WHERE ycsb_key = ? IF field1 = ?"
        );
        assert_eq!(
            cql.insert,
            "INSERT INTO fairbench.ycsb (ycsb_key, field0, field1) VALUES (?, ?, ?)"
        );
        assert_eq!(cql.updates.len(), 2);
    }
}
