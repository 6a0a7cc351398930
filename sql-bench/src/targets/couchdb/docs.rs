//! CouchDB as the application's document store: one database per collection, a Mango (`json`)
//! index per declared field, queries as Mango selectors through `_find`. CouchDB reserves field
//! names with a leading underscore, so every such field is renamed on write and back on read;
//! a sort no index covers is refused by the server, and that refusal is the result.

use std::time::Instant;

use common::pool::BoxFuture;
use reqwest::Method;
use serde_json::{Map, Value as Json, json};

use super::{CouchTarget, Flavor, Http, database};
use crate::query::{
    Collection, CollectionState, Condition, Doc, DocError, DocSession, DocSink, IndexEntry, Query,
    Value, time_left,
};
use crate::targets::{DocTarget, TargetError};

/// What a stored field name is prefixed with when it would be reserved (or ambiguous).
const ESCAPE: &str = "fb";
/// Documents per `_find` page on CouchDB, which continues with a bookmark.
const PAGE_DOCS: u64 = 5_000;

/// The stored name of a field: a leading `_` is reserved by CouchDB, so `_x` becomes `fb_x`,
/// and a name already of the form `fb…fb_x` gains one more `fb` so renaming stays reversible.
pub(super) fn stored_name(field: &str) -> String {
    if field.trim_start_matches(ESCAPE).starts_with('_') {
        format!("{ESCAPE}{field}")
    } else {
        field.to_owned()
    }
}

/// The application's name of a stored field (the inverse of [`stored_name`]).
fn field_name(stored: &str) -> &str {
    match stored.strip_prefix(ESCAPE) {
        Some(rest) if rest.trim_start_matches(ESCAPE).starts_with('_') => rest,
        _ => stored,
    }
}

fn index_name(collection: &Collection, field: &str) -> String {
    format!("{}_{}", collection.name, field.trim_start_matches('_'))
}

impl DocTarget for CouchTarget {
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.recreate(collection.name).await?;
            let db = database(collection.name);
            for field in collection.indexed {
                let name = index_name(collection, field);
                let body = json!({
                    "index": {"fields": [stored_name(field)]},
                    "name": name,
                    "ddoc": format!("fairbench_{name}"),
                    "type": "json",
                });
                self.expect(Method::POST, &format!("{db}/_index"), Some(&body))
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
            let db = database(collection.name);
            let info = self.expect(Method::GET, &db, None).await?;
            let doc_count = info.get("doc_count").and_then(Json::as_u64).unwrap_or(0);
            // Mango indexes live in design documents, which doc_count includes.
            let design = self
                .all_docs(&db, Some(("_design/".into(), "_design0".into())), false)
                .await?
                .len() as u64;
            let listed = self
                .expect(Method::GET, &format!("{db}/_index"), None)
                .await?;
            let mut indexes = Vec::new();
            for index in listed
                .get("indexes")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
            {
                let fields: Vec<String> = index
                    .pointer("/def/fields")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.as_object().and_then(|o| o.keys().next().cloned()))
                    .collect();
                let kind = index.get("type").and_then(Json::as_str).unwrap_or_default();
                let covers = match fields.as_slice() {
                    [only] => collection
                        .indexed
                        .iter()
                        .copied()
                        .find(|f| stored_name(f) == *only),
                    _ => None,
                };
                indexes.push(IndexEntry {
                    name: index
                        .get("name")
                        .and_then(Json::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    definition: format!("{kind} index on {}", fields.join(", ")),
                    primary: kind == "special" && fields == ["_id"],
                    covers,
                });
            }
            Ok(CollectionState {
                rows: doc_count.saturating_sub(design),
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
            let mut http = Http::new(
                self.http.base.clone(),
                self.http.auth.clone(),
                1,
                self.http.tls.clone(),
            )
            .map_err(|e| self.error(e))?;
            http.flavor = self.http.flavor;
            let docs: Box<dyn DocSession> = Box::new(CouchDocs {
                http,
                find_path: format!("{}/_find", database(collection.name)),
                bulk_path: format!("{}/_bulk_docs", database(collection.name)),
                method: None,
            });
            Ok(docs)
        })
    }
}

struct CouchDocs {
    http: Http,
    find_path: String,
    bulk_path: String,
    method: Option<String>,
}

fn http_error(e: reqwest::Error) -> DocError {
    if e.is_timeout() {
        DocError::Timeout
    } else {
        DocError::Lost(e.to_string())
    }
}

fn json_of(value: &Value) -> Json {
    match value {
        Value::Text(text) => Json::from(text.as_str()),
        Value::Bool(flag) => Json::from(*flag),
        Value::Number(number) => Json::from(*number),
    }
}

/// The query's conditions as a Mango selector on the stored field names.
fn selector(query: &Query) -> Json {
    let mut all = Vec::new();
    if let Some(id) = &query.id {
        all.push(json!({"_id": id}));
    }
    for filter in &query.filters {
        let condition = match &filter.condition {
            Condition::Equals(value) => json!({"$eq": json_of(value)}),
            Condition::GreaterThan(bound) => json!({"$gt": bound}),
        };
        let mut one = Map::new();
        one.insert(stored_name(filter.field), condition);
        all.push(Json::Object(one));
    }
    match all.len() {
        0 => json!({"_id": {"$gt": null}}),
        _ => json!({"$and": all}),
    }
}

/// A stored document as the application wrote it: CouchDB's `_id` and `_rev` removed, every
/// renamed field back under its own name.
fn restore(stored: Map<String, Json>) -> String {
    let mut doc = Map::with_capacity(stored.len());
    for (key, value) in stored {
        if key == "_id" || key == "_rev" {
            continue;
        }
        doc.insert(field_name(&key).to_owned(), value);
    }
    Json::Object(doc).to_string()
}

impl CouchDocs {
    /// One `_find` request; a refusal carries the server's own message.
    async fn find_page(&self, body: &Json, deadline: Instant) -> Result<Json, DocError> {
        let answer = self
            .http
            .call(
                Method::POST,
                &self.find_path,
                Some(body),
                time_left(deadline)?,
            )
            .await
            .map_err(http_error)?;
        if answer.status.is_success() {
            Ok(answer.body)
        } else {
            Err(DocError::Refused(answer.message()))
        }
    }

    /// Every document `query` selects, paged: CouchDB continues with its bookmark, a server
    /// without bookmarks (pouchdb-server) gets the whole answer in one request.
    /// Every matching document through `_find`, page by page (one bookmark page at a time;
    /// pouchdb-server, which pages badly, in one answer), each handed to `each`. Returns how
    /// many there were.
    async fn select(
        &self,
        query: &Query,
        fields: Option<&[&str]>,
        deadline: Instant,
        each: &mut (dyn FnMut(Map<String, Json>) + Send),
    ) -> Result<u64, DocError> {
        let mut body = json!({"selector": selector(query)});
        if let Some(sort) = query.sort {
            let direction = if sort.descending { "desc" } else { "asc" };
            body["sort"] = json!([{stored_name(sort.field): direction}]);
        }
        if query.skip > 0 {
            body["skip"] = json!(query.skip);
        }
        if let Some(fields) = fields {
            body["fields"] = json!(fields);
        }
        let paged = self.http.flavor != Flavor::PouchDb;
        let wanted = query.limit.unwrap_or(u64::MAX);
        let mut seen = 0u64;
        loop {
            let page = if paged {
                PAGE_DOCS.min(wanted - seen)
            } else {
                wanted.min(i64::MAX as u64)
            };
            body["limit"] = json!(page);
            let mut answer = self.find_page(&body, deadline).await?;
            if !matches!(answer.get("docs"), Some(Json::Array(_))) {
                return Err(DocError::Refused(format!(
                    "_find answered without docs: {answer}"
                )));
            }
            let docs = answer.get_mut("docs").map(Json::take);
            let Some(Json::Array(docs)) = docs else {
                unreachable!("checked above")
            };
            let got = docs.len() as u64;
            for doc in docs {
                if let Json::Object(map) = doc {
                    seen += 1;
                    each(map);
                }
            }
            let bookmark = answer.get("bookmark").and_then(Json::as_str);
            match bookmark {
                Some(mark) if paged && got == page && seen < wanted => {
                    body["bookmark"] = json!(mark);
                    // The bookmark carries the position; a skip applies only to the first page.
                    if let Some(object) = body.as_object_mut() {
                        object.remove("skip");
                    }
                }
                _ => return Ok(seen),
            }
        }
    }

    async fn insert(&self, docs: &[Doc], deadline: Instant) -> Result<(), DocError> {
        let mut stored = Vec::with_capacity(docs.len());
        for doc in docs {
            let fields: Map<String, Json> = serde_json::from_str(&doc.json)
                .map_err(|e| DocError::Refused(format!("record {}: {e}", doc.id)))?;
            let mut renamed = Map::with_capacity(fields.len() + 1);
            renamed.insert("_id".into(), Json::from(doc.id.as_str()));
            for (key, value) in fields {
                renamed.insert(stored_name(&key), value);
            }
            stored.push(Json::Object(renamed));
        }
        let answer = self
            .http
            .call(
                Method::POST,
                &self.bulk_path,
                Some(&json!({"docs": stored})),
                time_left(deadline)?,
            )
            .await
            .map_err(http_error)?;
        if !answer.status.is_success() {
            return Err(DocError::Refused(answer.message()));
        }
        match answer
            .body
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r.get("error").is_some()))
        {
            Some(failed) => Err(DocError::Refused(format!(
                "_bulk_docs refused a document: {failed}"
            ))),
            None => Ok(()),
        }
    }
}

impl DocSession for CouchDocs {
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(self.insert(docs, deadline))
    }

    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        self.method = None;
        Box::pin(async move {
            self.select(query, None, deadline, &mut |doc| sink(&restore(doc)))
                .await
                .map(drop)
        })
    }

    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>> {
        Box::pin(async move {
            let ids = self
                .select(query, Some(&["_id"]), deadline, &mut drop)
                .await?;
            self.method = Some("Mango has no count: the adapter fetched the _id of every matching document through _find and counted them".into());
            Ok(ids)
        })
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
    fn reserved_names_are_renamed_reversibly() {
        for field in [
            "_type", "fb_type", "fbfb_x", "fb", "fbx", "value", "_", "fb_",
        ] {
            let stored = stored_name(field);
            assert!(!stored.starts_with('_'), "{stored}");
            assert_eq!(field_name(&stored), field, "{field} → {stored}");
        }
        assert_eq!(stored_name("_inspection_id"), "fb_inspection_id");
        assert_eq!(stored_name("approved"), "approved");
    }

    #[test]
    fn a_query_becomes_a_selector_on_the_stored_names() {
        let query = Query {
            id: Some("k".into()),
            filters: vec![
                Filter::equals("_deleted", Value::Bool(false)),
                Filter::greater_than("value", 900.0),
            ],
            ..Query::default()
        };
        assert_eq!(
            selector(&query),
            json!({"$and": [{"_id": "k"}, {"fb_deleted": {"$eq": false}}, {"value": {"$gt": 900.0}}]})
        );
        let stored = json!({"_id": "k", "_rev": "1-a", "fb_type": "check", "value": 1.5});
        let Json::Object(map) = stored else {
            unreachable!()
        };
        let restored: Json = serde_json::from_str(&restore(map)).unwrap();
        assert_eq!(restored, json!({"_type": "check", "value": 1.5}));
    }
}
