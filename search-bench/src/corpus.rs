//! The corpus every engine indexes: a zipf vocabulary of pseudo-words, documents with text
//! title/body, a keyword category, numeric price/stock, generated from the seed, and the
//! `_bulk` bodies that carry it (serialized once, before any clock starts).

use bytes::Bytes;
use common::data::{Checksum, rng};
use common::results::DataInfo;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// Terms in the vocabulary (seed 000).
pub const VOCABULARY_TERMS: usize = 5_000;
/// Distinct values of the keyword `category` (seed 000).
pub const CATEGORIES: usize = 50;
/// Zipf exponent: rank r is drawn with probability proportional to 1 / r^s.
const ZIPF_S: f64 = 1.0;
const TITLE_WORDS: (usize, usize) = (3, 9);
const BODY_WORDS: (usize, usize) = (20, 81);

/// Generator streams, one per purpose, so changing one never shifts another.
const VOCABULARY_STREAM: u64 = 10;
const DOCS_STREAM: u64 = 11;

/// Syllables pseudo-words are made of: lowercase ASCII, so every analyzer (Elasticsearch's
/// standard analyzer, tantivy's default tokenizer) yields exactly the generated terms.
const SYLLABLES: [&str; 40] = [
    "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bar", "dor", "fen", "gil", "hum",
    "jor", "kel", "lan", "mor", "nis", "pol", "quin", "ros", "sul", "tam", "ven", "wil", "xan",
    "yor", "zel", "an", "el", "in", "on", "ur", "ash", "eth", "ist", "oth", "und",
];

/// The vocabulary, most frequent term first, with the zipf cumulative distribution.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    pub terms: Vec<String>,
    cdf: Vec<f64>,
}

impl Vocabulary {
    pub fn generate(seed: u64) -> Vocabulary {
        let mut rng = rng(seed, VOCABULARY_STREAM);
        let mut seen = std::collections::HashSet::new();
        let mut terms = Vec::with_capacity(VOCABULARY_TERMS);
        while terms.len() < VOCABULARY_TERMS {
            let syllables = rng.random_range(2..=4);
            let word: String = (0..syllables)
                .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
                .collect();
            if seen.insert(word.clone()) {
                terms.push(word);
            }
        }
        let weights: Vec<f64> = (1..=VOCABULARY_TERMS)
            .map(|rank| 1.0 / (rank as f64).powf(ZIPF_S))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut running = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                running += w / total;
                running
            })
            .collect();
        Vocabulary { terms, cdf }
    }

    /// A term id (0 = most frequent) drawn from the zipf distribution.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u16 {
        let u: f64 = rng.random();
        let rank = self.cdf.partition_point(|&c| c < u);
        rank.min(VOCABULARY_TERMS - 1) as u16
    }

    pub fn term(&self, id: u16) -> &str {
        &self.terms[usize::from(id)]
    }
}

/// The keyword value of category `index`.
pub fn category_name(index: u8) -> String {
    format!("cat{index:02}")
}

/// One document, as term ids; rendered to text only when serialized.
#[derive(Debug, Clone)]
pub struct Doc {
    pub id: u32,
    pub title: Vec<u16>,
    pub body: Vec<u16>,
    pub category: u8,
    /// Price in cents, so every engine is sent an exact two-decimal value.
    pub price_cents: u32,
    pub stock: u32,
}

impl Doc {
    pub fn price(&self) -> f64 {
        f64::from(self.price_cents) / 100.0
    }
}

/// The generated corpus, identical for every engine.
#[derive(Debug)]
pub struct Corpus {
    pub vocabulary: Vocabulary,
    pub docs: Vec<Doc>,
    pub info: DataInfo,
}

impl Corpus {
    pub fn generate(seed: u64, docs: u64) -> Corpus {
        let vocabulary = Vocabulary::generate(seed);
        let mut rng = rng(seed, DOCS_STREAM);
        let mut checksum = Checksum::default();
        let mut text = String::new();
        let docs: Vec<Doc> = (0..docs as u32)
            .map(|id| {
                let title_len = rng.random_range(TITLE_WORDS.0..TITLE_WORDS.1);
                let title = (0..title_len)
                    .map(|_| vocabulary.sample(&mut rng))
                    .collect();
                let body_len = rng.random_range(BODY_WORDS.0..BODY_WORDS.1);
                let body = (0..body_len).map(|_| vocabulary.sample(&mut rng)).collect();
                let doc = Doc {
                    id,
                    title,
                    body,
                    category: rng.random_range(0..CATEGORIES as u8),
                    price_cents: rng.random_range(100..100_000),
                    stock: rng.random_range(0..1_000),
                };
                text.clear();
                write_source(&vocabulary, &doc, &mut text);
                checksum.update(text.as_bytes());
                doc
            })
            .collect();
        let info = DataInfo {
            seed,
            checksum: checksum.hex(),
            description: format!(
                "{} documents: title and body text over a zipf (s = {ZIPF_S}) vocabulary of {} terms, keyword category ({CATEGORIES} values), double price, integer stock",
                common::human::format_thousands(docs.len() as f64),
                common::human::format_thousands(VOCABULARY_TERMS as f64)
            ),
        };
        Corpus {
            vocabulary,
            docs,
            info,
        }
    }

    /// The `_bulk` request bodies, `batch` documents each: NDJSON `index` actions with the
    /// document's `_id` (no index name, so the same bytes go to every engine).
    pub fn bulk_bodies(&self, batch: usize) -> Vec<Bulk> {
        let mut line = String::new();
        self.docs
            .chunks(batch.max(1))
            .map(|docs| {
                let mut body = String::with_capacity(docs.len() * 512);
                for doc in docs {
                    body.push_str(&format!("{{\"index\":{{\"_id\":\"{}\"}}}}\n", doc.id));
                    line.clear();
                    write_source(&self.vocabulary, doc, &mut line);
                    body.push_str(&line);
                    body.push('\n');
                }
                Bulk {
                    docs: docs.len() as u64,
                    body: Bytes::from(body),
                }
            })
            .collect()
    }
}

/// One `_bulk` request body and the number of documents it carries.
#[derive(Debug, Clone)]
pub struct Bulk {
    pub docs: u64,
    pub body: Bytes,
}

/// The document's `_source` JSON. Terms are plain lowercase ASCII, so no escaping is needed.
fn write_source(vocabulary: &Vocabulary, doc: &Doc, out: &mut String) {
    use std::fmt::Write as _;
    let words = |ids: &[u16], out: &mut String| {
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(vocabulary.term(*id));
        }
    };
    out.push_str("{\"title\":\"");
    words(&doc.title, out);
    out.push_str("\",\"body\":\"");
    words(&doc.body, out);
    let _ = write!(
        out,
        "\",\"category\":\"{}\",\"price\":{}.{:02},\"stock\":{}}}",
        category_name(doc.category),
        doc.price_cents / 100,
        doc.price_cents % 100,
        doc.stock
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_corpus() {
        let a = Corpus::generate(7, 200);
        let b = Corpus::generate(7, 200);
        assert_eq!(a.info, b.info);
        assert_ne!(a.info.checksum, Corpus::generate(8, 200).info.checksum);
        assert_eq!(a.vocabulary.terms.len(), VOCABULARY_TERMS);
        let unique: std::collections::HashSet<_> = a.vocabulary.terms.iter().collect();
        assert_eq!(unique.len(), VOCABULARY_TERMS);
    }

    #[test]
    fn term_frequencies_follow_zipf() {
        let corpus = Corpus::generate(42, 2_000);
        let mut counts = vec![0u64; VOCABULARY_TERMS];
        for doc in &corpus.docs {
            for t in &doc.body {
                counts[usize::from(*t)] += 1;
            }
        }
        // Rank 1 is drawn about ten times as often as rank 10 under s = 1.
        let ratio = counts[0] as f64 / counts[9] as f64;
        assert!((6.0..16.0).contains(&ratio), "{ratio}");
        assert!(counts[0] > counts[100] && counts[100] > 0);
    }

    #[test]
    fn bulk_bodies_are_ndjson_with_every_document() {
        let corpus = Corpus::generate(1, 25);
        let bulks = corpus.bulk_bodies(10);
        assert_eq!(
            bulks.iter().map(|b| b.docs).collect::<Vec<_>>(),
            [10, 10, 5]
        );
        let text = std::str::from_utf8(&bulks[2].body).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 10);
        let action: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(action["index"]["_id"], "20");
        let source: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        let doc = &corpus.docs[20];
        assert_eq!(source["price"].as_f64().unwrap(), doc.price());
        assert_eq!(source["category"], category_name(doc.category));
        assert_eq!(
            source["body"].as_str().unwrap().split(' ').count(),
            doc.body.len()
        );
        assert!(text.ends_with('\n'));
    }
}
