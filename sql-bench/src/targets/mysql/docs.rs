//! MariaDB/MySQL as a document store: a JSON document per record, the declared fields exposed
//! as indexed virtual generated columns (`g_field AS (JSON_VALUE(doc, '$.field'))`), verified
//! from `information_schema.STATISTICS`. Statements go through the client's statement cache.

use std::time::Instant;

use common::pool::BoxFuture;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use super::{DATABASE, MARKER, MysqlTarget, connect, physical};
use crate::query::{
    Collection, CollectionState, Doc, DocError, DocSession, DocSink, IndexEntry, Query,
    covered_field,
};
use crate::targets::Marked;
use crate::targets::sql::{Dialect, Output, Param, select};
use crate::targets::{DocTarget, Identity, TargetError};

/// The generated column that exposes declared field `field`.
fn generated(field: &str) -> String {
    format!("g{field}")
}

struct MysqlDialect;

impl Dialect for MysqlDialect {
    fn table(&self, collection: &Collection) -> String {
        physical(collection.name)
    }
    fn placeholder(&self, _: usize) -> String {
        "?".to_owned()
    }
    fn text_field(&self, collection: &Collection, field: &str) -> String {
        // An indexed field must be read through its generated column, or the index is not used.
        if collection.indexed.contains(&field) {
            generated(field)
        } else {
            format!("JSON_VALUE(doc, '$.{field}')")
        }
    }
    fn bool_field(&self, field: &str, value: bool) -> (String, Param) {
        // MariaDB's JSON_VALUE returns a JSON boolean as 1 or 0.
        (
            format!("JSON_VALUE(doc, '$.{field}')"),
            Param::Int(i64::from(value)),
        )
    }
    fn number_field(&self, field: &str) -> String {
        format!("CAST(JSON_VALUE(doc, '$.{field}') AS DOUBLE)")
    }
    fn doc_text(&self) -> &'static str {
        "doc"
    }
}

fn bind(params: Vec<Param>) -> Vec<mysql_async::Value> {
    params
        .into_iter()
        .map(|p| match p {
            Param::Text(t) => t.into(),
            Param::Bool(b) => b.into(),
            Param::Int(i) => i.into(),
            Param::Float(f) => f.into(),
        })
        .collect()
}

impl DocTarget for MysqlTarget {
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(collection.name).await?;
            let table = physical(collection.name);
            let mut columns = vec![
                "id VARCHAR(64) NOT NULL PRIMARY KEY".to_owned(),
                "doc JSON NOT NULL".to_owned(),
            ];
            for field in collection.indexed {
                columns.push(format!(
                    "{} VARCHAR(64) AS (JSON_VALUE(doc, '$.{field}')) VIRTUAL",
                    generated(field)
                ));
            }
            for field in collection.indexed {
                columns.push(format!(
                    "INDEX {}_{field} ({})",
                    collection.name,
                    generated(field)
                ));
            }
            for ddl in [
                format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"),
                format!("DROP TABLE IF EXISTS {table}"),
                format!(
                    "CREATE TABLE {table} ({}) ENGINE=InnoDB COMMENT='{MARKER}'",
                    columns.join(", ")
                ),
            ] {
                self.control
                    .query_drop(ddl)
                    .await
                    .map_err(|e| self.error(e))?;
            }
            Ok(())
        })
    }

    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>> {
        Box::pin(async move {
            let rows: Option<u64> = self
                .control
                .query_first(format!(
                    "SELECT COUNT(*) FROM {}",
                    physical(collection.name)
                ))
                .await
                .map_err(|e| self.error(e))?;
            let catalog: Vec<(String, String, Option<String>)> = self
                .control
                .exec(
                    "SELECT s.INDEX_NAME, GROUP_CONCAT(s.COLUMN_NAME ORDER BY s.SEQ_IN_INDEX),
                            MAX(c.GENERATION_EXPRESSION)
                       FROM information_schema.STATISTICS s
                       LEFT JOIN information_schema.COLUMNS c
                         ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME
                        AND c.COLUMN_NAME = s.COLUMN_NAME
                      WHERE s.TABLE_SCHEMA = ? AND s.TABLE_NAME = ?
                      GROUP BY s.INDEX_NAME ORDER BY s.INDEX_NAME",
                    (DATABASE, collection.name),
                )
                .await
                .map_err(|e| self.error(e))?;
            let indexes = catalog
                .into_iter()
                .map(|(name, columns, expression)| {
                    let definition = match expression {
                        Some(expression) => format!("({columns}) generated as {expression}"),
                        None => format!("({columns})"),
                    };
                    IndexEntry {
                        primary: name == "PRIMARY",
                        covers: covered_field(collection, &definition),
                        name,
                        definition,
                    }
                })
                .collect();
            Ok(CollectionState {
                rows: rows.unwrap_or(0),
                indexes,
            })
        })
    }

    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>> {
        Box::pin(open_session(
            self.opts.clone(),
            self.identity.clone(),
            *collection,
        ))
    }
}

async fn open_session(
    opts: Opts,
    identity: Identity,
    collection: Collection,
) -> Result<Box<dyn DocSession>, TargetError> {
    let conn = connect(&opts, &identity).await?;
    Ok(Box::new(MysqlDocs {
        conn,
        opts,
        identity,
        collection,
    }))
}

struct MysqlDocs {
    conn: Conn,
    opts: Opts,
    identity: Identity,
    collection: Collection,
}

fn doc_error(e: mysql_async::Error) -> DocError {
    if e.is_fatal() {
        DocError::Lost(e.to_string())
    } else {
        DocError::Refused(e.to_string())
    }
}

impl MysqlDocs {
    /// Past the deadline the statement is killed from a second connection, and this session
    /// continues on a fresh connection (the interrupted one is in an unknown state).
    async fn give_up(&mut self) -> DocError {
        let id = self.conn.id();
        match connect(&self.opts, &self.identity).await {
            Ok(mut killer) => {
                let _ = killer.query_drop(format!("KILL QUERY {id}")).await;
                self.conn = killer;
                DocError::Timeout
            }
            Err(e) => DocError::Lost(e.to_string()),
        }
    }
}

impl DocSession for MysqlDocs {
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let sql = format!(
                "INSERT INTO {} (id, doc) VALUES {}",
                physical(self.collection.name),
                vec!["(?, ?)"; docs.len()].join(",")
            );
            let values: Vec<mysql_async::Value> = docs
                .iter()
                .flat_map(|d| [d.id.as_str().into(), d.json.as_str().into()])
                .collect();
            match tokio::time::timeout_at(deadline.into(), self.conn.exec_drop(sql, values)).await {
                Ok(result) => result.map_err(doc_error),
                Err(_) => Err(self.give_up().await),
            }
        })
    }

    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let (sql, params) = select(&MysqlDialect, &self.collection, query, Output::Documents);
            let conn = &mut self.conn;
            // Row by row off the connection: a whole-collection answer is never held.
            let stream = async move {
                let mut rows = conn.exec_iter(sql, bind(params)).await?;
                let mut undecodable = None;
                rows.for_each(|row| match row.as_ref(0) {
                    Some(mysql_async::Value::Bytes(bytes)) => match std::str::from_utf8(bytes) {
                        Ok(doc) => sink(doc),
                        Err(e) => {
                            undecodable
                                .get_or_insert_with(|| format!("a document is not UTF-8: {e}"));
                        }
                    },
                    other => {
                        undecodable
                            .get_or_insert_with(|| format!("a document came back as {other:?}"));
                    }
                })
                .await?;
                Ok(undecodable)
            };
            match tokio::time::timeout_at(deadline.into(), stream).await {
                Ok(Ok(None)) => Ok(()),
                Ok(Ok(Some(message))) => Err(DocError::Refused(message)),
                Ok(Err(e)) => Err(doc_error(e)),
                Err(_) => Err(self.give_up().await),
            }
        })
    }

    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>> {
        Box::pin(async move {
            let (sql, params) = select(&MysqlDialect, &self.collection, query, Output::Count);
            let request = self.conn.exec_first::<u64, _, _>(sql, bind(params));
            match tokio::time::timeout_at(deadline.into(), request).await {
                Ok(result) => result.map(Option::unwrap_or_default).map_err(doc_error),
                Err(_) => Err(self.give_up().await),
            }
        })
    }
}
