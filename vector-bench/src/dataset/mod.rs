//! The vectors every target gets: generated or loaded from a file, normalized for cosine, with a
//! payload category per row whose distribution is known (one category holds 10% of the rows, one
//! 1%), and a checksum that proves every system got the same bytes.

pub mod generate;
pub mod hdf5;
pub mod texmex;

use std::path::{Path, PathBuf};

use common::data::Checksum;
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// How distance is measured, the same on every target.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// 1 − cos(a, b); vectors are normalized once, so every engine ranks by the same numbers.
    Cosine,
    /// Squared Euclidean distance.
    L2,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::L2 => "l2",
        }
    }
}

/// The category holding 10% of the rows.
pub const CATEGORY_10PCT: u8 = 0;
/// The category holding 1% of the rows.
pub const CATEGORY_1PCT: u8 = 1;
/// Categories 2..2+OTHER_CATEGORIES share the remaining 89%.
const OTHER_CATEGORIES: u8 = 8;

/// Why a dataset could not be had; every message names the file and, for a malformed file,
/// the byte offset where it stops making sense.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: malformed at byte {offset}: {message}")]
    Malformed {
        path: PathBuf,
        offset: u64,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{0}")]
    Plan(String),
}

/// Vectors, queries and payload, identical for every target.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// `generated 100,000 × 768 (64 clusters)` or the file's name.
    pub description: String,
    pub dims: usize,
    pub metric: Metric,
    /// Row-major, `rows × dims`; normalized when the metric is cosine.
    pub base: Vec<f32>,
    /// Row-major, `queries × dims`; normalized when the metric is cosine.
    pub queries: Vec<f32>,
    /// One category per base row.
    pub categories: Vec<u8>,
    /// Ground truth shipped with the data (ann-benchmarks `neighbors`, TEXMEX `.ivecs`):
    /// per query, the ids of its nearest rows, best first.
    pub file_truth: Option<Vec<Vec<u32>>>,
    /// Where the data came from, for caching ground truth beside it (`None`: generated).
    pub source_file: Option<PathBuf>,
    pub seed: u64,
    /// FNV-1a 64 over the vectors, queries and categories, hex.
    pub checksum: String,
}

impl Dataset {
    pub fn rows(&self) -> usize {
        self.categories.len()
    }

    pub fn query_count(&self) -> usize {
        self.queries.len() / self.dims
    }

    pub fn row(&self, id: usize) -> &[f32] {
        &self.base[id * self.dims..(id + 1) * self.dims]
    }

    pub fn query(&self, index: usize) -> &[f32] {
        &self.queries[index * self.dims..(index + 1) * self.dims]
    }

    /// Rows of category `category`.
    pub fn category_size(&self, category: u8) -> usize {
        self.categories.iter().filter(|c| **c == category).count()
    }

    /// Builds a dataset from loaded or generated parts: normalizes for cosine, draws the
    /// categories from `seed`, and computes the checksum.
    pub fn assemble(mut parts: Parts, metric: Metric, seed: u64) -> Result<Dataset, DataError> {
        let dims = parts.dims;
        if metric == Metric::Cosine {
            normalize_rows(&mut parts.base, dims, &parts.description)?;
            normalize_rows(&mut parts.queries, dims, &parts.description)?;
        }
        let rows = parts.base.len() / dims;
        let categories = categories(rows, seed);
        let checksum = checksum(&parts.base, &parts.queries, &categories);
        Ok(Dataset {
            description: parts.description,
            dims,
            metric,
            base: parts.base,
            queries: parts.queries,
            categories,
            file_truth: parts.file_truth,
            source_file: parts.source_file,
            seed,
            checksum,
        })
    }
}

/// What a loader or the generator produces, before normalization and payload.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    pub description: String,
    pub dims: usize,
    pub base: Vec<f32>,
    pub queries: Vec<f32>,
    pub file_truth: Option<Vec<Vec<u32>>>,
    pub source_file: Option<PathBuf>,
    /// The metric the file declares (ann-benchmarks names it), if any.
    pub declared_metric: Option<Metric>,
}

fn normalize_rows(data: &mut [f32], dims: usize, description: &str) -> Result<(), DataError> {
    for (index, row) in data.chunks_exact_mut(dims).enumerate() {
        let norm = row
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return Err(DataError::Plan(format!(
                "{description}: vector {index} has norm {norm}; cosine distance is undefined for it"
            )));
        }
        let scale = (1.0 / norm) as f32;
        row.iter_mut().for_each(|x| *x *= scale);
    }
    Ok(())
}

/// Exactly 10% of the rows in category 0, 1% in category 1, the rest spread over eight others,
/// shuffled by a seeded generator so a category is independent of where a vector lies.
pub fn categories(rows: usize, seed: u64) -> Vec<u8> {
    let ten = (rows as f64 * 0.10).round() as usize;
    let one = (rows as f64 * 0.01).round() as usize;
    let mut out: Vec<u8> = (0..rows)
        .map(|i| {
            if i < ten {
                CATEGORY_10PCT
            } else if i < ten + one {
                CATEGORY_1PCT
            } else {
                2 + (i % usize::from(OTHER_CATEGORIES)) as u8
            }
        })
        .collect();
    let mut rng = common::data::rng(seed, generate::STREAM_CATEGORIES);
    for i in (1..out.len()).rev() {
        let j = rng.random_range(0..=i);
        out.swap(i, j);
    }
    out
}

/// FNV-1a over the little-endian bytes of everything a target receives.
pub fn checksum(base: &[f32], queries: &[f32], categories: &[u8]) -> String {
    let mut sum = Checksum::default();
    // Per block, so the hash stays cheap on hundreds of megabytes: the bytes of each block are
    // folded into one checksum in order.
    let mut buffer = Vec::with_capacity(4096 * 4);
    for part in [base, queries] {
        for block in part.chunks(4096) {
            buffer.clear();
            block
                .iter()
                .for_each(|x| buffer.extend_from_slice(&x.to_le_bytes()));
            sum.update(&buffer);
        }
    }
    sum.update(categories);
    sum.hex()
}

/// The kind of file at `path`, from its extension.
pub fn file_kind(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "hdf5" | "h5" => Some("hdf5"),
        "fvecs" => Some("fvecs"),
        "bvecs" => Some("bvecs"),
        "ivecs" => Some("ivecs"),
        _ => None,
    }
}

/// What the options ask for, checked before anything is loaded.
#[derive(Debug, Clone)]
pub struct DataPlan {
    pub data: String,
    pub query_file: Option<PathBuf>,
    pub truth_file: Option<PathBuf>,
    pub rows: usize,
    pub dims: usize,
    pub clusters: usize,
    pub queries: usize,
    pub metric: Metric,
    pub seed: u64,
}

/// Loads or generates the dataset the plan names.
pub fn load(plan: &DataPlan) -> Result<Dataset, DataError> {
    let parts = if plan.data == "generated" {
        generate::generate(plan)
    } else {
        let path = PathBuf::from(&plan.data);
        match file_kind(&path) {
            Some("hdf5") => hdf5::load(&path, plan)?,
            Some("fvecs" | "bvecs") => texmex::load_base(&path, plan)?,
            _ => {
                return Err(DataError::Invalid {
                    path,
                    message: "not a dataset vector-bench reads: use `generated`, an ann-benchmarks .hdf5 file, or a TEXMEX .fvecs/.bvecs base file with --query-file".into(),
                });
            }
        }
    };
    let metric = parts.declared_metric.unwrap_or(plan.metric);
    Dataset::assemble(parts, metric, plan.seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_hold_exactly_ten_and_one_percent() {
        let cats = categories(10_000, 7);
        assert_eq!(cats.iter().filter(|c| **c == CATEGORY_10PCT).count(), 1_000);
        assert_eq!(cats.iter().filter(|c| **c == CATEGORY_1PCT).count(), 100);
        assert_eq!(cats, categories(10_000, 7));
        assert_ne!(cats, categories(10_000, 8));
        // Shuffled: the 10% category is not a prefix.
        assert!(cats[..1_000].iter().any(|c| *c != CATEGORY_10PCT));
    }

    #[test]
    fn cosine_data_is_normalized_and_a_zero_vector_is_refused() {
        let parts = Parts {
            description: "t".into(),
            dims: 2,
            base: vec![3.0, 4.0, 0.0, 2.0],
            queries: vec![1.0, 1.0],
            ..Parts::default()
        };
        let data = Dataset::assemble(parts.clone(), Metric::Cosine, 1).unwrap();
        assert!((data.row(0)[0] - 0.6).abs() < 1e-6);
        assert_eq!(data.rows(), 2);
        assert_eq!(data.checksum.len(), 16);
        let mut zero = parts;
        zero.base[2..].fill(0.0);
        let error = Dataset::assemble(zero, Metric::Cosine, 1)
            .unwrap_err()
            .to_string();
        assert!(error.contains("vector 1 has norm 0"), "{error}");
    }
}
