//! Scoring an answer against exact ground truth: tie-aware recall@k (a returned row exactly as
//! near as the k-th true neighbour counts), and the defects that make an answer wrong rather than
//! merely approximate (a row outside the filter, an unknown id, the same row twice).

use serde::Serialize;

use crate::dataset::Dataset;
use crate::truth::{Truth, distance};

/// Relative slack when comparing a returned row's distance with the k-th: engines compute in
/// f32, so rows closer than this are indistinguishable to them.
const TIE_SLACK: f64 = 1e-6;

/// How much farther than `distance` a row may be and still tie with it.
pub fn tie_slack(distance: f64) -> f64 {
    TIE_SLACK * distance.abs().max(1.0)
}

/// The score of one or many answers, summed.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Score {
    pub queries: u64,
    /// True neighbours (or exact ties with the k-th) returned.
    pub hits: u64,
    /// Neighbours that could have been returned: min(k, rows that qualify), summed.
    pub expected: u64,
    /// Rows returned in all.
    pub returned: u64,
    /// Queries that returned fewer rows than qualify for them (at most k).
    pub short_answers: u64,
    /// Rows outside the query's filter.
    pub filter_violations: u64,
    /// Ids that are no row of the dataset.
    pub unknown_ids: u64,
    /// The same row returned twice for one query.
    pub duplicates: u64,
}

impl Score {
    pub fn recall(&self) -> Option<f64> {
        (self.expected > 0).then(|| self.hits as f64 / self.expected as f64)
    }

    pub fn add(&mut self, other: &Score) {
        self.queries += other.queries;
        self.hits += other.hits;
        self.expected += other.expected;
        self.returned += other.returned;
        self.short_answers += other.short_answers;
        self.filter_violations += other.filter_violations;
        self.unknown_ids += other.unknown_ids;
        self.duplicates += other.duplicates;
    }

    /// Why the answers are wrong (not merely approximate), if they are.
    pub fn defect(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.filter_violations > 0 {
            parts.push(format!(
                "{} returned rows are outside the filter",
                self.filter_violations
            ));
        }
        if self.unknown_ids > 0 {
            parts.push(format!(
                "{} returned ids are no row of the dataset",
                self.unknown_ids
            ));
        }
        if self.duplicates > 0 {
            parts.push(format!(
                "{} rows were returned twice for one query",
                self.duplicates
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Scores the answer `returned` (best first) to query `query`, filtered to `category` if given.
pub fn score(
    data: &Dataset,
    truth: &Truth,
    query: usize,
    category: Option<u8>,
    returned: &[u64],
) -> Score {
    let expected = truth.ids[query].len();
    let kth = truth.kth[query];
    let slack = tie_slack(kth);
    let mut score = Score {
        queries: 1,
        expected: expected as u64,
        ..Score::default()
    };
    let answer = &returned[..returned.len().min(truth.k)];
    score.returned = answer.len() as u64;
    if answer.len() < expected {
        score.short_answers = 1;
    }
    for (i, id) in answer.iter().enumerate() {
        if answer[..i].contains(id) {
            score.duplicates += 1;
            continue;
        }
        let Some(row) = usize::try_from(*id).ok().filter(|r| *r < data.rows()) else {
            score.unknown_ids += 1;
            continue;
        };
        if category.is_some_and(|c| data.categories[row] != c) {
            score.filter_violations += 1;
            continue;
        }
        let true_neighbour = truth.ids[query].contains(&(row as u32));
        if true_neighbour || distance(data.metric, data.query(query), data.row(row)) <= kth + slack
        {
            score.hits += 1;
        }
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Metric, Parts};

    /// Four rows on the unit circle; rows 1 and 2 are equally near the query.
    fn data() -> Dataset {
        let parts = Parts {
            description: "t".into(),
            dims: 2,
            base: vec![1.0, 0.0, 0.6, 0.8, 0.6, -0.8, -1.0, 0.0],
            queries: vec![1.0, 0.0],
            ..Parts::default()
        };
        let mut data = Dataset::assemble(parts, Metric::Cosine, 1).unwrap();
        data.categories = vec![0, 0, 1, 0];
        data
    }

    fn truth(data: &Dataset, category: Option<u8>) -> Truth {
        crate::truth::exact(data, 2, category, &std::sync::atomic::AtomicU64::new(0))
    }

    #[test]
    fn a_tie_at_the_kth_distance_counts() {
        let data = data();
        let t = truth(&data, None);
        assert_eq!(t.ids[0], vec![0, 1], "the tie is broken by id");
        let s = score(&data, &t, 0, None, &[0, 2]);
        assert_eq!((s.hits, s.expected), (2, 2));
        assert_eq!(s.recall(), Some(1.0));
        let s = score(&data, &t, 0, None, &[0, 3]);
        assert_eq!(s.recall(), Some(0.5));
        assert!(s.defect().is_none());
    }

    #[test]
    fn wrong_answers_are_defects_and_short_answers_are_counted() {
        let data = data();
        let t = truth(&data, Some(0));
        assert_eq!(t.ids[0], vec![0, 1]);
        let s = score(&data, &t, 0, Some(0), &[0, 2, 9]);
        assert_eq!(s.filter_violations, 1);
        assert_eq!(s.hits, 1);
        assert!(s.defect().unwrap().contains("outside the filter"));
        let s = score(&data, &t, 0, Some(0), &[99, 0]);
        assert_eq!(s.unknown_ids, 1);
        let s = score(&data, &t, 0, None, &[0, 0]);
        assert_eq!(s.duplicates, 1);
        let s = score(&data, &t, 0, None, &[0]);
        assert_eq!((s.short_answers, s.recall()), (1, Some(0.5)));
        let mut total = Score::default();
        total.add(&s);
        total.add(&s);
        assert_eq!((total.queries, total.hits, total.expected), (2, 2, 4));
    }
}
