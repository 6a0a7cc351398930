//! What an application's data layer asks of a document store — a collection of JSON documents
//! with declared secondary indexes — in a form every engine's adapter translates and executes.

use std::time::Instant;

use common::pool::BoxFuture;

/// A collection of JSON documents keyed by `id`, with secondary indexes on `indexed` fields.
#[derive(Debug, Clone, Copy)]
pub struct Collection {
    pub name: &'static str,
    pub indexed: &'static [&'static str],
}

/// A value a filter compares a document field with.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    Bool(bool),
    Number(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Equals(Value),
    GreaterThan(f64),
}

/// One condition on a top-level field of the document.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub field: &'static str,
    pub condition: Condition,
}

impl Filter {
    pub fn equals(field: &'static str, value: Value) -> Filter {
        Filter {
            field,
            condition: Condition::Equals(value),
        }
    }

    pub fn greater_than(field: &'static str, bound: f64) -> Filter {
        Filter {
            field,
            condition: Condition::GreaterThan(bound),
        }
    }
}

/// A sort on a text field; ties are always broken by `id` ascending, so the order is defined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sort {
    pub field: &'static str,
    pub descending: bool,
}

/// Documents (or their count) matching every filter, optionally by key, sorted and paged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// A primary-key lookup.
    pub id: Option<String>,
    pub filters: Vec<Filter>,
    pub sort: Option<Sort>,
    pub skip: u64,
    pub limit: Option<u64>,
}

/// A record as stored: its key and its JSON document.
#[derive(Debug, Clone)]
pub struct Doc {
    pub id: String,
    pub json: String,
}

/// Why a document request did not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DocError {
    /// The per-iteration ceiling passed; the engine was told to stop.
    #[error("no answer before the ceiling")]
    Timeout,
    /// The engine answered with an error: it will not run this request.
    #[error("{0}")]
    Refused(String),
    /// The connection is gone.
    #[error("{0}")]
    Lost(String),
}

/// Takes the documents a find returns, one at a time, in the query's order, as the engine
/// streams them: an adapter hands each on instead of collecting the answer.
pub type DocSink<'s> = dyn FnMut(&str) + Send + 's;

/// One connection's document requests, each bounded by `deadline`.
pub trait DocSession: Send {
    /// Inserts one batch as one transaction, committed durably before it returns.
    fn insert_batch<'a>(
        &'a mut self,
        docs: &'a [Doc],
        deadline: Instant,
    ) -> BoxFuture<'a, Result<(), DocError>>;
    /// The JSON text of every matching document, in the query's order, each handed to `sink`
    /// as it arrives.
    fn find<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
        sink: &'a mut DocSink<'_>,
    ) -> BoxFuture<'a, Result<(), DocError>>;
    /// How many documents match, exactly.
    fn count<'a>(
        &'a mut self,
        query: &'a Query,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<u64, DocError>>;
    /// How the last request was answered when the engine could not run it as asked and the
    /// adapter emulated it (a page cut in the client, a count by paging), for the report.
    /// Engines that run every request themselves keep the default.
    fn answered_by(&self) -> Option<String> {
        None
    }
    /// For an engine that runs inside the client process: the most memory it has held at once
    /// (page caches, statements; all its connections), so that the client's own footprint can
    /// be told apart from the engine's. Engines in a server of their own keep the default.
    fn engine_heap_peak_bytes(&self) -> Option<u64> {
        None
    }
}

/// What is left of an iteration's time before `deadline`, or a timeout when nothing is.
pub fn time_left(deadline: Instant) -> Result<std::time::Duration, DocError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(DocError::Timeout)
    } else {
        Ok(left)
    }
}

/// Runs `request` until `deadline`; past it the request is dropped and the answer is a timeout.
pub async fn within<T>(
    deadline: Instant,
    request: impl Future<Output = Result<T, DocError>>,
) -> Result<T, DocError> {
    tokio::time::timeout_at(deadline.into(), request)
        .await
        .unwrap_or(Err(DocError::Timeout))
}

/// One index of a collection as the engine's own catalog describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    pub name: String,
    pub definition: String,
    pub primary: bool,
    /// The declared field this index serves, when it serves one.
    pub covers: Option<&'static str>,
}

/// A collection's state read from the engine: exact row count and index catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionState {
    pub rows: u64,
    pub indexes: Vec<IndexEntry>,
}

impl CollectionState {
    /// The declared fields no index covers.
    pub fn missing(&self, collection: &Collection) -> Vec<&'static str> {
        collection
            .indexed
            .iter()
            .copied()
            .filter(|field| !self.indexes.iter().any(|i| i.covers == Some(field)))
            .collect()
    }

    /// Indexes beyond the primary key and the declared set.
    pub fn extra(&self) -> Vec<&IndexEntry> {
        self.indexes
            .iter()
            .filter(|i| !i.primary && i.covers.is_none())
            .collect()
    }
}

/// The declared field an index definition mentions (by its quoted name), if any.
pub fn covered_field(collection: &Collection, definition: &str) -> Option<&'static str> {
    collection.indexed.iter().copied().find(|field| {
        definition.contains(&format!("'{field}'")) || definition.contains(&format!("'$.{field}'"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Collection = Collection {
        name: "c",
        indexed: &["_a", "_b"],
    };

    #[test]
    fn missing_and_extra_indexes_are_told_apart() {
        let entry = |name: &str, definition: &str, primary| IndexEntry {
            name: name.into(),
            definition: definition.into(),
            primary,
            covers: covered_field(&C, definition),
        };
        let state = CollectionState {
            rows: 3,
            indexes: vec![
                entry("pk", "PRIMARY KEY (id)", true),
                entry("a", "((doc ->> '_a'::text))", false),
                entry("gin", "USING gin (doc)", false),
            ],
        };
        assert_eq!(state.missing(&C), vec!["_b"]);
        assert_eq!(state.extra().len(), 1);
        assert_eq!(state.extra()[0].name, "gin");
        assert_eq!(covered_field(&C, "json_extract(doc, '$._b')"), Some("_b"));
        assert_eq!(covered_field(&C, "json_extract(doc, '$._bc')"), None);
    }
}
