//! The query sets, generated from the seed and shared by every engine: what each query asks
//! (engine-neutral) and its Elasticsearch request body, serialized once.

use bytes::Bytes;
use common::data::rng;
use rand::RngExt;
use serde_json::{Value, json};

use crate::corpus::{CATEGORIES, Corpus, VOCABULARY_TERMS, category_name};

const QUERIES_STREAM: u64 = 12;
/// Hits returned by the ranked workloads (seed 000: size 10).
pub const TOP_K: usize = 10;
/// The name of the terms aggregation and of its `avg` sub-aggregation in every request.
pub const AGG_NAME: &str = "by_category";
pub const AVG_NAME: &str = "avg_price";
/// Ranks whose term occurs in roughly 4–16% of documents: "high frequency" for `bool` and
/// the aggregation (thousands of matches per query at 200k documents).
const HIGH_FREQUENCY_RANKS: std::ops::Range<usize> = 20..100;

/// The measured query workloads, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryKind {
    Match,
    Phrase,
    Bool,
    Aggregation,
}

impl QueryKind {
    pub const ALL: [QueryKind; 4] = [
        QueryKind::Match,
        QueryKind::Phrase,
        QueryKind::Bool,
        QueryKind::Aggregation,
    ];

    /// The workload's row in the report.
    pub fn label(self) -> &'static str {
        match self {
            QueryKind::Match => "match (single term, mixed frequency), size 10",
            QueryKind::Phrase => "match_phrase (real bigrams), size 10",
            QueryKind::Bool => "bool: high-freq match must + term filter, size 10",
            QueryKind::Aggregation => "terms agg + avg sub-agg over high-freq match, size 0",
        }
    }

    /// The name used by `--workloads`.
    pub fn key(self) -> &'static str {
        match self {
            QueryKind::Match => "match",
            QueryKind::Phrase => "phrase",
            QueryKind::Bool => "bool",
            QueryKind::Aggregation => "agg",
        }
    }

    pub fn ranked(self) -> bool {
        self != QueryKind::Aggregation
    }
}

/// One query, engine-neutral. Terms are the vocabulary's words; `category` a keyword value.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    Match { term: String },
    Phrase { first: String, second: String },
    Bool { term: String, category: String },
    Aggregation { term: String },
}

impl Query {
    /// The Elasticsearch `_search` body. Totals are exact (`track_total_hits`) in the timed
    /// requests too, so every engine counts every match, as verified.
    pub fn body(&self) -> Value {
        match self {
            Query::Match { term } => ranked(json!({"match": {"body": term}})),
            Query::Phrase { first, second } => {
                ranked(json!({"match_phrase": {"body": format!("{first} {second}")}}))
            }
            Query::Bool { term, category } => ranked(json!({"bool": {
                "must": [{"match": {"body": term}}],
                "filter": [{"term": {"category": category}}],
            }})),
            Query::Aggregation { term } => json!({
                "size": 0,
                "track_total_hits": true,
                "query": {"match": {"body": term}},
                "aggs": aggregations(),
            }),
        }
    }
}

fn ranked(query: Value) -> Value {
    json!({"size": TOP_K, "track_total_hits": true, "query": query})
}

/// The aggregation request, in the Elasticsearch syntax tantivy also reads: every category
/// (size = the number of categories, so no bucket is cut) with the average price in each.
pub fn aggregations() -> Value {
    json!({AGG_NAME: {
        "terms": {"field": "category", "size": CATEGORIES},
        "aggs": {AVG_NAME: {"avg": {"field": "price"}}},
    }})
}

/// One workload's queries and their serialized bodies, index for index.
#[derive(Clone, Debug)]
pub struct QuerySet {
    pub kind: QueryKind,
    pub queries: Vec<Query>,
    pub bodies: Vec<Bytes>,
}

impl QuerySet {
    /// `count` queries of `kind`, drawn from the seed (and, for phrases, from the corpus).
    pub fn generate(kind: QueryKind, corpus: &Corpus, seed: u64, count: usize) -> QuerySet {
        let mut rng = rng(seed, QUERIES_STREAM + kind as u64);
        let vocab = &corpus.vocabulary;
        let high = |rng: &mut rand_chacha::ChaCha8Rng| {
            vocab.terms[rng.random_range(HIGH_FREQUENCY_RANKS)].clone()
        };
        let queries: Vec<Query> = (0..count)
            .map(|_| match kind {
                QueryKind::Match => {
                    // Log-uniform over ranks: frequent, middling and rare terms alike.
                    let log_max = (VOCABULARY_TERMS as f64).ln();
                    let rank = (rng.random::<f64>() * log_max).exp() as usize;
                    Query::Match {
                        term: vocab.terms[rank.clamp(1, VOCABULARY_TERMS) - 1].clone(),
                    }
                }
                QueryKind::Phrase => {
                    let doc = &corpus.docs[rng.random_range(0..corpus.docs.len())];
                    let at = rng.random_range(0..doc.body.len() - 1);
                    Query::Phrase {
                        first: vocab.term(doc.body[at]).to_owned(),
                        second: vocab.term(doc.body[at + 1]).to_owned(),
                    }
                }
                QueryKind::Bool => Query::Bool {
                    term: high(&mut rng),
                    category: category_name(rng.random_range(0..CATEGORIES as u8)),
                },
                QueryKind::Aggregation => Query::Aggregation {
                    term: high(&mut rng),
                },
            })
            .collect();
        let bodies = queries
            .iter()
            .map(|q| Bytes::from(serde_json::to_vec(&q.body()).expect("JSON values serialize")))
            .collect();
        QuerySet {
            kind,
            queries,
            bodies,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_the_elasticsearch_requests() {
        let corpus = Corpus::generate(3, 100);
        let set = QuerySet::generate(QueryKind::Bool, &corpus, 3, 5);
        let body: Value = serde_json::from_slice(&set.bodies[0]).unwrap();
        assert_eq!(body["size"], 10);
        assert_eq!(body["track_total_hits"], true);
        assert!(body["query"]["bool"]["filter"][0]["term"]["category"].is_string());
        let agg = QuerySet::generate(QueryKind::Aggregation, &corpus, 3, 1);
        let body: Value = serde_json::from_slice(&agg.bodies[0]).unwrap();
        assert_eq!(body["size"], 0);
        assert_eq!(body["aggs"][AGG_NAME]["terms"]["size"], 50);
    }

    #[test]
    fn phrases_are_bigrams_that_occur_and_sets_repeat() {
        let corpus = Corpus::generate(5, 300);
        let set = QuerySet::generate(QueryKind::Phrase, &corpus, 5, 20);
        for q in &set.queries {
            let Query::Phrase { first, second } = q else {
                panic!("{q:?}")
            };
            let found = corpus.docs.iter().any(|d| {
                d.body.windows(2).any(|w| {
                    corpus.vocabulary.term(w[0]) == first && corpus.vocabulary.term(w[1]) == second
                })
            });
            assert!(found, "{first} {second}");
        }
        let again = QuerySet::generate(QueryKind::Phrase, &corpus, 5, 20);
        assert_eq!(set.queries, again.queries);
        let matches = QuerySet::generate(QueryKind::Match, &corpus, 5, 200);
        let distinct: std::collections::HashSet<_> =
            matches.queries.iter().map(|q| format!("{q:?}")).collect();
        assert!(distinct.len() > 50, "mixed frequency means many terms");
    }
}
