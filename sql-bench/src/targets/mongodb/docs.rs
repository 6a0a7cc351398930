//! MongoDB as the application's document store: one BSON document per record with `_id` the
//! record's key, an ascending index per declared field (verified with `listIndexes`), queries
//! translated into filters, sorts and skips the server runs itself, and exact counts
//! (`countDocuments`, never the collection's estimate).

use std::time::Instant;

use common::pool::BoxFuture;
use mongodb::IndexModel;
use mongodb::bson::{Bson, Document, doc};
use mongodb::error::Error as MongoError;
use mongodb::options::{ClientOptions, IndexOptions};

use super::{DATABASE, MongoTarget, is_lost, max_time_expired, open_client};
use crate::query::{
    Collection, CollectionState, Condition, Doc, DocError, DocSession, DocSink, IndexEntry, Query,
    Value, time_left, within,
};
use crate::targets::{DocTarget, Identity, TargetError};

fn index_name(collection: &Collection, field: &str) -> String {
    format!("{}_{field}", collection.name)
}

impl DocTarget for MongoTarget {
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let handle = self.recreate(collection.name).await?;
            let models: Vec<IndexModel> = collection
                .indexed
                .iter()
                .map(|field| {
                    IndexModel::builder()
                        .keys(doc! {*field: 1})
                        .options(
                            IndexOptions::builder()
                                .name(index_name(collection, field))
                                .build(),
                        )
                        .build()
                })
                .collect();
            handle
                .create_indexes(models)
                .await
                .map_err(|e| self.error(e))?;
            Ok(())
        })
    }

    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>> {
        Box::pin(async move {
            let handle = self.database().collection::<Document>(collection.name);
            let rows = handle
                .count_documents(doc! {})
                .await
                .map_err(|e| self.error(e))?;
            let mut cursor = handle.list_indexes().await.map_err(|e| self.error(e))?;
            let mut indexes = Vec::new();
            while cursor.advance().await.map_err(|e| self.error(e))? {
                let model = cursor.deserialize_current().map_err(|e| self.error(e))?;
                let name = model
                    .options
                    .as_ref()
                    .and_then(|o| o.name.clone())
                    .unwrap_or_default();
                let fields: Vec<&str> = model.keys.keys().map(String::as_str).collect();
                let covers = match fields.as_slice() {
                    [only] => collection.indexed.iter().copied().find(|f| f == only),
                    _ => None,
                };
                indexes.push(IndexEntry {
                    primary: fields == ["_id"],
                    definition: model.keys.to_string(),
                    covers,
                    name,
                });
            }
            Ok(CollectionState { rows, indexes })
        })
    }

    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>> {
        Box::pin(open_session(
            self.session_options(),
            &self.identity,
            *collection,
        ))
    }
}

async fn open_session(
    options: ClientOptions,
    identity: &Identity,
    collection: Collection,
) -> Result<Box<dyn DocSession>, TargetError> {
    let client = open_client(options, identity).await?;
    let handle = client
        .database(DATABASE)
        .collection::<Document>(collection.name);
    Ok(Box::new(MongoDocs {
        handle,
        _client: client,
    }))
}

struct MongoDocs {
    handle: mongodb::Collection<Document>,
    _client: mongodb::Client,
}

fn doc_error(e: MongoError) -> DocError {
    if max_time_expired(&e) {
        return DocError::Timeout;
    }
    if is_lost(&e) {
        DocError::Lost(e.to_string())
    } else {
        DocError::Refused(e.to_string())
    }
}

fn bson_of(value: &Value) -> Bson {
    match value {
        Value::Text(text) => Bson::String(text.clone()),
        Value::Bool(flag) => Bson::Boolean(*flag),
        Value::Number(number) => Bson::Double(*number),
    }
}

/// The query's conditions as a MongoDB filter; a field named twice goes into an `$and`.
fn filter(query: &Query) -> Document {
    let mut filter = Document::new();
    let mut more = Vec::new();
    if let Some(id) = &query.id {
        filter.insert("_id", id.as_str());
    }
    for condition in &query.filters {
        let value = match &condition.condition {
            Condition::Equals(value) => bson_of(value),
            Condition::GreaterThan(bound) => Bson::Document(doc! {"$gt": *bound}),
        };
        if filter.contains_key(condition.field) {
            more.push(Bson::Document(doc! {condition.field: value}));
        } else {
            filter.insert(condition.field, value);
        }
    }
    if !more.is_empty() {
        filter.insert("$and", more);
    }
    filter
}

impl DocSession for MongoDocs {
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let mut batch = Vec::with_capacity(docs.len());
            for doc in docs {
                let mut document: Document = serde_json::from_str(&doc.json)
                    .map_err(|e| DocError::Refused(format!("record {}: {e}", doc.id)))?;
                document.insert("_id", doc.id.as_str());
                batch.push(document);
            }
            let insert = async {
                self.handle
                    .insert_many(batch)
                    .ordered(true)
                    .await
                    .map(drop)
                    .map_err(doc_error)
            };
            within(deadline, insert).await
        })
    }

    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let mut find = self
                .handle
                .find(filter(query))
                .projection(doc! {"_id": 0})
                .max_time(time_left(deadline)?);
            if let Some(sort) = query.sort {
                let direction = if sort.descending { -1 } else { 1 };
                find = find.sort(doc! {sort.field: direction, "_id": 1});
            }
            if query.skip > 0 {
                find = find.skip(query.skip);
            }
            if let Some(limit) = query.limit {
                find = find.limit(limit as i64);
            }
            let read = async {
                // One server batch at a time: the cursor fetches the next as this one is used.
                let mut cursor = find.await.map_err(doc_error)?;
                while cursor.advance().await.map_err(doc_error)? {
                    let document = cursor
                        .deserialize_current()
                        .map_err(|e| DocError::Refused(e.to_string()))?;
                    sink(
                        &serde_json::to_string(&document)
                            .map_err(|e| DocError::Refused(e.to_string()))?,
                    );
                }
                Ok(())
            };
            within(deadline, read).await
        })
    }

    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>> {
        Box::pin(async move {
            let count = self
                .handle
                .count_documents(filter(query))
                .max_time(time_left(deadline)?);
            within(deadline, async { count.await.map_err(doc_error) }).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Filter;

    #[test]
    fn a_query_becomes_a_filter_on_the_same_fields() {
        let query = Query {
            id: Some("k1".into()),
            filters: vec![
                Filter::equals("_account_id", Value::Text("a".into())),
                Filter::equals("_deleted", Value::Bool(false)),
                Filter::greater_than("value", 900.0),
                Filter::greater_than("value", 950.0),
            ],
            ..Query::default()
        };
        assert_eq!(
            filter(&query),
            doc! {
                "_id": "k1",
                "_account_id": "a",
                "_deleted": false,
                "value": {"$gt": 900.0},
                "$and": [{"value": {"$gt": 950.0}}],
            }
        );
    }

    #[test]
    fn documents_round_trip_through_bson_as_the_same_json() {
        let json = r#"{"id":"a1","_type":"check","approved":false,"value":912.5,"note":"x"}"#;
        let document: Document = serde_json::from_str(json).unwrap();
        assert_eq!(document.get_f64("value").unwrap(), 912.5);
        assert_eq!(serde_json::to_string(&document).unwrap(), json);
    }
}
