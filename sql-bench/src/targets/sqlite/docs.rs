//! SQLite as a document store: one JSON text column per record, expression indexes on
//! `json_extract(doc, '$.field')` for the declared fields, verified from `sqlite_master`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use common::pool::BoxFuture;
use rusqlite::{Connection, ErrorCode, params_from_iter};

use super::{MARKER_TABLE, SqliteTarget, connect, physical};
use crate::query::{
    Collection, CollectionState, Doc, DocError, DocSession, DocSink, IndexEntry, Query,
    covered_field,
};
use crate::targets::Marked;
use crate::targets::sql::{Dialect, Output, Param, select};
use crate::targets::{DocTarget, Identity, TargetError};

struct SqliteDialect;

impl Dialect for SqliteDialect {
    fn table(&self, collection: &Collection) -> String {
        physical(collection.name)
    }
    fn placeholder(&self, n: usize) -> String {
        format!("?{n}")
    }
    fn text_field(&self, _: &Collection, field: &str) -> String {
        format!("json_extract(doc, '$.{field}')")
    }
    fn bool_field(&self, field: &str, value: bool) -> (String, Param) {
        // JSON true/false come out of json_extract as 1/0.
        (
            format!("json_extract(doc, '$.{field}')"),
            Param::Int(i64::from(value)),
        )
    }
    fn number_field(&self, field: &str) -> String {
        format!("json_extract(doc, '$.{field}')")
    }
    fn doc_text(&self) -> &'static str {
        "doc"
    }
}

fn index_name(collection: &Collection, field: &str) -> String {
    format!("{}_{field}", physical(collection.name))
}

impl DocTarget for SqliteTarget {
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(collection.name).await?;
            tokio::task::block_in_place(|| {
                let table = physical(collection.name);
                let mut ddl = format!(
                    "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name TEXT PRIMARY KEY);
                     DROP TABLE IF EXISTS {table};
                     CREATE TABLE {table} (id TEXT PRIMARY KEY, doc TEXT NOT NULL);
                     INSERT OR IGNORE INTO {MARKER_TABLE} (name) VALUES ('{table}');"
                );
                for field in collection.indexed {
                    ddl.push_str(&format!(
                        "CREATE INDEX {} ON {table} (json_extract(doc, '$.{field}'));",
                        index_name(collection, field)
                    ));
                }
                self.control
                    .execute_batch(&format!("BEGIN; {ddl} COMMIT;"))
                    .map_err(|e| self.identity.query_error(e))
            })
        })
    }

    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>> {
        Box::pin(async move {
            tokio::task::block_in_place(|| {
                let table = physical(collection.name);
                let error = |e: rusqlite::Error| self.identity.query_error(e);
                let rows: i64 = self
                    .control
                    .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                    .map_err(error)?;
                let mut stmt = self
                    .control
                    .prepare(
                        "SELECT name, coalesce(sql, '') FROM sqlite_master \
                         WHERE type = 'index' AND tbl_name = ?1",
                    )
                    .map_err(error)?;
                let indexes = stmt
                    .query_map([&table], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                    })
                    .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                    .map_err(error)?
                    .into_iter()
                    .map(|(name, sql)| IndexEntry {
                        // SQLite's own index for a TEXT PRIMARY KEY has no SQL of its own.
                        primary: sql.is_empty() && name.starts_with("sqlite_autoindex_"),
                        covers: covered_field(collection, &sql),
                        definition: if sql.is_empty() {
                            "PRIMARY KEY (id)".to_owned()
                        } else {
                            sql
                        },
                        name,
                    })
                    .collect();
                Ok(CollectionState {
                    rows: rows as u64,
                    indexes,
                })
            })
        })
    }

    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>> {
        let (path, identity, collection) = (self.path.clone(), self.identity.clone(), *collection);
        Box::pin(async move { open_session(&path, &identity, collection) })
    }
}

/// A connection of its own, with a progress handler that interrupts any statement still
/// running at the request's deadline.
fn open_session(
    path: &Path,
    identity: &Identity,
    collection: Collection,
) -> Result<Box<dyn DocSession>, TargetError> {
    let mut conn = connect(path).map_err(|e| identity.query_error(e))?;
    let base = Instant::now();
    let deadline_ns = Arc::new(AtomicU64::new(u64::MAX));
    let watched = deadline_ns.clone();
    conn.progress_handler(
        1_000,
        Some(move || base.elapsed().as_nanos() as u64 > watched.load(Ordering::Relaxed)),
    )
    .map_err(|e| identity.query_error(e))?;
    Ok(Box::new(SqliteDocs {
        conn,
        collection,
        base,
        deadline_ns,
    }))
}

struct SqliteDocs {
    conn: Connection,
    collection: Collection,
    base: Instant,
    deadline_ns: Arc<AtomicU64>,
}

fn bind(params: &[Param]) -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    params
        .iter()
        .map(|p| match p {
            Param::Text(t) => V::Text(t.clone()),
            Param::Bool(b) => V::Integer(i64::from(*b)),
            Param::Int(i) => V::Integer(*i),
            Param::Float(f) => V::Real(*f),
        })
        .collect()
}

fn doc_error(e: rusqlite::Error) -> DocError {
    match e.sqlite_error_code() {
        Some(ErrorCode::OperationInterrupted) => DocError::Timeout,
        _ => DocError::Refused(e.to_string()),
    }
}

impl SqliteDocs {
    fn arm(&self, deadline: Instant) {
        let ns = deadline.saturating_duration_since(self.base).as_nanos() as u64;
        self.deadline_ns.store(ns, Ordering::Relaxed);
    }

    /// Steps through the rows, handing each document on as SQLite produces it.
    fn find_now(
        &mut self,
        query: &Query,
        deadline: Instant,
        sink: &mut DocSink<'_>,
    ) -> Result<(), DocError> {
        self.arm(deadline);
        let (sql, params) = select(&SqliteDialect, &self.collection, query, Output::Documents);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(doc_error)?;
        let mut rows = stmt
            .query(params_from_iter(bind(&params)))
            .map_err(doc_error)?;
        while let Some(row) = rows.next().map_err(doc_error)? {
            let doc = row.get_ref(0).map_err(doc_error)?;
            sink(doc.as_str().map_err(|e| DocError::Refused(e.to_string()))?);
        }
        Ok(())
    }

    fn count_now(&mut self, query: &Query, deadline: Instant) -> Result<u64, DocError> {
        self.arm(deadline);
        let (sql, params) = select(&SqliteDialect, &self.collection, query, Output::Count);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(doc_error)?;
        stmt.query_row(params_from_iter(bind(&params)), |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(doc_error)
    }

    fn insert_now(&mut self, docs: &[Doc], deadline: Instant) -> Result<(), DocError> {
        self.arm(deadline);
        let table = physical(self.collection.name);
        let tx = self.conn.transaction().map_err(doc_error)?;
        {
            let mut insert = tx
                .prepare_cached(&format!("INSERT INTO {table} (id, doc) VALUES (?1, ?2)"))
                .map_err(doc_error)?;
            for doc in docs {
                insert.execute([&doc.id, &doc.json]).map_err(doc_error)?;
            }
        }
        tx.commit().map_err(doc_error)
    }
}

impl DocSession for SqliteDocs {
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move { tokio::task::block_in_place(|| self.insert_now(docs, deadline)) })
    }

    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(
            async move { tokio::task::block_in_place(|| self.find_now(query, deadline, sink)) },
        )
    }

    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>> {
        Box::pin(async move { tokio::task::block_in_place(|| self.count_now(query, deadline)) })
    }

    fn engine_heap_peak_bytes(&self) -> Option<u64> {
        Some(heap_peak_bytes())
    }
}

/// The most memory SQLite's allocator has held at once in this process (its page caches,
/// statements and schemas, over every connection), from its own memory statistics.
#[allow(unsafe_code)]
pub fn heap_peak_bytes() -> u64 {
    // SAFETY: sqlite3_memory_highwater only reads SQLite's global memory statistics (guarded by
    // its own mutex in this threadsafe build); 0 leaves the mark in place.
    let peak = unsafe { rusqlite::ffi::sqlite3_memory_highwater(0) };
    peak.max(0) as u64
}
