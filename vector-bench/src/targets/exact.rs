//! The exact scan, vector-bench's own baseline: every query answered by brute force over only
//! the rows its filter admits (each category's rows copied once into a contiguous block), f32
//! dot products with the best 2k re-ranked in f64, so its recall is 1.0 by construction. Every
//! filtered index should beat it; where one does not, the scan is the better engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use common::driver::OpError;
use common::pool::Connector;
use common::results::{Location, SystemInfo};

use super::TargetError;
use crate::dataset::{Dataset, Metric};
use crate::session::{BlockingSearchSession, Searchers, Work};
use crate::truth::{TopK, distance};

/// The name of the exact scan in every report (a target may not take it).
pub const NAME: &str = "exact-scan";
/// Candidates per wanted neighbour kept by the f32 pass, for the exact re-rank.
const CANDIDATE_FACTOR: usize = 2;

/// The rows one query family searches, contiguous.
#[derive(Debug)]
struct Block {
    category: Option<u8>,
    /// Row-major vectors of the admitted rows; empty for the unfiltered family (the dataset's
    /// own base is scanned).
    vectors: Vec<f32>,
    ids: Vec<u32>,
    /// Squared norms, for L2.
    norms: Vec<f32>,
}

/// What the report says about the exact scan.
pub fn info() -> SystemInfo {
    let mut verified = BTreeMap::new();
    verified.insert("kernel".into(), kernel());
    verified.insert(
        "method".into(),
        "brute force over the rows the filter admits; the best 2k by f32 re-ranked in f64".into(),
    );
    SystemInfo {
        name: NAME.into(),
        kind: NAME.into(),
        url_redacted: NAME.into(),
        version: format!("vector-bench {} exact scan", env!("CARGO_PKG_VERSION")),
        verified,
        location: Location::Embedded,
        ..SystemInfo::default()
    }
}

/// The distance kernel, as compiled.
pub fn kernel() -> String {
    let isa = if cfg!(target_feature = "avx2") {
        "AVX2"
    } else if cfg!(target_arch = "x86_64") {
        "SSE2 (the x86-64 baseline)"
    } else if cfg!(target_arch = "aarch64") {
        "NEON"
    } else {
        "scalar"
    };
    format!("portable Rust f32 dot product, 8 accumulators, auto-vectorized for {isa}")
}

/// Opens `sessions` scan sessions over `data`, each filtered family's rows copied once.
pub async fn open(
    data: &Arc<Dataset>,
    categories: &[Option<u8>],
    sessions: usize,
) -> Result<Box<dyn Searchers>, TargetError> {
    let blocks: Arc<Vec<Block>> = Arc::new(categories.iter().map(|c| block(data, *c)).collect());
    let data = data.clone();
    let connect: Connector<ExactSession> = Arc::new(move || {
        let session = ExactSession {
            data: data.clone(),
            blocks: blocks.clone(),
            top: TopK::new(1),
        };
        Box::pin(async move { Ok(session) })
    });
    crate::session::open_blocking(sessions, connect).await
}

fn block(data: &Dataset, category: Option<u8>) -> Block {
    let ids: Vec<u32> = match category {
        None => Vec::new(),
        Some(c) => (0..data.rows() as u32)
            .filter(|id| data.categories[*id as usize] == c)
            .collect(),
    };
    let mut vectors = Vec::with_capacity(ids.len() * data.dims);
    ids.iter()
        .for_each(|id| vectors.extend_from_slice(data.row(*id as usize)));
    let rows: &[f32] = if category.is_none() {
        &data.base
    } else {
        &vectors
    };
    let norms = match data.metric {
        Metric::Cosine => Vec::new(),
        Metric::L2 => rows.chunks_exact(data.dims).map(|r| dot(r, r)).collect(),
    };
    Block {
        category,
        vectors,
        ids,
        norms,
    }
}

/// f32 dot product in eight independent lanes, which the compiler turns into SIMD adds.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// One scanning thread's state.
pub struct ExactSession {
    data: Arc<Dataset>,
    blocks: Arc<Vec<Block>>,
    top: TopK,
}

impl BlockingSearchSession for ExactSession {
    fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        if !self.blocks.iter().any(|b| b.category == work.category) {
            return Err(format!("no rows prepared for category {:?}", work.category));
        }
        self.top = TopK::new(work.k * CANDIDATE_FACTOR);
        Ok("exact".into())
    }

    fn search(&mut self, work: &Work, query: usize, out: &mut Vec<u64>) -> Result<(), OpError> {
        let data = &self.data;
        let block = self
            .blocks
            .iter()
            .find(|b| b.category == work.category)
            .ok_or_else(|| OpError::Failed("no rows for this filter".into()))?;
        let rows: &[f32] = if block.category.is_none() {
            &data.base
        } else {
            &block.vectors
        };
        let q = data.query(query);
        self.top.clear();
        for (local, row) in rows.chunks_exact(data.dims).enumerate() {
            let d = dot(q, row);
            // Smaller is nearer: −dot for cosine (unit vectors), |x|² − 2·dot for L2.
            let key = match data.metric {
                Metric::Cosine => -d,
                Metric::L2 => block.norms[local] - 2.0 * d,
            };
            if key < self.top.worst() {
                self.top.offer(key, local as u32);
            }
        }
        let mut exact: Vec<(f64, u32)> = self
            .top
            .ids
            .iter()
            .map(|local| {
                let id = if block.category.is_none() {
                    *local
                } else {
                    block.ids[*local as usize]
                };
                (distance(data.metric, q, data.row(id as usize)), id)
            })
            .collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out.clear();
        out.extend(exact.iter().take(work.k).map(|(_, id)| u64::from(*id)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dot_product_matches_the_plain_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.25 - 3.0).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.125).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(
            (dot(&a, &b) - plain).abs() < 1e-3,
            "{} {plain}",
            dot(&a, &b)
        );
    }
}
