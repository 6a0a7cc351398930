//! What a query answered, engine-neutral: the exact total, the top hits' ids, and the
//! aggregation buckets; and how two answers are compared (totals and buckets exactly, averages
//! within floating-point tolerance, ranking only as an overlap figure).

use serde::Serialize;
use serde_json::Value;

use crate::queries::{AGG_NAME, AVG_NAME};

/// Relative tolerance of an average: engines sum doubles in different orders.
const AVG_RELATIVE_TOLERANCE: f64 = 1e-9;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bucket {
    pub key: String,
    pub doc_count: u64,
    pub avg: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Answer {
    pub total: u64,
    /// `_id`s of the returned hits, best first (empty for size-0 queries).
    pub top_ids: Vec<String>,
    /// Sorted by key; `None` when the query has no aggregation.
    pub buckets: Option<Vec<Bucket>>,
}

/// Reads the buckets of the terms aggregation from Elasticsearch-shaped `aggregations` JSON
/// (Elasticsearch, OpenSearch and tantivy all answer in this shape).
pub fn parse_buckets(aggregations: &Value) -> Result<Vec<Bucket>, String> {
    let buckets = aggregations
        .get(AGG_NAME)
        .and_then(|a| a.get("buckets"))
        .and_then(Value::as_array)
        .ok_or_else(|| format!("the answer has no `{AGG_NAME}.buckets` array"))?;
    let mut out = buckets
        .iter()
        .map(|b| {
            let key = match &b["key"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let doc_count = b["doc_count"]
                .as_u64()
                .ok_or_else(|| format!("bucket {key} has no doc_count"))?;
            let avg = b[AVG_NAME]["value"].as_f64();
            Ok(Bucket {
                key,
                doc_count,
                avg,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => (a - b).abs() <= AVG_RELATIVE_TOLERANCE * a.abs().max(b.abs()),
        _ => false,
    }
}

/// Why `got` disagrees with `expected`, or `None` when it agrees. `size` is the number of
/// hits the query asked for.
pub fn disagreement(expected: &Answer, got: &Answer, size: usize) -> Option<String> {
    if expected.total != got.total {
        return Some(format!(
            "total hits {} (expected {})",
            got.total, expected.total
        ));
    }
    let want_hits = (expected.total as usize).min(size);
    if got.top_ids.len() != want_hits {
        return Some(format!(
            "{} hits returned (expected {want_hits})",
            got.top_ids.len()
        ));
    }
    match (&expected.buckets, &got.buckets) {
        (None, None) => None,
        (Some(want), Some(have)) => bucket_disagreement(want, have),
        (Some(_), None) => Some("no aggregation in the answer".into()),
        (None, Some(_)) => Some("an aggregation nobody asked for".into()),
    }
}

fn bucket_disagreement(want: &[Bucket], have: &[Bucket]) -> Option<String> {
    if want.len() != have.len() {
        return Some(format!("{} buckets (expected {})", have.len(), want.len()));
    }
    want.iter().zip(have).find_map(|(w, h)| {
        if w.key != h.key || w.doc_count != h.doc_count {
            Some(format!(
                "bucket {} with {} docs (expected {} with {})",
                h.key, h.doc_count, w.key, w.doc_count
            ))
        } else if !close(w.avg, h.avg) {
            Some(format!(
                "bucket {} avg price {:?} (expected {:?})",
                h.key, h.avg, w.avg
            ))
        } else {
            None
        }
    })
}

/// Shared ids of two top-k lists over `k` (1.0: the same hits, in any order). `None` when
/// neither returned a hit.
pub fn overlap(a: &[String], b: &[String]) -> Option<f64> {
    let k = a.len().max(b.len());
    if k == 0 {
        return None;
    }
    let shared = a.iter().filter(|id| b.contains(id)).count();
    Some(shared as f64 / k as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(total: u64, ids: &[&str], buckets: Option<Vec<Bucket>>) -> Answer {
        Answer {
            total,
            top_ids: ids.iter().map(|s| s.to_string()).collect(),
            buckets,
        }
    }

    #[test]
    fn buckets_parse_from_either_engine_and_compare_with_tolerance() {
        let es = json!({AGG_NAME: {"buckets": [
            {"key": "cat02", "doc_count": 3, AVG_NAME: {"value": 10.5}},
            {"key": "cat01", "doc_count": 4, AVG_NAME: {"value": 1.0 / 3.0}},
        ]}});
        let parsed = parse_buckets(&es).unwrap();
        assert_eq!(parsed[0].key, "cat01");
        let mut nudged = parsed.clone();
        nudged[0].avg = Some(1.0 / 3.0 + 1e-15);
        let a = answer(7, &[], Some(parsed.clone()));
        assert_eq!(disagreement(&a, &answer(7, &[], Some(nudged)), 0), None);
        let mut wrong = parsed.clone();
        wrong[1].doc_count = 2;
        let why = disagreement(&a, &answer(7, &[], Some(wrong)), 0).unwrap();
        assert!(why.contains("cat02 with 2 docs"), "{why}");
        let mut off = parsed;
        off[1].avg = Some(10.6);
        assert!(disagreement(&a, &answer(7, &[], Some(off)), 0).is_some());
        assert!(parse_buckets(&json!({})).is_err());
    }

    #[test]
    fn totals_must_match_exactly_and_ranking_is_only_overlap() {
        let want = answer(12, &["1", "2"], None);
        let capped = answer(10, &["1", "2"], None);
        assert!(
            disagreement(&want, &capped, 2)
                .unwrap()
                .contains("total hits 10 (expected 12)")
        );
        assert_eq!(disagreement(&want, &answer(12, &["2", "1"], None), 2), None);
        let short = disagreement(&want, &answer(12, &["2"], None), 2).unwrap();
        assert!(short.contains("1 hits returned"), "{short}");
        let a: Vec<String> = ["1", "2", "3", "4"].map(String::from).to_vec();
        let b: Vec<String> = ["4", "3", "9", "8"].map(String::from).to_vec();
        assert_eq!(overlap(&a, &b), Some(0.5));
        assert_eq!(overlap(&[], &[]), None);
    }
}
