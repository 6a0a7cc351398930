//! The embedded engine: a tantivy index on disk (in the results folder unless `tantivy:DIR`),
//! in this process. It takes the same `_bulk` bodies (parsed here, as a server would), answers
//! the same queries translated to tantivy's, and reads the same aggregation JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector, Pool};
use common::results::Location;
use serde::Deserialize;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationCollector, AggregationLimitsGuard};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, PhraseQuery, TermQuery};
use tantivy::schema::document::Value as _;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TEXT, TantivyDocument,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term};

use super::{Described, Description, Identity, IndexSpec, Target, TargetError, foreign, op_error};
use crate::answer::{Answer, parse_buckets};
use crate::corpus::Bulk;
use crate::queries::{Query, QueryKind, QuerySet, TOP_K, aggregations};
use crate::session::{
    BlockingBulkSession, BlockingSearchSession, IngestWorkers, SearchWorkers, blocking_ingest,
    blocking_workers,
};

/// Marks a directory as search-bench's; a non-empty directory without it is never touched.
const MARKER_FILE: &str = ".search-bench-index";
/// The indexing buffer across all writer threads (Elasticsearch's is 10% of the heap).
const WRITER_MEMORY_BYTES: usize = 256 << 20;

#[derive(Clone, Copy, Debug)]
struct Fields {
    id: Field,
    title: Field,
    body: Field,
    category: Field,
    price: Field,
    stock: Field,
}

/// The explicit mapping, as tantivy says it: text fields with positions (for phrases), a
/// keyword category (raw, columnar for the aggregation), numeric price/stock; all stored, as
/// Elasticsearch keeps `_source`.
fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let fields = Fields {
        id: builder.add_u64_field("id", INDEXED | STORED | FAST),
        title: builder.add_text_field("title", TEXT | STORED),
        body: builder.add_text_field("body", TEXT | STORED),
        category: builder.add_text_field("category", STRING | STORED | FAST),
        price: builder.add_f64_field("price", INDEXED | STORED | FAST),
        stock: builder.add_i64_field("stock", INDEXED | STORED | FAST),
    };
    (builder.build(), fields)
}

struct Live {
    index: Index,
    /// `None` while a commit runs on its own thread, and for good once one was left behind
    /// at the ceiling.
    writer: Option<Arc<IndexWriter>>,
    reader: IndexReader,
    fields: Fields,
}

/// Opens the embedded engine (`tantivy` or `tantivy:DIR`).
pub fn open<'a>(
    spec: &'a TargetSpec,
    index: &'a IndexSpec,
    reach: &'a super::Reach,
) -> BoxFuture<'a, Result<Box<dyn Target>, TargetError>> {
    Box::pin(async move { TantivyTarget::open(spec, index, &reach.results_dir) })
}

pub struct TantivyTarget {
    identity: Identity,
    dir: PathBuf,
    live: Option<Live>,
}

impl TantivyTarget {
    pub fn open(
        spec: &TargetSpec,
        _index: &IndexSpec,
        results_dir: &Path,
    ) -> Result<Box<dyn Target>, TargetError> {
        let dir = match spec.url.strip_prefix("tantivy") {
            Some("") => results_dir.join("tantivy-index"),
            Some(rest) => match rest.strip_prefix(':') {
                Some(path) if !path.is_empty() => PathBuf::from(path),
                _ => {
                    return Err(TargetError::Url {
                        url: spec.url_redacted(),
                        message: "write the embedded engine as `tantivy` or `tantivy:DIR`".into(),
                    });
                }
            },
            None => unreachable!("open() is only called for the tantivy scheme"),
        };
        Ok(Box::new(TantivyTarget {
            identity: Identity::of(spec, "tantivy"),
            dir,
            live: None,
        }))
    }

    fn error(&self, message: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(message)
    }

    /// Where the index's durable-write floor is measured: its folder when it exists (it is
    /// search-bench's or empty), else the folder it will be made in (by default the results
    /// folder).
    fn floor_dir(&self) -> Option<PathBuf> {
        [Some(self.dir.as_path()), self.dir.parent()]
            .into_iter()
            .flatten()
            .find(|d| d.is_dir())
            .map(Path::to_path_buf)
    }

    fn live(&self) -> Result<&Live, TargetError> {
        self.live
            .as_ref()
            .ok_or_else(|| self.error("the index has not been created"))
    }

    /// Whether the directory may be used: absent, empty, or marked as search-bench's.
    fn owned_or_absent(&self) -> bool {
        match std::fs::read_dir(&self.dir) {
            Err(_) => true,
            Ok(mut entries) => entries.next().is_none() || self.dir.join(MARKER_FILE).exists(),
        }
    }

    fn settings(&self) -> BTreeMap<String, String> {
        let threads = writer_threads();
        [
            ("mapping.title", "text (default tokenizer, positions)"),
            ("mapping.body", "text (default tokenizer, positions)"),
            ("mapping.category", "keyword (raw, fast)"),
            ("mapping.price", "f64 (indexed, fast)"),
            ("mapping.stock", "i64 (indexed, fast)"),
            ("stored", "every field (as _source)"),
            ("durability", "buffered until commit (fsync) at refresh"),
            ("request_cache", "none"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain([
            ("writer.threads".to_owned(), threads.to_string()),
            (
                "writer.memory_budget".to_owned(),
                format!("{} MiB", WRITER_MEMORY_BYTES >> 20),
            ),
        ])
        .collect()
    }
}

/// Indexing threads: one per core, as Elasticsearch's write pool.
fn writer_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
}

fn term_query(
    field: Field,
    text: &str,
    record: IndexRecordOption,
) -> Box<dyn tantivy::query::Query> {
    Box::new(TermQuery::new(Term::from_field_text(field, text), record))
}

/// The query as tantivy runs it. A single-term `match` is a BM25 term query; the `bool`
/// filter is a non-scoring required clause; aggregations need no scores.
fn translate(query: &Query, fields: Fields) -> Box<dyn tantivy::query::Query> {
    let body = |t: &str| term_query(fields.body, t, IndexRecordOption::WithFreqs);
    match query {
        Query::Match { term } => body(term),
        Query::Phrase { first, second } => Box::new(PhraseQuery::new(vec![
            Term::from_field_text(fields.body, first),
            Term::from_field_text(fields.body, second),
        ])),
        Query::Bool { term, category } => Box::new(BooleanQuery::new(vec![
            (Occur::Must, body(term)),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    term_query(fields.category, category, IndexRecordOption::Basic),
                    0.0,
                )),
            ),
        ])),
        Query::Aggregation { term } => term_query(fields.body, term, IndexRecordOption::Basic),
    }
}

fn aggregation_request() -> Aggregations {
    serde_json::from_value(aggregations()).expect("tantivy reads the suite's aggregation request")
}

fn aggregation_collector(
    request: &Aggregations,
    template: &AggContextParams,
) -> AggregationCollector {
    // A fresh limits guard per query: the memory it tracks belongs to one request.
    let context = AggContextParams {
        limits: AggregationLimitsGuard::default(),
        ..template.clone()
    };
    AggregationCollector::from_aggs(request.clone(), context)
}

common::identified!(TantivyTarget);

impl Target for TantivyTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            Ok(Description {
                system: Described {
                    kind: "tantivy".into(),
                    // "tantivy v0.27.0, index_format v7" → "tantivy 0.27.0, index_format v7".
                    version: tantivy::version_string().replacen("tantivy v", "tantivy ", 1),
                    location: Location::Embedded,
                    data_dir: self.floor_dir(),
                    ..Described::default()
                },
                server_pid: None,
                notes: vec!["tantivy runs inside search-bench: no network, no HTTP and no JSON parsing on its search path (its `_bulk` bodies are parsed), so its client CPU is the engine's own.".into()],
                tls: None,
            })
        })
    }

    fn check_index(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            if self.owned_or_absent() {
                Ok(())
            } else {
                Err(foreign(
                    &self.identity,
                    &format!("directory {}", self.dir.display()),
                ))
            }
        })
    }

    fn create_index(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            self.check_index().await?;
            self.live = None;
            if self.dir.exists() {
                std::fs::remove_dir_all(&self.dir).map_err(|e| self.error(e))?;
            }
            std::fs::create_dir_all(&self.dir).map_err(|e| self.error(e))?;
            std::fs::write(self.dir.join(MARKER_FILE), b"search-bench\n")
                .map_err(|e| self.error(e))?;
            let (schema, fields) = schema();
            let index = Index::create_in_dir(&self.dir, schema).map_err(|e| self.error(e))?;
            let writer = index
                .writer_with_num_threads(writer_threads(), WRITER_MEMORY_BYTES)
                .map_err(|e| self.error(e))?;
            let reader = index
                .reader_builder()
                .reload_policy(ReloadPolicy::Manual)
                .try_into()
                .map_err(|e| self.error(e))?;
            self.live = Some(Live {
                index,
                writer: Some(Arc::new(writer)),
                reader,
                fields,
            });
            Ok(self.settings())
        })
    }

    fn open_ingest(&mut self, n: usize) -> BoxFuture<'_, Result<IngestWorkers, TargetError>> {
        Box::pin(async move {
            let live = self.live()?;
            let writer = live.writer.clone().ok_or_else(|| {
                self.identity
                    .query_error("the index writer was left behind in a commit past the ceiling")
            })?;
            let sessions = (0..n)
                .map(|_| BulkParser {
                    writer: writer.clone(),
                    fields: live.fields,
                })
                .collect();
            Ok(blocking_ingest(sessions))
        })
    }

    fn refresh(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            let identity = self.identity.clone();
            let error = |message: String| identity.query_error(message);
            let live = self
                .live
                .as_mut()
                .ok_or_else(|| error("the index has not been created".into()))?;
            let mut writer = live.writer.take().ok_or_else(|| {
                error("the index writer was left behind in a commit past the ceiling".into())
            })?;
            if Arc::get_mut(&mut writer).is_none() {
                live.writer = Some(writer);
                return Err(error("an ingest session still holds the writer".into()));
            }
            // On its own thread, so a bound on the refresh can leave a commit that hangs
            // behind (the writer with it) instead of holding the runtime's thread.
            let committed = tokio::task::spawn_blocking(move || {
                let result = Arc::get_mut(&mut writer)
                    .expect("the only handle to the writer")
                    .commit();
                (writer, result)
            })
            .await
            .map_err(|e| error(format!("the commit thread failed: {e}")))?;
            let (writer, result) = committed;
            live.writer = Some(writer);
            result.map_err(|e| error(e.to_string()))?;
            live.reader.reload().map_err(|e| error(e.to_string()))
        })
    }

    fn count(&mut self) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move { Ok(self.live()?.reader.searcher().num_docs()) })
    }

    fn answer<'a>(
        &'a mut self,
        query: &'a Query,
        _body: &'a Bytes,
    ) -> BoxFuture<'a, Result<Answer, TargetError>> {
        Box::pin(async move {
            let live = self.live()?;
            let searcher = live.reader.searcher();
            let translated = translate(query, live.fields);
            if let Query::Aggregation { .. } = query {
                let collector =
                    aggregation_collector(&aggregation_request(), &AggContextParams::default());
                let (total, result) = searcher
                    .search(&*translated, &(Count, collector))
                    .map_err(|e| self.error(e))?;
                let json = serde_json::to_value(&result).map_err(|e| self.error(e))?;
                let buckets = parse_buckets(&json).map_err(|e| self.error(e))?;
                return Ok(Answer {
                    total: total as u64,
                    top_ids: Vec::new(),
                    buckets: Some(buckets),
                });
            }
            let collector = (TopDocs::with_limit(TOP_K).order_by_score(), Count);
            let (top, total) = searcher
                .search(&*translated, &collector)
                .map_err(|e| self.error(e))?;
            let mut top_ids = Vec::with_capacity(top.len());
            for (_, address) in top {
                let doc: TantivyDocument = searcher.doc(address).map_err(|e| self.error(e))?;
                let id = doc.get_first(live.fields.id).and_then(|v| v.as_u64());
                top_ids.push(id.map_or_else(|| "?".to_owned(), |id| id.to_string()));
            }
            Ok(Answer {
                total: total as u64,
                top_ids,
                buckets: None,
            })
        })
    }

    fn open_search<'a>(
        &'a mut self,
        n: usize,
        sets: &'a [QuerySet],
    ) -> BoxFuture<'a, Result<Box<dyn SearchWorkers>, TargetError>> {
        Box::pin(async move {
            let live = self.live()?;
            let mut prepared: [Vec<Box<dyn tantivy::query::Query>>; 4] = Default::default();
            let mut set_len = [0; 4];
            for set in sets {
                prepared[set.kind as usize] = set
                    .queries
                    .iter()
                    .map(|q| translate(q, live.fields))
                    .collect();
                set_len[set.kind as usize] = set.queries.len();
            }
            let template = TantivySearch {
                reader: live.reader.clone(),
                prepared: Arc::new(prepared),
                aggregations: aggregation_request(),
                context: AggContextParams {
                    tokenizers: live.index.tokenizers().clone(),
                    ..AggContextParams::default()
                },
            };
            let make: Connector<TantivySearch> = Arc::new(move || {
                let session = template.clone();
                Box::pin(async move { Ok(session) })
            });
            let pool = Pool::open(n, make).await.map_err(|e| self.error(e))?;
            Ok(blocking_workers(pool, set_len))
        })
    }

    fn drop_index(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            self.live = None;
            if self.dir.join(MARKER_FILE).exists() {
                std::fs::remove_dir_all(&self.dir).map_err(|e| self.error(e))?;
            }
            Ok(())
        })
    }
}

/// The `index` action line of a `_bulk` body.
#[derive(Deserialize)]
struct Action {
    index: ActionMeta,
}

#[derive(Deserialize)]
struct ActionMeta {
    #[serde(rename = "_id")]
    id: String,
}

/// A document's `_source`; unknown fields are refused, as the strict mapping refuses them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Source<'a> {
    #[serde(borrow)]
    title: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    body: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    category: std::borrow::Cow<'a, str>,
    price: f64,
    stock: i64,
}

/// One ingest session: parses a `_bulk` body and adds its documents through the shared writer.
struct BulkParser {
    writer: Arc<IndexWriter>,
    fields: Fields,
}

impl BulkParser {
    fn add(&self, action: &[u8], source: &[u8]) -> Result<(), String> {
        let action: Action =
            serde_json::from_slice(action).map_err(|e| format!("bad action line: {e}"))?;
        let id: u64 = action
            .index
            .id
            .parse()
            .map_err(|_| format!("_id `{}` is not a number", action.index.id))?;
        let source: Source =
            serde_json::from_slice(source).map_err(|e| format!("document {id}: {e}"))?;
        let f = self.fields;
        let mut doc = TantivyDocument::new();
        doc.add_u64(f.id, id);
        doc.add_text(f.title, &source.title);
        doc.add_text(f.body, &source.body);
        doc.add_text(f.category, &source.category);
        doc.add_f64(f.price, source.price);
        doc.add_i64(f.stock, source.stock);
        self.writer
            .add_document(doc)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

impl BlockingBulkSession for BulkParser {
    fn bulk(&mut self, bulk: &Bulk) -> Result<(), OpError> {
        let mut lines = bulk.body.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        let mut failed = 0u64;
        let mut first_error = None;
        while let Some(action) = lines.next() {
            let Some(source) = lines.next() else {
                return Err(OpError::Failed("an action line without a document".into()));
            };
            if let Err(message) = self.add(action, source) {
                failed += 1;
                first_error.get_or_insert(message);
            }
        }
        match first_error {
            None => Ok(()),
            Some(first) => Err(op_error(
                false,
                format!("_bulk rejected {failed} documents; first: {first}"),
            )),
        }
    }
}

/// One search session: the reader and the prepared queries, shared by every session.
#[derive(Clone)]
struct TantivySearch {
    reader: IndexReader,
    prepared: Arc<[Vec<Box<dyn tantivy::query::Query>>; 4]>,
    aggregations: Aggregations,
    context: AggContextParams,
}

impl TantivySearch {
    fn run(&self, searcher: &Searcher, kind: QueryKind, index: usize) -> tantivy::Result<()> {
        let query = &*self.prepared[kind as usize][index];
        if kind.ranked() {
            let collector = (TopDocs::with_limit(TOP_K).order_by_score(), Count);
            let (top, _total) = searcher.search(query, &collector)?;
            // The hits' documents are read, as a server's fetch phase reads `_source`.
            for (_, address) in top {
                let _doc: TantivyDocument = searcher.doc(address)?;
            }
        } else {
            let collector = aggregation_collector(&self.aggregations, &self.context);
            let (_total, _buckets) = searcher.search(query, &(Count, collector))?;
        }
        Ok(())
    }
}

impl BlockingSearchSession for TantivySearch {
    fn search(&mut self, kind: QueryKind, index: usize) -> Result<(), OpError> {
        let searcher = self.reader.searcher();
        self.run(&searcher, kind, index).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Corpus;

    #[tokio::test]
    async fn bulk_bodies_go_in_and_queries_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TargetSpec::parse("tantivy").unwrap();
        let index = IndexSpec {
            name: "x".into(),
            request_cache: true,
        };
        let mut engine = TantivyTarget::open(&spec, &index, dir.path()).unwrap();
        let description = engine.describe().await.unwrap();
        assert_eq!(description.system.location, Location::Embedded);
        assert_eq!(
            description.system.data_dir.as_deref(),
            Some(dir.path()),
            "the index is made in the results folder"
        );
        let settings = engine.create_index().await.unwrap();
        assert_eq!(settings["mapping.category"], "keyword (raw, fast)");
        let corpus = Corpus::generate(4, 300);
        let workers = engine.open_ingest(2).await.unwrap();
        let bulks: Arc<[Bulk]> = corpus.bulk_bodies(100).into();
        let outcome = workers
            .run(
                bulks,
                std::time::Duration::from_secs(60),
                Arc::new(std::sync::atomic::AtomicBool::new(false)),
            )
            .await;
        assert_eq!(outcome.recorder.counts.ok, 300);
        engine.refresh().await.unwrap();
        assert_eq!(engine.count().await.unwrap(), 300);
        let term = corpus.vocabulary.term(corpus.docs[0].body[0]).to_owned();
        let answer = engine
            .answer(&Query::Match { term }, &Bytes::new())
            .await
            .unwrap();
        assert!(answer.total >= 1 && !answer.top_ids.is_empty());
        engine.drop_index().await.unwrap();
        assert!(!dir.path().join("tantivy-index").exists());
    }

    #[test]
    fn a_strict_mapping_refuses_unknown_fields() {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        let writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let mut parser = BulkParser {
            writer: Arc::new(writer),
            fields,
        };
        let body = Bytes::from_static(
            b"{\"index\":{\"_id\":\"1\"}}\n{\"title\":\"a\",\"body\":\"b\",\"category\":\"c\",\"price\":1.5,\"stock\":2,\"extra\":1}\n",
        );
        let error = parser.bulk(&Bulk { docs: 1, body }).unwrap_err();
        assert!(
            error.to_string().contains("unknown field `extra`"),
            "{error}"
        );
    }
}
