//! MongoDB's (and FerretDB's) YCSB collection and sessions: one document per record, `_id` the
//! record's key (the `_id_` index, verified with `listIndexes`; strings compare by their bytes
//! under the default simple collation, so a scan from a key means what it means on every
//! engine), one text field per `field{n}`. Every write carries the write concern `describe`
//! chose for the configuration; the load is one ordered `insertMany` per batch, and a
//! read-modify-write is one `findAndModify` (a single-document atomic update returning the
//! record as it was: MongoDB's nearest equivalent of a transaction on one record, and the only
//! one a standalone server or FerretDB has).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::driver::OpError;
use common::pool::{BoxFuture, Connector};
use mongodb::bson::{Bson, Document, doc};
use mongodb::error::Error as MongoError;
use mongodb::options::ReturnDocument;
use mongodb::{Client, Collection};

use super::{DATABASE, MongoTarget, max_time_expired, mongo_op_error, open_client};
use crate::session::ycsb::stats::Kind;
use crate::session::ycsb::{Fetched, Record, YcsbSession, YcsbWorkers, async_workers};
use crate::targets::TargetError;
use crate::targets::ycsb::{YcsbTable, YcsbTarget, in_order};

/// Keys asked for in one `$in` when the load's sample is read back.
const READ_CHUNK: usize = 1_000;

/// What the report says a read-modify-write is on this engine.
const RMW_ANSWERED_BY: &str = "findAndModify: one atomic single-document update returning the \
                               record before it (no multi-statement transaction)";

/// `field0` … `field{n-1}`, built once per table.
fn field_names(table: &YcsbTable) -> Arc<[String]> {
    (0..table.shape.fields)
        .map(|i| format!("field{i}"))
        .collect()
}

/// The record's document: `_id` and every field, in order.
fn record_document(key: &str, names: &[String], values: &[&str]) -> Document {
    let mut document = Document::new();
    document.insert("_id", key);
    for (name, value) in names.iter().zip(values) {
        document.insert(name.as_str(), *value);
    }
    document
}

/// A read record's fields (every one but `_id`), counted as the session traits count them; a
/// field that is not text counts with no bytes, so the check of the record's shape fails.
fn fetched(document: &Document) -> Fetched {
    let mut got = Fetched {
        records: 1,
        ..Fetched::default()
    };
    for (name, value) in document {
        if name == "_id" {
            continue;
        }
        got.fields += 1;
        if let Bson::String(text) = value {
            got.bytes += text.len();
        }
    }
    got
}

impl MongoTarget {
    fn ycsb_collection(&self, table: &YcsbTable) -> Collection<Document> {
        self.database().collection(table.name)
    }

    /// `listIndexes` and `listCollections`: the `_id_` index, and no collation on the
    /// collection (the simple one: binary order of the keys).
    async fn verify_ycsb(
        &self,
        table: &YcsbTable,
    ) -> Result<BTreeMap<String, String>, TargetError> {
        let indexes = self
            .ycsb_collection(table)
            .list_index_names()
            .await
            .map_err(|e| self.error(e))?;
        if !indexes.iter().any(|n| n == "_id_") {
            return Err(self.error(format!(
                "{DATABASE}.{} has no _id index (listIndexes shows {indexes:?})",
                table.name
            )));
        }
        let listed = self
            .command(
                DATABASE,
                doc! {"listCollections": 1, "filter": {"name": table.name}},
            )
            .await?;
        let collation = listed
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .ok()
            .and_then(|batch| batch.first())
            .and_then(Bson::as_document)
            .and_then(|c| c.get_document("options").ok())
            .and_then(|o| o.get_document("collation").ok())
            .cloned();
        if let Some(collation) = collation
            && collation.get_str("locale") != Ok("simple")
        {
            return Err(self.error(format!(
                "{DATABASE}.{} has the collation {collation}: its keys would not scan in byte order",
                table.name
            )));
        }
        Ok(BTreeMap::from([
            (
                format!("{}.primary_key", table.name),
                "_id (unique index _id_, listIndexes)".to_owned(),
            ),
            (
                format!("{}.key_order", table.name),
                "simple collation (binary), listCollections".to_owned(),
            ),
        ]))
    }
}

impl YcsbTarget for MongoTarget {
    fn answered_by(&self, kind: Kind) -> Option<String> {
        (kind == Kind::ReadModifyWrite).then(|| RMW_ANSWERED_BY.to_owned())
    }

    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            self.recreate(table.name).await?;
            self.verify_ycsb(table).await
        })
    }

    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(async move {
            // countDocuments counts; the collection's estimate is not a verification.
            self.ycsb_collection(table)
                .count_documents(doc! {})
                .await
                .map_err(|e| self.error(e))
        })
    }

    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>> {
        Box::pin(async move {
            let names = field_names(table);
            let collection = self.ycsb_collection(table);
            let mut found = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(READ_CHUNK) {
                let mut cursor = collection
                    .find(doc! {"_id": {"$in": chunk}})
                    .await
                    .map_err(|e| self.error(e))?;
                while cursor.advance().await.map_err(|e| self.error(e))? {
                    let document = cursor.deserialize_current().map_err(|e| self.error(e))?;
                    let key = document.get_str("_id").map_err(|e| self.error(e))?;
                    // A missing or non-text field reads as empty: the sample check names it.
                    let values = names
                        .iter()
                        .map(|n| document.get_str(n).unwrap_or_default().to_owned())
                        .collect();
                    found.push((key.to_owned(), values));
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
        // The options carry the write concern `describe` set: every session's writes are
        // acknowledged as the configuration asks.
        let options = self.session_options();
        let identity = self.identity.clone();
        let (name, names) = (table.name, field_names(table));
        let connector: Connector<MongoYcsb> = Arc::new(move || {
            let (options, identity, names) = (options.clone(), identity.clone(), names.clone());
            Box::pin(async move {
                let client = open_client(options, &identity)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(MongoYcsb {
                    collection: client.database(DATABASE).collection(name),
                    names,
                    deadline: Instant::now(),
                    _client: client,
                })
            })
        });
        async_workers(size, connector)
    }
}

/// A worker's client (one connection) and its collection.
struct MongoYcsb {
    collection: Collection<Document>,
    names: Arc<[String]>,
    /// When the call under way passes the ceiling.
    deadline: Instant,
    _client: Client,
}

/// How long past the ceiling a call stopped by the server waits for the window to end it.
const EXPIRED_GRACE: Duration = Duration::from_secs(1);

impl MongoYcsb {
    /// The time left to the ceiling, sent as the request's `maxTimeMS` so the server stops the
    /// request there itself (0 would mean no limit: at least a millisecond). The driver exposes
    /// it on `find` and `findAndModify` only, not on `insert`, `update` or `delete`.
    fn max_time(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    }

    /// The server's answer. MaxTimeMSExpired is the ceiling reached on the server: the
    /// window's clock, started before the deadline was, ends the call there and counts it as
    /// a timeout, so the call waits for it rather than answer an error; past a grace it is one.
    async fn answer<T>(&self, result: Result<T, MongoError>) -> Result<T, OpError> {
        match result {
            Err(e) if max_time_expired(&e) => {
                tokio::time::sleep_until((self.deadline + EXPIRED_GRACE).into()).await;
                Err(OpError::Failed(format!(
                    "the server stopped the request at maxTimeMS, yet the ceiling had not passed: {e}"
                )))
            }
            result => result.map_err(mongo_op_error),
        }
    }
}

impl YcsbSession for MongoYcsb {
    fn deadline(&mut self, at: Instant) {
        self.deadline = at;
    }

    async fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        let found = self
            .collection
            .find_one(doc! {"_id": key})
            .max_time(self.max_time())
            .await;
        Ok(self.answer(found).await?.as_ref().map(fetched))
    }

    async fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        let update = doc! {"$set": {self.names[field].as_str(): value}};
        // Matched, not modified: a value that was already there still counts as the update.
        self.collection
            .update_one(doc! {"_id": key}, update)
            .await
            .map(|r| r.matched_count)
            .map_err(mongo_op_error)
    }

    async fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError> {
        self.collection
            .insert_one(record_document(key, &self.names, values))
            .await
            .map(drop)
            .map_err(mongo_op_error)
    }

    async fn scan(&mut self, start: &str, count: usize) -> Result<Fetched, OpError> {
        // YCSB's scans are at most 100 long: the first batch (101 by default) holds them all.
        let cursor = self
            .collection
            .find(doc! {"_id": {"$gte": start}})
            .sort(doc! {"_id": 1})
            .limit(count as i64)
            .max_time(self.max_time())
            .await;
        let mut cursor = self.answer(cursor).await?;
        let mut got = Fetched::default();
        while cursor.advance().await.map_err(mongo_op_error)? {
            let document = cursor
                .deserialize_current()
                .map_err(|e| OpError::Failed(format!("scan from {start}: {e}")))?;
            got.add(fetched(&document));
        }
        Ok(got)
    }

    async fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<Option<Fetched>, OpError> {
        let update = doc! {"$set": {self.names[field].as_str(): value}};
        let before = self
            .collection
            .find_one_and_update(doc! {"_id": key}, update)
            .return_document(ReturnDocument::Before)
            .max_time(self.max_time())
            .await;
        Ok(self.answer(before).await?.as_ref().map(fetched))
    }

    async fn delete(&mut self, key: &str) -> Result<u64, OpError> {
        self.collection
            .delete_one(doc! {"_id": key})
            .await
            .map(|r| r.deleted_count)
            .map_err(mongo_op_error)
    }

    async fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError> {
        let documents = records.iter().map(|r| {
            let values: Vec<&str> = r.values.iter().map(String::as_str).collect();
            record_document(&r.key, &self.names, &values)
        });
        self.collection
            .insert_many(documents)
            .ordered(true)
            .await
            .map(drop)
            .map_err(mongo_op_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_its_key_and_its_fields_and_reads_back_without_the_key() {
        let names: Vec<String> = (0..3).map(|i| format!("field{i}")).collect();
        let document = record_document("user42", &names, &["aa", "bbb", "c"]);
        assert_eq!(
            document,
            doc! {"_id": "user42", "field0": "aa", "field1": "bbb", "field2": "c"}
        );
        assert_eq!(
            fetched(&document),
            Fetched {
                records: 1,
                fields: 3,
                bytes: 6
            }
        );
    }

    #[test]
    fn a_field_that_is_not_text_has_no_bytes() {
        let got = fetched(&doc! {"_id": "k", "field0": 7_i32});
        assert_eq!((got.fields, got.bytes), (1, 0));
    }
}
