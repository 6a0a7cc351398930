//! PostgreSQL as a document store: a JSONB document per record, expression indexes on
//! `(doc ->> 'field')` for the declared fields, verified from `pg_index`. Statements are
//! prepared once per distinct SQL text, as a driver's statement cache does.

use std::collections::HashMap;
use std::error::Error as _;
use std::time::Instant;

use bytes::BytesMut;
use common::pool::BoxFuture;
use futures_util::TryStreamExt;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Statement};

use super::{Canceller, Link, MARKER, PostgresTarget, SCHEMA, connect, message, physical};
use crate::query::{
    Collection, CollectionState, Doc, DocError, DocSession, DocSink, IndexEntry, Query,
    covered_field,
};
use crate::targets::Marked;
use crate::targets::sql::{Dialect, Output, Param, select};
use crate::targets::{DocTarget, Identity, TargetError};

struct PostgresDialect;

impl Dialect for PostgresDialect {
    fn table(&self, collection: &Collection) -> String {
        physical(collection.name)
    }
    fn placeholder(&self, n: usize) -> String {
        format!("${n}")
    }
    fn text_field(&self, _: &Collection, field: &str) -> String {
        format!("(doc ->> '{field}')")
    }
    fn bool_field(&self, field: &str, value: bool) -> (String, Param) {
        (format!("(doc ->> '{field}')::boolean"), Param::Bool(value))
    }
    fn number_field(&self, field: &str) -> String {
        format!("(doc ->> '{field}')::float8")
    }
    fn doc_text(&self) -> &'static str {
        "doc::text"
    }
}

impl ToSql for Param {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Param::Text(text) => text.to_sql(ty, out),
            Param::Bool(value) => value.to_sql(ty, out),
            Param::Int(value) => value.to_sql(ty, out),
            Param::Float(value) => value.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Each value checks its own type in `to_sql` (the server infers one per placeholder).
        true
    }

    to_sql_checked!();
}

fn index_name(collection: &Collection, field: &str) -> String {
    format!("{}_{field}", collection.name)
}

impl DocTarget for PostgresTarget {
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(collection.name).await?;
            let table = physical(collection.name);
            let mut ddl = format!(
                "CREATE SCHEMA IF NOT EXISTS {SCHEMA};
                 DROP TABLE IF EXISTS {table};
                 CREATE TABLE {table} (id TEXT PRIMARY KEY, doc JSONB NOT NULL);
                 COMMENT ON TABLE {table} IS '{MARKER}';"
            );
            for field in collection.indexed {
                ddl.push_str(&format!(
                    "CREATE INDEX {} ON {table} ((doc ->> '{field}'));",
                    index_name(collection, field)
                ));
            }
            self.control
                .batch_execute(&format!("BEGIN; {ddl} COMMIT;"))
                .await
                .map_err(|e| self.error(message(&e)))
        })
    }

    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>> {
        Box::pin(async move {
            let error = |e: tokio_postgres::Error| self.error(message(&e));
            let rows: i64 = self
                .control
                .query_one(
                    &format!("SELECT count(*) FROM {}", physical(collection.name)),
                    &[],
                )
                .await
                .map_err(error)?
                .get(0);
            let catalog = self
                .control
                .query(
                    "SELECT i.relname::text, pg_get_indexdef(i.oid), x.indisprimary
                      FROM pg_index x
                      JOIN pg_class i ON i.oid = x.indexrelid
                      JOIN pg_class t ON t.oid = x.indrelid
                      JOIN pg_namespace n ON n.oid = t.relnamespace
                     WHERE n.nspname = $1 AND t.relname = $2
                     ORDER BY 1",
                    &[&SCHEMA, &collection.name],
                )
                .await
                .map_err(error)?;
            let indexes = catalog
                .iter()
                .map(|row| {
                    let definition: String = row.get(1);
                    IndexEntry {
                        name: row.get(0),
                        covers: covered_field(collection, &definition),
                        primary: row.get(2),
                        definition,
                    }
                })
                .collect();
            Ok(CollectionState {
                rows: rows as u64,
                indexes,
            })
        })
    }

    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>> {
        Box::pin(open_session(&self.link, &self.identity, *collection))
    }
}

async fn open_session(
    link: &Link,
    identity: &Identity,
    collection: Collection,
) -> Result<Box<dyn DocSession>, TargetError> {
    let client = connect(link, identity).await?;
    Ok(Box::new(PostgresDocs {
        canceller: Canceller::of(&client, link),
        client,
        collection,
        statements: HashMap::new(),
    }))
}

struct PostgresDocs {
    client: Client,
    canceller: Canceller,
    collection: Collection,
    /// Prepared statements by SQL text.
    statements: HashMap<String, Statement>,
}

fn doc_error(e: &tokio_postgres::Error) -> DocError {
    if e.is_closed() || (e.as_db_error().is_none() && e.source().is_some()) {
        DocError::Lost(message(e))
    } else {
        DocError::Refused(message(e))
    }
}

impl PostgresDocs {
    async fn statement(&mut self, sql: String) -> Result<Statement, DocError> {
        if let Some(statement) = self.statements.get(&sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(&sql).await.map_err(|e| doc_error(&e))?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    /// Runs `request` until `deadline`; past it, asks the server to cancel the statement.
    async fn bounded<T>(
        &self,
        deadline: Instant,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, DocError> {
        match tokio::time::timeout_at(deadline.into(), request).await {
            Ok(result) => result.map_err(|e| doc_error(&e)),
            Err(_) => {
                // The connection stays usable; the cancelled statement's error is discarded.
                let _ = self.canceller.cancel().await;
                Err(DocError::Timeout)
            }
        }
    }
}

fn params(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

impl DocSession for PostgresDocs {
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let sql = format!(
                "INSERT INTO {} (id, doc) SELECT i, d::jsonb FROM unnest($1::text[], $2::text[]) AS u(i, d)",
                physical(self.collection.name)
            );
            let statement = self.statement(sql).await?;
            let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
            let json: Vec<&str> = docs.iter().map(|d| d.json.as_str()).collect();
            self.bounded(deadline, self.client.execute(&statement, &[&ids, &json]))
                .await
                .map(drop)
        })
    }

    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let (sql, values) =
                select(&PostgresDialect, &self.collection, query, Output::Documents);
            let statement = self.statement(sql).await?;
            let client = &self.client;
            // Rows are read off the connection as they come (the driver's channel holds one
            // batch of messages at a time), so a whole-collection answer is never held.
            let stream = async {
                let rows = client.query_raw(&statement, params(&values)).await?;
                let mut rows = std::pin::pin!(rows);
                while let Some(row) = rows.try_next().await? {
                    sink(row.try_get::<_, &str>(0)?);
                }
                Ok::<(), tokio_postgres::Error>(())
            };
            self.bounded(deadline, stream).await
        })
    }

    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>> {
        Box::pin(async move {
            let (sql, values) = select(&PostgresDialect, &self.collection, query, Output::Count);
            let statement = self.statement(sql).await?;
            let row = self
                .bounded(
                    deadline,
                    self.client.query_one(&statement, &params(&values)),
                )
                .await?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }
}
