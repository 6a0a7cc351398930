//! Exact ground truth: every query against every row (or every row of a filtered subset), as
//! blocked matrix products on all cores, the best candidates re-ranked in f64 so the k-th
//! distance is exact; cached beside the dataset with a checksum, so a run never trusts a stale
//! or damaged file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use common::data::Checksum;
use ndarray::{ArrayView2, linalg::general_mat_mul};

use crate::dataset::{Dataset, Metric};

/// Rows of one block of the matrix product (per thread).
const ROW_BLOCK: usize = 2048;
/// Queries of one block of the matrix product.
const QUERY_BLOCK: usize = 256;
/// The f32 pass keeps this many candidates per wanted neighbour, for the f64 re-rank.
const CANDIDATE_FACTOR: usize = 2;

/// The true nearest rows of each query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Truth {
    pub k: usize,
    /// Per query, the ids of its `k` nearest rows (fewer when fewer rows qualify), best first.
    pub ids: Vec<Vec<u32>>,
    /// Per query, the exact (f64) distance of its k-th nearest row: anything returned at this
    /// distance is as good as the k-th neighbour (ties count).
    pub kth: Vec<f64>,
}

impl Truth {
    /// The truth at a smaller `k`: each query's first `k` neighbours, the k-th distance the
    /// farthest of them (computed once at the largest k of a run, scored at every k).
    pub fn truncated(&self, data: &Dataset, k: usize) -> Truth {
        if k >= self.k {
            return self.clone();
        }
        let mut ids = Vec::with_capacity(self.ids.len());
        let mut kth = Vec::with_capacity(self.ids.len());
        for (q, list) in self.ids.iter().enumerate() {
            let top: Vec<u32> = list[..list.len().min(k)].to_vec();
            let worst = top
                .iter()
                .map(|id| distance(data.metric, data.query(q), data.row(*id as usize)))
                .fold(f64::NEG_INFINITY, f64::max);
            kth.push(if top.is_empty() { f64::INFINITY } else { worst });
            ids.push(top);
        }
        Truth { k, ids, kth }
    }
}

/// Exact distance between two vectors, in f64, as every recall is judged.
pub fn distance(metric: Metric, a: &[f32], b: &[f32]) -> f64 {
    match metric {
        Metric::Cosine => {
            1.0 - a
                .iter()
                .zip(b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum::<f64>()
        }
        Metric::L2 => a
            .iter()
            .zip(b)
            .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
            .sum(),
    }
}

/// The rows a query family searches: all of them, or those of one category (ids are kept).
struct Subset<'a> {
    vectors: std::borrow::Cow<'a, [f32]>,
    ids: Option<Vec<u32>>,
}

impl Subset<'_> {
    fn of(data: &Dataset, category: Option<u8>) -> Subset<'_> {
        match category {
            None => Subset {
                vectors: std::borrow::Cow::Borrowed(&data.base),
                ids: None,
            },
            Some(c) => {
                let ids: Vec<u32> = (0..data.rows() as u32)
                    .filter(|id| data.categories[*id as usize] == c)
                    .collect();
                let mut vectors = Vec::with_capacity(ids.len() * data.dims);
                ids.iter()
                    .for_each(|id| vectors.extend_from_slice(data.row(*id as usize)));
                Subset {
                    vectors: std::borrow::Cow::Owned(vectors),
                    ids: Some(ids),
                }
            }
        }
    }

    fn id(&self, local: u32) -> u32 {
        self.ids.as_ref().map_or(local, |ids| ids[local as usize])
    }
}

/// The best `capacity` (key, id) pairs seen, ascending by key.
#[derive(Clone, Debug)]
pub(crate) struct TopK {
    capacity: usize,
    pub(crate) keys: Vec<f32>,
    pub(crate) ids: Vec<u32>,
}

impl TopK {
    pub(crate) fn new(capacity: usize) -> TopK {
        TopK {
            capacity,
            keys: Vec::with_capacity(capacity + 1),
            ids: Vec::with_capacity(capacity + 1),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.ids.clear();
    }

    #[inline]
    pub(crate) fn worst(&self) -> f32 {
        if self.keys.len() < self.capacity {
            f32::INFINITY
        } else {
            self.keys[self.keys.len() - 1]
        }
    }

    #[inline]
    pub(crate) fn offer(&mut self, key: f32, id: u32) {
        if key >= self.worst() {
            return;
        }
        let at = self.keys.partition_point(|k| *k <= key);
        self.keys.insert(at, key);
        self.ids.insert(at, id);
        if self.keys.len() > self.capacity {
            self.keys.pop();
            self.ids.pop();
        }
    }

    fn merge(&mut self, other: &TopK) {
        for (key, id) in other.keys.iter().zip(&other.ids) {
            self.offer(*key, *id);
        }
    }
}

/// Computes the exact `k` nearest rows of every query (of `category`'s rows when given).
/// `done` counts rows scanned, for a progress bar.
pub fn exact(data: &Dataset, k: usize, category: Option<u8>, done: &AtomicU64) -> Truth {
    exact_of(data, &data.queries, k, category, done)
}

/// The exact truth of some of the queries (`sample`, by index), for checking a file's lists
/// without computing them all.
pub fn exact_sample(data: &Dataset, k: usize, sample: &[usize]) -> Truth {
    let mut queries = Vec::with_capacity(sample.len() * data.dims);
    sample
        .iter()
        .for_each(|q| queries.extend_from_slice(data.query(*q)));
    exact_of(data, &queries, k, None, &AtomicU64::new(0))
}

/// [`exact`] for the query matrix `query_rows` (row-major, `dims` wide).
fn exact_of(
    data: &Dataset,
    query_rows: &[f32],
    k: usize,
    category: Option<u8>,
    done: &AtomicU64,
) -> Truth {
    let subset = Subset::of(data, category);
    let dims = data.dims;
    let rows = subset.vectors.len() / dims;
    let queries = query_rows.len() / dims;
    let capacity = (k * CANDIDATE_FACTOR).min(rows).max(1);
    let norms: Vec<f32> = match data.metric {
        Metric::Cosine => Vec::new(),
        Metric::L2 => subset
            .vectors
            .chunks_exact(dims)
            .map(|r| r.iter().map(|x| x * x).sum())
            .collect(),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shard_rows = rows.div_ceil(threads).max(1);
    let shards: Vec<Vec<TopK>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..rows)
            .step_by(shard_rows)
            .map(|start| {
                let end = (start + shard_rows).min(rows);
                let (vectors, norms) = (&subset.vectors, &norms);
                scope.spawn(move || {
                    scan_shard(data, query_rows, vectors, norms, start..end, capacity, done)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a ground-truth thread does not panic"))
            .collect()
    });
    let mut merged = vec![TopK::new(capacity); queries];
    for shard in &shards {
        for (into, from) in merged.iter_mut().zip(shard) {
            into.merge(from);
        }
    }
    rerank(data, query_rows, &subset, &merged, k)
}

/// One thread's rows against every query, block by block.
fn scan_shard(
    data: &Dataset,
    query_rows: &[f32],
    vectors: &[f32],
    norms: &[f32],
    range: std::ops::Range<usize>,
    capacity: usize,
    done: &AtomicU64,
) -> Vec<TopK> {
    let dims = data.dims;
    let queries = query_rows.len() / dims;
    let mut best = vec![TopK::new(capacity); queries];
    let mut scores = ndarray::Array2::<f32>::zeros((QUERY_BLOCK, ROW_BLOCK));
    let mut start = range.start;
    while start < range.end {
        let end = (start + ROW_BLOCK).min(range.end);
        let block = ArrayView2::from_shape((end - start, dims), &vectors[start * dims..end * dims])
            .expect("a block is rows × dims");
        for q0 in (0..queries).step_by(QUERY_BLOCK) {
            let q1 = (q0 + QUERY_BLOCK).min(queries);
            let qs = ArrayView2::from_shape((q1 - q0, dims), &query_rows[q0 * dims..q1 * dims])
                .expect("a query block is queries × dims");
            let mut out = scores.slice_mut(ndarray::s![..q1 - q0, ..end - start]);
            general_mat_mul(1.0, &qs, &block.t(), 0.0, &mut out);
            for (qi, row) in out.rows().into_iter().enumerate() {
                let top = &mut best[q0 + qi];
                let mut worst = top.worst();
                for (j, dot) in row.iter().enumerate() {
                    // Smaller is nearer: −dot for cosine (unit vectors), |x|² − 2·dot for L2
                    // (|q|² is the same for every row of a query).
                    let key = match data.metric {
                        Metric::Cosine => -dot,
                        Metric::L2 => norms[start + j] - 2.0 * dot,
                    };
                    if key < worst {
                        top.offer(key, (start + j) as u32);
                        worst = top.worst();
                    }
                }
            }
        }
        done.fetch_add((end - start) as u64, Ordering::Relaxed);
        start = end;
    }
    best
}

/// Re-ranks the f32 candidates by exact f64 distance and keeps `k` per query.
fn rerank(
    data: &Dataset,
    query_rows: &[f32],
    subset: &Subset<'_>,
    candidates: &[TopK],
    k: usize,
) -> Truth {
    let mut ids = Vec::with_capacity(candidates.len());
    let mut kth = Vec::with_capacity(candidates.len());
    for (q, top) in candidates.iter().enumerate() {
        let query = &query_rows[q * data.dims..(q + 1) * data.dims];
        let mut exact: Vec<(f64, u32)> = top
            .ids
            .iter()
            .map(|local| {
                let id = subset.id(*local);
                (distance(data.metric, query, data.row(id as usize)), id)
            })
            .collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        exact.truncate(k);
        kth.push(exact.last().map_or(f64::INFINITY, |e| e.0));
        ids.push(exact.into_iter().map(|e| e.1).collect());
    }
    Truth { k, ids, kth }
}

/// Ground truth from the file's own neighbour lists (ann-benchmarks `neighbors`, TEXMEX
/// `.ivecs`), with each k-th distance recomputed exactly. `None` when the file's lists are
/// shorter than `k` or name rows that were not loaded.
pub fn from_file(data: &Dataset, k: usize) -> Option<Truth> {
    let lists = data.file_truth.as_ref()?;
    if lists.len() < data.query_count() {
        return None;
    }
    let mut ids = Vec::new();
    let mut kth = Vec::new();
    for (q, list) in lists.iter().take(data.query_count()).enumerate() {
        if list.len() < k || list[..k].iter().any(|id| *id as usize >= data.rows()) {
            return None;
        }
        let top: Vec<u32> = list[..k].to_vec();
        let worst = top
            .iter()
            .map(|id| distance(data.metric, data.query(q), data.row(*id as usize)))
            .fold(f64::NEG_INFINITY, f64::max);
        kth.push(worst);
        ids.push(top);
    }
    Some(Truth { k, ids, kth })
}

/// Where the cached truth of `data` for (`k`, `category`) lives: beside the dataset file, or in
/// `cache_dir` for generated data.
pub fn cache_path(data: &Dataset, k: usize, category: Option<u8>, cache_dir: &Path) -> PathBuf {
    let filter = category.map_or_else(|| "all".to_owned(), |c| format!("cat{c}"));
    let name = format!(
        "truth-{}-{}-k{k}-{filter}-q{}.fbtruth",
        data.checksum,
        data.metric.as_str(),
        data.query_count()
    );
    match &data.source_file {
        Some(file) => {
            let mut beside = file.clone().into_os_string();
            beside.push(format!(".{name}"));
            PathBuf::from(beside)
        }
        None => cache_dir.join(name),
    }
}

const MAGIC: &[u8; 8] = b"FBTRUTH1";

/// The cache file's bytes: magic, dataset checksum, k, queries, per query its ids and k-th
/// distance, then an FNV-1a checksum of all of it.
pub fn encode(truth: &Truth, data_checksum: &str) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(data_checksum.as_bytes());
    out.extend_from_slice(&(truth.k as u32).to_le_bytes());
    out.extend_from_slice(&(truth.ids.len() as u32).to_le_bytes());
    for (ids, kth) in truth.ids.iter().zip(&truth.kth) {
        out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        ids.iter()
            .for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
        out.extend_from_slice(&kth.to_le_bytes());
    }
    let mut sum = Checksum::default();
    sum.update(&out);
    out.extend_from_slice(sum.hex().as_bytes());
    out
}

/// Reads a cache file back; `None` when it is damaged or belongs to other data.
pub fn decode(bytes: &[u8], data_checksum: &str, k: usize, queries: usize) -> Option<Truth> {
    let (body, trailer) = bytes.split_at_checked(bytes.len().checked_sub(16)?)?;
    let mut sum = Checksum::default();
    sum.update(body);
    if sum.hex().as_bytes() != trailer {
        return None;
    }
    let mut at = body
        .strip_prefix(MAGIC)?
        .strip_prefix(data_checksum.as_bytes())?;
    let u32_at = |at: &mut &[u8]| -> Option<u32> {
        let (head, rest) = at.split_at_checked(4)?;
        *at = rest;
        Some(u32::from_le_bytes(head.try_into().ok()?))
    };
    if u32_at(&mut at)? as usize != k || u32_at(&mut at)? as usize != queries {
        return None;
    }
    let mut ids = Vec::with_capacity(queries);
    let mut kth = Vec::with_capacity(queries);
    for _ in 0..queries {
        let count = u32_at(&mut at)? as usize;
        let list = (0..count)
            .map(|_| u32_at(&mut at))
            .collect::<Option<Vec<u32>>>()?;
        let (head, rest) = at.split_at_checked(8)?;
        at = rest;
        kth.push(f64::from_le_bytes(head.try_into().ok()?));
        ids.push(list);
    }
    at.is_empty().then_some(Truth { k, ids, kth })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{DataPlan, Parts, generate};

    pub fn small(rows: usize, dims: usize, metric: Metric) -> Dataset {
        let plan = DataPlan {
            data: "generated".into(),
            query_file: None,
            truth_file: None,
            rows,
            dims,
            clusters: 8,
            queries: 40,
            metric,
            seed: 3,
        };
        Dataset::assemble(generate::generate(&plan), metric, 3).unwrap()
    }

    /// The obvious way: every distance in f64, sorted.
    fn brute(data: &Dataset, k: usize, category: Option<u8>) -> Vec<Vec<u32>> {
        (0..data.query_count())
            .map(|q| {
                let mut all: Vec<(f64, u32)> = (0..data.rows())
                    .filter(|id| category.is_none_or(|c| data.categories[*id] == c))
                    .map(|id| {
                        (
                            distance(data.metric, data.query(q), data.row(id)),
                            id as u32,
                        )
                    })
                    .collect();
                all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                all.into_iter().take(k).map(|e| e.1).collect()
            })
            .collect()
    }

    #[test]
    fn blocked_products_agree_with_brute_force() {
        for metric in [Metric::Cosine, Metric::L2] {
            let data = small(5_000, 24, metric);
            for category in [None, Some(crate::dataset::CATEGORY_1PCT)] {
                let done = AtomicU64::new(0);
                let truth = exact(&data, 10, category, &done);
                assert_eq!(
                    truth.ids,
                    brute(&data, 10, category),
                    "{metric:?} {category:?}"
                );
                let expected_rows = category.map_or(5_000, |c| data.category_size(c));
                assert_eq!(done.load(Ordering::Relaxed), expected_rows as u64);
                let q0 = data.query(0);
                let kth = distance(metric, q0, data.row(truth.ids[0][9] as usize));
                assert_eq!(truth.kth[0], kth);
            }
        }
    }

    #[test]
    fn a_truth_truncated_to_a_smaller_k_is_the_truth_at_that_k() {
        let data = small(3_000, 16, Metric::Cosine);
        let deep = exact(&data, 100, None, &AtomicU64::new(0));
        for k in [1, 10] {
            let shallow = exact(&data, k, None, &AtomicU64::new(0));
            assert_eq!(deep.truncated(&data, k), shallow, "k {k}");
        }
    }

    #[test]
    fn a_subset_smaller_than_k_gives_what_there_is() {
        let parts = Parts {
            description: "t".into(),
            dims: 2,
            base: vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            queries: vec![1.0, 0.1],
            ..Parts::default()
        };
        let data = Dataset::assemble(parts, Metric::Cosine, 1).unwrap();
        let truth = exact(&data, 10, None, &AtomicU64::new(0));
        assert_eq!(truth.ids, vec![vec![0, 2, 1]]);
    }

    #[test]
    fn the_cache_round_trips_and_refuses_damage_or_other_data() {
        let data = small(500, 8, Metric::Cosine);
        let truth = exact(&data, 5, None, &AtomicU64::new(0));
        let bytes = encode(&truth, &data.checksum);
        let q = data.query_count();
        assert_eq!(decode(&bytes, &data.checksum, 5, q), Some(truth));
        assert_eq!(decode(&bytes, "0000000000000000", 5, q), None);
        assert_eq!(decode(&bytes, &data.checksum, 6, q), None);
        let mut damaged = bytes.clone();
        damaged[40] ^= 1;
        assert_eq!(decode(&damaged, &data.checksum, 5, q), None);
        assert_eq!(
            decode(&bytes[..bytes.len() - 1], &data.checksum, 5, q),
            None
        );
        assert_eq!(decode(&[], &data.checksum, 5, q), None);
    }
}
