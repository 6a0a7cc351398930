//! The exact answers, computed from the generated corpus itself: what every engine must
//! return for each query (totals and aggregation buckets), so engines are checked against the
//! truth and not only against each other.

use std::collections::HashMap;

use crate::answer::{Answer, Bucket};
use crate::corpus::{CATEGORIES, Corpus, category_name};
use crate::queries::{Query, QuerySet};

/// The documents holding each term and each bigram the query sets ask about.
struct Postings<'a> {
    corpus: &'a Corpus,
    terms: HashMap<u16, Vec<u32>>,
    bigrams: HashMap<(u16, u16), Vec<u32>>,
}

impl<'a> Postings<'a> {
    /// One pass over the corpus, recording only what the queries need.
    fn build(corpus: &'a Corpus, sets: &[&QuerySet]) -> Postings<'a> {
        let ids: HashMap<&str, u16> = corpus
            .vocabulary
            .terms
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i as u16))
            .collect();
        let id = |t: &str| ids.get(t).copied().unwrap_or(u16::MAX);
        let mut terms: HashMap<u16, Vec<u32>> = HashMap::new();
        let mut bigrams: HashMap<(u16, u16), Vec<u32>> = HashMap::new();
        for query in sets.iter().flat_map(|s| &s.queries) {
            match query {
                Query::Match { term } | Query::Bool { term, .. } | Query::Aggregation { term } => {
                    terms.entry(id(term)).or_default();
                }
                Query::Phrase { first, second } => {
                    bigrams.entry((id(first), id(second))).or_default();
                }
            }
        }
        for doc in &corpus.docs {
            for (i, t) in doc.body.iter().enumerate() {
                if let Some(list) = terms.get_mut(t)
                    && list.last() != Some(&doc.id)
                {
                    list.push(doc.id);
                }
                if let Some(next) = doc.body.get(i + 1)
                    && let Some(list) = bigrams.get_mut(&(*t, *next))
                    && list.last() != Some(&doc.id)
                {
                    list.push(doc.id);
                }
            }
        }
        // Documents are visited in id order, so `last()` keeps each list sorted and unique.
        Postings {
            corpus,
            terms,
            bigrams,
        }
    }

    fn term_docs(&self, term: &str) -> &[u32] {
        let id = self.corpus.vocabulary.terms.iter().position(|t| t == term);
        id.and_then(|id| self.terms.get(&(id as u16)))
            .map_or(&[], Vec::as_slice)
    }

    fn answer(&self, query: &Query) -> Answer {
        let docs = &self.corpus.docs;
        match query {
            Query::Match { term } => total(self.term_docs(term).len()),
            Query::Phrase { first, second } => {
                let terms = &self.corpus.vocabulary.terms;
                let a = terms.iter().position(|t| t == first);
                let b = terms.iter().position(|t| t == second);
                let hits = match (a, b) {
                    (Some(a), Some(b)) => {
                        self.bigrams.get(&(a as u16, b as u16)).map_or(0, Vec::len)
                    }
                    _ => 0,
                };
                total(hits)
            }
            Query::Bool { term, category } => total(
                self.term_docs(term)
                    .iter()
                    .filter(|id| category_name(docs[**id as usize].category) == *category)
                    .count(),
            ),
            Query::Aggregation { term } => {
                let hits = self.term_docs(term);
                let mut counts = [0u64; CATEGORIES];
                let mut sums = [0f64; CATEGORIES];
                for id in hits {
                    let doc = &docs[*id as usize];
                    counts[usize::from(doc.category)] += 1;
                    sums[usize::from(doc.category)] += doc.price();
                }
                let buckets = (0..CATEGORIES)
                    .filter(|c| counts[*c] > 0)
                    .map(|c| Bucket {
                        key: category_name(c as u8),
                        doc_count: counts[c],
                        avg: Some(sums[c] / counts[c] as f64),
                    })
                    .collect();
                Answer {
                    total: hits.len() as u64,
                    top_ids: Vec::new(),
                    buckets: Some(buckets),
                }
            }
        }
    }
}

fn total(hits: usize) -> Answer {
    Answer {
        total: hits as u64,
        top_ids: Vec::new(),
        buckets: None,
    }
}

/// The exact answer to every query of every set, set by set, index for index.
pub fn expected(corpus: &Corpus, sets: &[&QuerySet]) -> Vec<Vec<Answer>> {
    let postings = Postings::build(corpus, sets);
    sets.iter()
        .map(|set| set.queries.iter().map(|q| postings.answer(q)).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queries::QueryKind;

    #[test]
    fn truth_agrees_with_a_brute_force_scan() {
        let corpus = Corpus::generate(9, 400);
        let sets: Vec<QuerySet> = QueryKind::ALL
            .iter()
            .map(|k| QuerySet::generate(*k, &corpus, 9, 15))
            .collect();
        let refs: Vec<&QuerySet> = sets.iter().collect();
        let truth = expected(&corpus, &refs);
        let words = |ids: &[u16]| -> Vec<String> {
            ids.iter()
                .map(|i| corpus.vocabulary.term(*i).to_owned())
                .collect()
        };
        for (set, answers) in sets.iter().zip(&truth) {
            for (query, answer) in set.queries.iter().zip(answers) {
                let matches = |d: &crate::corpus::Doc| {
                    let body = words(&d.body);
                    match query {
                        Query::Match { term } | Query::Aggregation { term } => body.contains(term),
                        Query::Bool { term, category } => {
                            body.contains(term) && category_name(d.category) == *category
                        }
                        Query::Phrase { first, second } => {
                            body.windows(2).any(|w| w[0] == *first && w[1] == *second)
                        }
                    }
                };
                let brute = corpus.docs.iter().filter(|d| matches(d)).count() as u64;
                assert_eq!(answer.total, brute, "{query:?}");
                if let Some(buckets) = &answer.buckets {
                    assert_eq!(buckets.iter().map(|b| b.doc_count).sum::<u64>(), brute);
                }
            }
        }
        assert!(truth[1].iter().all(|a| a.total > 0), "phrases occur");
    }
}
