//! Cassandra/ScyllaDB as the application's document store: one row per record with the JSON
//! document in `doc`, each top-level scalar field mapped to a typed column on first sight (as
//! an auto-mapping adapter does), and a secondary index per declared field, verified from
//! `system_schema.indexes`. CQL filters on the server (`ALLOW FILTERING`), but has no OFFSET
//! and orders only by clustering columns: a sorted or skipped page is emulated by paging
//! through the matching keys, and a `COUNT(*)` past the server's own timeout becomes a paged
//! count. Each emulation is reported as how the engine answered.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use common::pool::BoxFuture;
use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlValue;
use serde_json::Value as Json;
use tokio::task::JoinSet;

use super::{
    CqlError, CqlTarget, PAGE_ROWS, connect, decode, each_row, is_lost, is_server_timeout, rows,
};
use crate::query::{
    Collection, CollectionState, Condition, Doc, DocError, DocSession, DocSink, IndexEntry, Query,
    Value, within,
};
use crate::targets::{DocTarget, TargetError};

/// Inserts of one batch in flight at once (CQL has no multi-row transaction; an application
/// writes a batch as concurrent single-row inserts).
const INSERTS_IN_FLIGHT: usize = 64;

/// A CQL column name for a document field (quoted: fields may start with an underscore).
fn column(field: &str) -> String {
    format!("\"{}\"", field.replace('"', "\"\""))
}

fn index_name(collection: &Collection, field: &str) -> String {
    format!("{}_{}", collection.name, field.trim_start_matches('_'))
}

/// The CQL type a JSON scalar is stored as; other values stay only in `doc`.
fn cql_type(value: &Json) -> Option<&'static str> {
    match value {
        Json::String(_) => Some("text"),
        Json::Bool(_) => Some("boolean"),
        Json::Number(_) => Some("double"),
        _ => None,
    }
}

fn cql_value(value: &Json, kind: &str) -> Option<CqlValue> {
    match (value, kind) {
        (Json::String(s), "text") => Some(CqlValue::Text(s.clone())),
        (Json::Bool(b), "boolean") => Some(CqlValue::Boolean(*b)),
        (Json::Number(n), "double") => n.as_f64().map(CqlValue::Double),
        _ => None,
    }
}

/// A row of `system_schema.indexes`: name, kind and options.
type IndexRow = (String, Option<String>, Option<BTreeMap<String, String>>);

impl DocTarget for CqlTarget {
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let mut columns = "id text PRIMARY KEY, doc text".to_owned();
            for field in collection.indexed {
                columns.push_str(&format!(", {} text", column(field)));
            }
            self.recreate(collection.name, &columns).await?;
            let table = self.physical(collection.name);
            for field in collection.indexed {
                self.execute(&format!(
                    "CREATE INDEX {} ON {table} ({})",
                    index_name(collection, field),
                    column(field)
                ))
                .await?;
            }
            Ok(())
        })
    }

    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>> {
        Box::pin(async move {
            let table = self.physical(collection.name);
            let (count, _) = exact_count(&self.control, &table, &Query::default(), false)
                .await
                .map_err(|e| self.error(e))?;
            let catalog: Vec<IndexRow> = self
                .rows(
                    "SELECT index_name, kind, options FROM system_schema.indexes \
                 WHERE keyspace_name = ? AND table_name = ?",
                    (self.keyspace(), collection.name),
                )
                .await?;
            let mut indexes = vec![IndexEntry {
                name: "id".into(),
                definition: "partition key (system_schema.columns)".into(),
                primary: true,
                covers: None,
            }];
            for (name, kind, options) in catalog {
                let target_column = options
                    .as_ref()
                    .and_then(|o| o.get("target"))
                    .map(|t| t.trim_matches('"').to_owned())
                    .unwrap_or_default();
                indexes.push(IndexEntry {
                    name,
                    definition: format!(
                        "{} index on {target_column} ({options:?})",
                        kind.unwrap_or_default()
                    ),
                    primary: false,
                    covers: collection
                        .indexed
                        .iter()
                        .copied()
                        .find(|f| *f == target_column),
                });
            }
            Ok(CollectionState {
                rows: count,
                indexes,
            })
        })
    }

    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>> {
        let collection = *collection;
        Box::pin(async move {
            let session = connect(&self.address, &self.identity, self.consistency).await?;
            let known: Vec<(String, String)> = rows(
                &session,
                "SELECT column_name, type FROM system_schema.columns \
                 WHERE keyspace_name = ? AND table_name = ?",
                (self.keyspace(), collection.name),
            )
            .await
            .map_err(|e| self.error(e))?;
            let docs: Box<dyn DocSession> = Box::new(CqlDocs {
                session: Arc::new(session),
                table: self.physical(collection.name),
                columns: known
                    .into_iter()
                    .filter(|(name, _)| name != "id" && name != "doc")
                    .collect(),
                insert: None,
                statements: HashMap::new(),
                count_paged: self.address.count_paged,
                method: None,
            });
            Ok(docs)
        })
    }
}

struct CqlDocs {
    session: Arc<Session>,
    table: String,
    /// Typed columns beyond `id` and `doc`: field → CQL type.
    columns: BTreeMap<String, String>,
    /// The insert over every known column, in `columns` order.
    insert: Option<Arc<PreparedStatement>>,
    /// Prepared statements by CQL text.
    statements: HashMap<String, PreparedStatement>,
    /// Counting pages through the keys (the server's `COUNT(*)` timed out, or the URL said so).
    count_paged: bool,
    /// How the last request was answered, when the adapter emulated it.
    method: Option<String>,
}

fn doc_error(e: impl Into<CqlError>) -> DocError {
    match e.into() {
        CqlError::Execution(e) if is_lost(&e) => DocError::Lost(e.to_string()),
        other => DocError::Refused(other.to_string()),
    }
}

fn bind(value: &Value) -> CqlValue {
    match value {
        Value::Text(text) => CqlValue::Text(text.clone()),
        Value::Bool(flag) => CqlValue::Boolean(*flag),
        Value::Number(number) => CqlValue::Double(*number),
    }
}

/// The WHERE clause of a query and its values; `ALLOW FILTERING` whenever a condition is on
/// anything but the key, so the server filters (CQL refuses otherwise).
fn conditions(query: &Query) -> (String, Vec<CqlValue>) {
    let mut clauses = Vec::new();
    let mut values = Vec::new();
    if let Some(id) = &query.id {
        clauses.push("id = ?".to_owned());
        values.push(CqlValue::Text(id.clone()));
    }
    for filter in &query.filters {
        match &filter.condition {
            Condition::Equals(value) => {
                clauses.push(format!("{} = ?", column(filter.field)));
                values.push(bind(value));
            }
            Condition::GreaterThan(bound) => {
                clauses.push(format!("{} > ?", column(filter.field)));
                values.push(CqlValue::Double(*bound));
            }
        }
    }
    if clauses.is_empty() {
        return (String::new(), values);
    }
    let filtering = if query.filters.is_empty() {
        ""
    } else {
        " ALLOW FILTERING"
    };
    (
        format!(" WHERE {}{filtering}", clauses.join(" AND ")),
        values,
    )
}

/// The exact number of rows matching `query`: `COUNT(*)` on the server, or — when `paged`, or
/// when the server gives up at its own timeout — by paging through the matching keys. Also
/// says how it was answered.
async fn exact_count(
    session: &Session,
    table: &str,
    query: &Query,
    paged: bool,
) -> Result<(u64, String), CqlError> {
    let (filter, values) = conditions(query);
    let mut why = "the URL asks for it (count=paged)".to_owned();
    if !paged {
        let mut count = session
            .prepare(format!("SELECT COUNT(*) FROM {table}{filter}"))
            .await?;
        count.set_page_size(PAGE_ROWS);
        match session.execute_unpaged(&count, &values).await {
            Ok(result) => {
                let rows = result.into_rows_result().map_err(decode)?;
                let (n,) = rows.single_row::<(i64,)>().map_err(decode)?;
                return Ok((n as u64, "COUNT(*) answered by the server".into()));
            }
            Err(e) if is_server_timeout(&e) => {
                why = format!("COUNT(*) exceeded the server's own timeout ({e})");
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut keys = session
        .prepare(format!("SELECT id FROM {table}{filter}"))
        .await?;
    keys.set_page_size(PAGE_ROWS);
    let mut n = 0u64;
    each_row(session, &keys, &values, |_: (String,)| n += 1).await?;
    Ok((
        n,
        format!("counted by paging through the matching keys, {PAGE_ROWS} a page: {why}"),
    ))
}

impl CqlDocs {
    async fn statement(&mut self, cql: String) -> Result<PreparedStatement, DocError> {
        if let Some(statement) = self.statements.get(&cql) {
            return Ok(statement.clone());
        }
        let mut statement = self
            .session
            .prepare(cql.as_str())
            .await
            .map_err(doc_error)?;
        statement.set_page_size(PAGE_ROWS);
        self.statements.insert(cql, statement.clone());
        Ok(statement)
    }

    /// Adds a typed column for every top-level scalar field not seen before, and prepares the
    /// insert over all of them.
    async fn map_fields(
        &mut self,
        parsed: &[serde_json::Map<String, Json>],
    ) -> Result<(), DocError> {
        let mut added = false;
        for doc in parsed {
            for (field, value) in doc {
                if field == "id" || field == "doc" || self.columns.contains_key(field) {
                    continue;
                }
                let Some(kind) = cql_type(value) else {
                    continue;
                };
                self.session
                    .query_unpaged(
                        format!("ALTER TABLE {} ADD {} {kind}", self.table, column(field)),
                        (),
                    )
                    .await
                    .map_err(doc_error)?;
                self.columns.insert(field.clone(), kind.to_owned());
                added = true;
            }
        }
        if added || self.insert.is_none() {
            let names: Vec<String> = self.columns.keys().map(|f| column(f)).collect();
            let cql = format!(
                "INSERT INTO {} (id, doc{}{}) VALUES (?, ?{})",
                self.table,
                if names.is_empty() { "" } else { ", " },
                names.join(", "),
                ", ?".repeat(names.len())
            );
            let statement = self.session.prepare(cql).await.map_err(doc_error)?;
            self.insert = Some(Arc::new(statement));
        }
        Ok(())
    }

    async fn insert_all(&mut self, docs: &[Doc]) -> Result<(), DocError> {
        let parsed = docs
            .iter()
            .map(|d| serde_json::from_str::<serde_json::Map<String, Json>>(&d.json))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| DocError::Refused(format!("a record is not a JSON object: {e}")))?;
        self.map_fields(&parsed).await?;
        let insert = self.insert.clone().expect("map_fields prepared the insert");
        let mut in_flight = JoinSet::new();
        for (doc, fields) in docs.iter().zip(&parsed) {
            let mut values: Vec<Option<CqlValue>> = Vec::with_capacity(2 + self.columns.len());
            values.push(Some(CqlValue::Text(doc.id.clone())));
            values.push(Some(CqlValue::Text(doc.json.clone())));
            for (field, kind) in &self.columns {
                values.push(fields.get(field).and_then(|v| cql_value(v, kind)));
            }
            if in_flight.len() >= INSERTS_IN_FLIGHT {
                finished(in_flight.join_next().await)?;
            }
            let (session, insert) = (self.session.clone(), insert.clone());
            in_flight
                .spawn(async move { session.execute_unpaged(&insert, values).await.map(drop) });
        }
        while let Some(done) = in_flight.join_next().await {
            finished(Some(done))?;
        }
        Ok(())
    }

    /// A page the server cannot cut itself: the keys (and sort field) of every matching row,
    /// sorted and sliced here, then the page's documents read by key.
    async fn emulated_page(
        &mut self,
        query: &Query,
        sink: &mut DocSink<'_>,
    ) -> Result<(), DocError> {
        let (filter, values) = conditions(query);
        let sort_column = query.sort.map(|s| column(s.field));
        let select = match &sort_column {
            Some(c) => format!("SELECT id, {c} FROM {}{filter}", self.table),
            None => format!("SELECT id, id FROM {}{filter}", self.table),
        };
        let statement = self.statement(select).await?;
        let mut keys: Vec<(String, Option<String>)> = Vec::new();
        each_row(
            &self.session,
            &statement,
            &values,
            |row: (String, Option<String>)| keys.push(row),
        )
        .await
        .map_err(doc_error)?;
        let matched = keys.len();
        if let Some(sort) = query.sort {
            keys.sort_by(|a, b| {
                let order = a.1.cmp(&b.1);
                let order = if sort.descending {
                    order.reverse()
                } else {
                    order
                };
                order.then_with(|| a.0.cmp(&b.0))
            });
        }
        let page: Vec<String> = keys
            .into_iter()
            .skip(query.skip as usize)
            .take(query.limit.map_or(usize::MAX, |l| l as usize))
            .map(|(id, _)| id)
            .collect();
        let fetch = self
            .statement(format!("SELECT id, doc FROM {} WHERE id IN ?", self.table))
            .await?;
        let mut by_id: HashMap<String, String> = HashMap::with_capacity(page.len());
        for chunk in page.chunks(100) {
            each_row(
                &self.session,
                &fetch,
                &(chunk,),
                |(id, doc): (String, String)| {
                    by_id.insert(id, doc);
                },
            )
            .await
            .map_err(doc_error)?;
        }
        self.method = Some(format!(
            "{}: paged through the key{} of all {matched} matching rows, {} in the client, then read the page's documents by key (CQL has no OFFSET and orders only by clustering columns)",
            if query.sort.is_some() {
                "sorted page"
            } else {
                "skipped page"
            },
            if query.sort.is_some() {
                " and sort field"
            } else {
                ""
            },
            if query.sort.is_some() {
                "sorted and sliced"
            } else {
                "sliced"
            },
        ));
        for doc in page.iter().filter_map(|id| by_id.remove(id)) {
            sink(&doc);
        }
        Ok(())
    }

    /// Page by page from the server, each row handed on as it is decoded.
    async fn select_docs(&mut self, query: &Query, sink: &mut DocSink<'_>) -> Result<(), DocError> {
        if query.sort.is_some() || query.skip > 0 {
            return self.emulated_page(query, sink).await;
        }
        let (filter, values) = conditions(query);
        let limit = query
            .limit
            .map_or_else(String::new, |l| format!(" LIMIT {l}"));
        // LIMIT comes before ALLOW FILTERING in CQL.
        let cql = match filter.strip_suffix(" ALLOW FILTERING") {
            Some(head) => format!(
                "SELECT doc FROM {}{head}{limit} ALLOW FILTERING",
                self.table
            ),
            None => format!("SELECT doc FROM {}{filter}{limit}", self.table),
        };
        let statement = self.statement(cql).await?;
        each_row(&self.session, &statement, &values, |(doc,): (String,)| {
            sink(&doc)
        })
        .await
        .map_err(doc_error)
    }
}

fn finished(
    done: Option<Result<Result<(), ExecutionError>, tokio::task::JoinError>>,
) -> Result<(), DocError> {
    match done {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(e))) => Err(doc_error(e)),
        Some(Err(e)) => Err(DocError::Lost(e.to_string())),
    }
}

impl DocSession for CqlDocs {
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(within(deadline, self.insert_all(docs)))
    }

    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        self.method = None;
        Box::pin(within(deadline, self.select_docs(query, sink)))
    }

    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>> {
        Box::pin(within(deadline, async move {
            let (n, how) = exact_count(&self.session, &self.table, query, self.count_paged)
                .await
                .map_err(doc_error)?;
            // Once the server's COUNT(*) has timed out, count by paging from then on, as an
            // application that met the timeout does.
            self.count_paged |= how.starts_with("counted by paging");
            self.method = Some(how);
            Ok(n)
        }))
    }

    fn answered_by(&self) -> Option<String> {
        self.method.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Filter;

    #[test]
    fn filters_run_on_the_server_and_the_key_alone_needs_no_filtering() {
        let by_key = Query {
            id: Some("k".into()),
            ..Query::default()
        };
        assert_eq!(conditions(&by_key).0, " WHERE id = ?");
        let scan = Query {
            filters: vec![
                Filter::equals("_system_id", Value::Text("s".into())),
                Filter::greater_than("value", 900.0),
            ],
            ..Query::default()
        };
        let (cql, values) = conditions(&scan);
        assert_eq!(
            cql,
            " WHERE \"_system_id\" = ? AND \"value\" > ? ALLOW FILTERING"
        );
        assert_eq!(
            values,
            vec![CqlValue::Text("s".into()), CqlValue::Double(900.0)]
        );
    }

    #[test]
    fn json_scalars_map_to_typed_columns() {
        assert_eq!(cql_type(&Json::from("x")), Some("text"));
        assert_eq!(cql_type(&Json::from(true)), Some("boolean"));
        assert_eq!(cql_type(&Json::from(1.5)), Some("double"));
        assert_eq!(cql_type(&serde_json::json!([1])), None);
        assert_eq!(
            cql_value(&Json::from(2.0), "double"),
            Some(CqlValue::Double(2.0))
        );
        assert_eq!(cql_value(&Json::from("2"), "double"), None);
        assert_eq!(
            index_name(
                &Collection {
                    name: "c",
                    indexed: &[]
                },
                "_room_id"
            ),
            "c_room_id"
        );
    }
}
