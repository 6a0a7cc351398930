//! The seeded generator: a Gaussian mixture of clusters in any size and dimension, base rows and
//! queries drawn from the same mixture by separate ChaCha8 streams, generated in parallel blocks
//! whose streams depend only on the block, so the bytes never depend on the thread count.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::{DataPlan, Parts};

/// Stream numbers under the run's seed (see `common::data::rng`).
const STREAM_CENTERS: u64 = 0x7665_6300;
const STREAM_QUERIES: u64 = 0x7665_6301;
pub(crate) const STREAM_CATEGORIES: u64 = 0x7665_6302;
/// Base rows use streams from here on, one per block.
const STREAM_BASE: u64 = 0x7665_6400;
/// Rows per generation block.
const BLOCK_ROWS: usize = 1024;
/// Spread of a point around its cluster centre, relative to the spread of the centres.
const CLUSTER_SIGMA: f32 = 1.0;

pub fn generate(plan: &DataPlan) -> Parts {
    let dims = plan.dims;
    let clusters = plan.clusters.clamp(1, plan.rows.max(1));
    let mut center_rng = common::data::rng(plan.seed, STREAM_CENTERS);
    let mut centers = vec![0f32; clusters * dims];
    fill_normal(&mut center_rng, &mut centers);
    let base = generate_rows(plan.rows, dims, &centers, |block| {
        common::data::rng(plan.seed, STREAM_BASE + block as u64)
    });
    let queries = generate_rows(plan.queries, dims, &centers, |block| {
        common::data::rng(plan.seed, STREAM_QUERIES + (block as u64) * 0x1_0000_0000)
    });
    Parts {
        description: format!(
            "generated {} × {dims} ({clusters} clusters)",
            common::human::format_thousands(plan.rows as f64)
        ),
        dims,
        base,
        queries,
        file_truth: None,
        source_file: None,
        declared_metric: None,
    }
}

/// `rows` points of the mixture, block by block on every core.
fn generate_rows(
    rows: usize,
    dims: usize,
    centers: &[f32],
    block_rng: impl Fn(usize) -> ChaCha8Rng + Sync,
) -> Vec<f32> {
    let mut out = vec![0f32; rows * dims];
    let clusters = centers.len() / dims;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let blocks: Vec<(usize, &mut [f32])> = out.chunks_mut(BLOCK_ROWS * dims).enumerate().collect();
    let per_thread = blocks.len().div_ceil(threads).max(1);
    let mut blocks = blocks;
    std::thread::scope(|scope| {
        while !blocks.is_empty() {
            let take = per_thread.min(blocks.len());
            let mine: Vec<(usize, &mut [f32])> = blocks.drain(..take).collect();
            let block_rng = &block_rng;
            scope.spawn(move || {
                for (block, chunk) in mine {
                    let mut rng = block_rng(block);
                    for row in chunk.chunks_exact_mut(dims) {
                        let cluster = rng.random_range(0..clusters);
                        fill_normal(&mut rng, row);
                        let center = &centers[cluster * dims..(cluster + 1) * dims];
                        for (x, c) in row.iter_mut().zip(center) {
                            *x = c + CLUSTER_SIGMA * *x;
                        }
                    }
                }
            });
        }
    });
    out
}

/// Standard normal values (Box–Muller, two per pair of uniforms).
fn fill_normal(rng: &mut ChaCha8Rng, out: &mut [f32]) {
    let mut pairs = out.chunks_exact_mut(2);
    for pair in &mut pairs {
        let (a, b) = normal_pair(rng);
        pair[0] = a;
        pair[1] = b;
    }
    if let [last] = pairs.into_remainder() {
        *last = normal_pair(rng).0;
    }
}

fn normal_pair(rng: &mut ChaCha8Rng) -> (f32, f32) {
    // 1 − u keeps the logarithm finite (u is in [0, 1)).
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    let radius = (-2.0 * u1.ln()).sqrt();
    let angle = std::f64::consts::TAU * u2;
    ((radius * angle.cos()) as f32, (radius * angle.sin()) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Metric;

    fn plan(rows: usize, dims: usize, seed: u64) -> DataPlan {
        DataPlan {
            data: "generated".into(),
            query_file: None,
            truth_file: None,
            rows,
            dims,
            clusters: 8,
            queries: 10,
            metric: Metric::Cosine,
            seed,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
        let a = generate(&plan(3_000, 16, 42));
        let b = generate(&plan(3_000, 16, 42));
        let c = generate(&plan(3_000, 16, 43));
        assert_eq!(a.base, b.base);
        assert_eq!(a.queries, b.queries);
        assert_ne!(a.base, c.base);
        assert_eq!(a.base.len(), 3_000 * 16);
        assert_eq!(a.queries.len(), 10 * 16);
        assert!(a.description.contains("3,000 × 16"), "{}", a.description);
    }

    #[test]
    fn values_look_normal_around_the_centres() {
        let mut rng = common::data::rng(1, 1);
        let mut values = vec![0f32; 100_000];
        fill_normal(&mut rng, &mut values);
        let mean = values.iter().map(|v| f64::from(*v)).sum::<f64>() / values.len() as f64;
        let var = values
            .iter()
            .map(|v| (f64::from(*v) - mean).powi(2))
            .sum::<f64>()
            / values.len() as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0).abs() < 0.03, "{var}");
    }
}
