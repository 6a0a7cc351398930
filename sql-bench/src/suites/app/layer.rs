//! The application's data layer. Every request of every scenario goes through it, as in the
//! application the seeds measured: it adds the account filter and the soft-delete filter,
//! turns page numbers into offsets, and deserializes every returned document into a typed
//! [`Record`] as the engine streams it back, handing each to the caller instead of collecting
//! them (a 2 GB answer never sits in the client). Engine adapters only translate and execute;
//! this cost is part of what is timed.

use std::time::Instant;

use super::record::{ACCOUNT, Record};
use crate::query::{DocError, DocSession, Filter, Query, Sort, Value};

/// Why a data-layer request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayerError {
    #[error(transparent)]
    Doc(#[from] DocError),
    #[error("a returned document does not deserialize: {0}")]
    Decode(String),
}

/// A page of a listing, numbered from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub number: u64,
    pub size: u64,
}

pub struct DataLayer<'a> {
    store: &'a mut dyn DocSession,
    /// Every request of one iteration shares the iteration's ceiling.
    deadline: Instant,
}

impl<'a> DataLayer<'a> {
    pub fn new(store: &'a mut dyn DocSession, deadline: Instant) -> DataLayer<'a> {
        DataLayer { store, deadline }
    }

    /// The filters every request carries: this account's records, not soft-deleted.
    fn scoped(mut filters: Vec<Filter>) -> Vec<Filter> {
        filters.insert(
            0,
            Filter::equals("_account_id", Value::Text(ACCOUNT.to_owned())),
        );
        filters.insert(1, Filter::equals("_deleted", Value::Bool(false)));
        filters
    }

    /// One record by its identifier, if this account can see it.
    pub async fn get(&mut self, id: &str) -> Result<Option<Record>, LayerError> {
        let query = Query {
            id: Some(id.to_owned()),
            filters: Self::scoped(Vec::new()),
            ..Query::default()
        };
        let mut found = None;
        self.fetch(&query, &mut |record| {
            found.get_or_insert(record);
        })
        .await?;
        Ok(found)
    }

    /// Every visible record matching `filters`, in the order `sort` gives, one page or all,
    /// each handed to `each` as it arrives (nothing is collected).
    pub async fn list(
        &mut self,
        filters: Vec<Filter>,
        sort: Option<Sort>,
        page: Option<Page>,
        each: &mut (dyn FnMut(Record) + Send),
    ) -> Result<(), LayerError> {
        let query = Query {
            id: None,
            filters: Self::scoped(filters),
            sort,
            skip: page.map_or(0, |p| (p.number - 1) * p.size),
            limit: page.map(|p| p.size),
        };
        self.fetch(&query, each).await
    }

    /// How many visible records match `filters`, exactly.
    pub async fn count(&mut self, filters: Vec<Filter>) -> Result<u64, LayerError> {
        let query = Query {
            filters: Self::scoped(filters),
            ..Query::default()
        };
        Ok(self.store.count(&query, self.deadline).await?)
    }

    /// Deserializes every document the engine streams back; the first that does not
    /// deserialize fails the request (the rest are read and dropped).
    async fn fetch(
        &mut self,
        query: &Query,
        each: &mut (dyn FnMut(Record) + Send),
    ) -> Result<(), LayerError> {
        let mut failed: Option<String> = None;
        let mut decode = |doc: &str| {
            if failed.is_some() {
                return;
            }
            match serde_json::from_str::<Record>(doc) {
                Ok(record) => each(record),
                Err(e) => failed = Some(e.to_string()),
            }
        };
        self.store.find(query, self.deadline, &mut decode).await?;
        match failed {
            Some(message) => Err(LayerError::Decode(message)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{Condition, Doc, DocSink};
    use common::pool::BoxFuture;

    /// Records the queries it is asked and answers with one fixed document.
    struct Recording {
        queries: Vec<Query>,
        answer: String,
    }

    impl DocSession for Recording {
        fn insert_batch<'a>(
            &'a mut self,
            _: &'a [Doc],
            _: Instant,
        ) -> BoxFuture<'a, Result<(), DocError>> {
            Box::pin(async { Ok(()) })
        }
        fn find<'a>(
            &'a mut self,
            query: &'a Query,
            _: Instant,
            sink: &'a mut DocSink<'_>,
        ) -> BoxFuture<'a, Result<(), DocError>> {
            self.queries.push(query.clone());
            sink(&self.answer);
            Box::pin(async { Ok(()) })
        }
        fn count<'a>(
            &'a mut self,
            query: &'a Query,
            _: Instant,
        ) -> BoxFuture<'a, Result<u64, DocError>> {
            self.queries.push(query.clone());
            Box::pin(async { Ok(7) })
        }
    }

    #[tokio::test]
    async fn every_request_is_scoped_paged_and_deserialized() {
        let record = super::super::record::Generator::new(1, 1, 0, 1, 1)
            .next()
            .unwrap();
        let mut store = Recording {
            queries: Vec::new(),
            answer: serde_json::to_string(&record).unwrap(),
        };
        let mut layer = DataLayer::new(&mut store, Instant::now());
        let page = Page {
            number: 3,
            size: 50,
        };
        let mut listed = Vec::new();
        layer
            .list(vec![], None, Some(page), &mut |r| listed.push(r))
            .await
            .unwrap();
        assert_eq!(listed, vec![record.clone()]);
        assert_eq!(layer.get(&record.id).await.unwrap(), Some(record));
        assert_eq!(layer.count(vec![]).await.unwrap(), 7);
        for query in &store.queries {
            assert_eq!(
                query.filters[0].condition,
                Condition::Equals(Value::Text(ACCOUNT.into()))
            );
            assert_eq!(
                query.filters[1].condition,
                Condition::Equals(Value::Bool(false))
            );
        }
        assert_eq!(
            (store.queries[0].skip, store.queries[0].limit),
            (100, Some(50))
        );
    }

    #[tokio::test]
    async fn a_document_that_does_not_deserialize_is_an_error() {
        let mut store = Recording {
            queries: Vec::new(),
            answer: "{\"id\": 3}".into(),
        };
        let mut layer = DataLayer::new(&mut store, Instant::now());
        let error = layer
            .list(vec![], None, None, &mut |_| panic!("nothing decodes"))
            .await
            .unwrap_err();
        assert!(matches!(error, LayerError::Decode(_)), "{error}");
    }
}
