//! The ground truth of each query family: read from the cache when it matches the data's
//! checksum, taken from the file's own neighbour lists when it ships them, else computed exactly
//! (with a progress bar) and cached.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::human::{format_rate, format_thousands};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use super::FilterMode;
use crate::dataset::Dataset;
use crate::recall;
use crate::truth::{self, Truth};

/// Where one family's truth came from and what it cost (stored in the report, and read back
/// from it without the truth itself).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TruthInfo {
    pub filter: FilterMode,
    /// `computed`, `cache` or `file`.
    pub source: String,
    pub path: Option<String>,
    /// Rows the family's queries search.
    pub rows: usize,
    pub queries: usize,
    /// Seconds to compute it (0 when read).
    pub seconds: f64,
    /// Query × row distance evaluations per second, when computed.
    pub distances_per_s: Option<f64>,
    /// When the file shipped ground truth and it was checked or also computed: the tie-aware
    /// recall of the file's lists against the exact truth (1.0 = they agree).
    pub file_agreement: Option<f64>,
    /// How many of the file's lists that agreement was measured on (a sample, unless the whole
    /// truth was computed).
    pub file_checked_queries: Option<usize>,
    /// A warning about the cache (it could not be written, or was damaged and replaced).
    pub cache_note: Option<String>,
    #[serde(skip)]
    pub truth: Arc<Truth>,
}

impl TruthInfo {
    /// `ground truth (filter 1%): 250 queries × 1,000 rows, computed in 0.12s (… distances/s)`,
    /// for the progress line and the `--truth-only` summary.
    pub fn line(&self) -> String {
        let how = match self.source.as_str() {
            "computed" => format!(
                "computed in {:.2}s ({} distances/s)",
                self.seconds,
                format_rate(self.distances_per_s.unwrap_or(0.0))
            ),
            "file" => "from the data file".to_owned(),
            _ => "from the cache".to_owned(),
        };
        let agreement = match (self.file_agreement, self.file_checked_queries) {
            (Some(a), Some(n)) => {
                format!(
                    " · the file's lists agree with the exact search at recall {a:.4} on {n} queries"
                )
            }
            (Some(a), None) => format!(" · the file's lists agree at recall {a:.4}"),
            _ => String::new(),
        };
        format!(
            "ground truth ({}): {} queries × {} rows, {how}{agreement}",
            self.filter.label(),
            self.queries,
            format_thousands(self.rows as f64)
        )
    }
}

/// Every family's truth at every k of the run: computed once at the largest, truncated for
/// the others.
#[derive(Debug, Clone)]
pub struct Truths {
    pub infos: Vec<TruthInfo>,
    at: Vec<(FilterMode, usize, Arc<Truth>)>,
}

impl Truths {
    pub fn new(data: &Dataset, infos: Vec<TruthInfo>, ks: &[usize]) -> Truths {
        let mut at = Vec::new();
        for info in &infos {
            for k in ks {
                at.push((info.filter, *k, Arc::new(info.truth.truncated(data, *k))));
            }
        }
        Truths { infos, at }
    }

    /// The query families, in measuring order.
    pub fn filters(&self) -> Vec<FilterMode> {
        self.infos.iter().map(|i| i.filter).collect()
    }

    /// The truth of `filter` at `k` (one of the run's ks).
    pub fn at(&self, filter: FilterMode, k: usize) -> Arc<Truth> {
        self.at
            .iter()
            .find(|(f, kk, _)| *f == filter && *kk == k)
            .map(|(_, _, t)| t.clone())
            .expect("a truth for every family and k of the run")
    }
}

/// Queries of a file's neighbour lists checked against the exact search.
pub const FILE_CHECK_QUERIES: usize = 50;
/// Below this agreement on the sample, a file's lists are replaced by the exact truth.
pub const FILE_AGREEMENT_FLOOR: f64 = 0.99;

/// How the ground truth is settled.
#[derive(Debug, Clone, Copy)]
pub struct TruthPlan<'a> {
    pub k: usize,
    pub cache_dir: &'a std::path::Path,
    /// Compute even when a cache or the file has it (for timing, and to check the file).
    pub force: bool,
    /// Check a file's neighbour lists on a sample of queries before using them.
    pub check_file: bool,
    pub quiet: bool,
}

/// The truth of every family, in `filters` order.
pub fn truths(data: &Dataset, filters: &[FilterMode], plan: TruthPlan<'_>) -> Vec<TruthInfo> {
    filters
        .iter()
        .map(|filter| one(data, *filter, plan))
        .collect()
}

fn one(data: &Dataset, filter: FilterMode, plan: TruthPlan<'_>) -> TruthInfo {
    let TruthPlan {
        k,
        cache_dir,
        force,
        check_file,
        quiet,
    } = plan;
    let category = filter.category();
    let rows = category.map_or(data.rows(), |c| data.category_size(c));
    let path = truth::cache_path(data, k, category, cache_dir);
    let mut info = TruthInfo {
        filter,
        source: "cache".into(),
        path: Some(path.display().to_string()),
        rows,
        queries: data.query_count(),
        seconds: 0.0,
        distances_per_s: None,
        file_agreement: None,
        file_checked_queries: None,
        cache_note: None,
        truth: Arc::new(Truth {
            k,
            ids: Vec::new(),
            kth: Vec::new(),
        }),
    };
    let from_file = category
        .is_none()
        .then(|| truth::from_file(data, k))
        .flatten();
    if !force {
        if let Some(file_truth) = &from_file {
            let checked = check_file.then(|| sample_agreement(data, file_truth));
            if let Some((agreement, queries)) = checked {
                info.file_agreement = Some(agreement);
                info.file_checked_queries = Some(queries);
            }
            match checked {
                Some((agreement, queries)) if agreement < FILE_AGREEMENT_FLOOR => {
                    info.cache_note = Some(format!(
                        "the file's neighbour lists agree with the exact search at recall {agreement:.4} on {queries} queries (below {FILE_AGREEMENT_FLOOR}): the exact ground truth is used instead"
                    ));
                }
                _ => {
                    if checked.is_none() {
                        info.cache_note = Some(
                            "the file's neighbour lists are trusted unchecked (--trust-truth-file)"
                                .into(),
                        );
                    }
                    info.source = "file".into();
                    info.path = None;
                    info.truth = Arc::new(file_truth.clone());
                    return info;
                }
            }
        }
        match std::fs::read(&path) {
            Ok(bytes) => match truth::decode(&bytes, &data.checksum, k, data.query_count()) {
                Some(cached) => {
                    info.truth = Arc::new(cached);
                    return info;
                }
                None => {
                    info.cache_note = Some(format!(
                        "{} did not match this data or was damaged; recomputed",
                        path.display()
                    ));
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => info.cache_note = Some(format!("cannot read {}: {e}", path.display())),
        }
    }
    let began = Instant::now();
    let computed = compute_with_bar(data, k, category, rows, quiet, filter);
    info.seconds = began.elapsed().as_secs_f64();
    info.distances_per_s = Some(rows as f64 * data.query_count() as f64 / info.seconds.max(1e-9));
    info.source = "computed".into();
    if let Some(file_truth) = &from_file
        && info.file_checked_queries.is_none()
    {
        info.file_agreement = Some(agreement(data, &computed, file_truth));
    }
    if let Err(e) = write_cache(&path, &truth::encode(&computed, &data.checksum)) {
        info.cache_note = Some(format!("cannot cache it at {}: {e}", path.display()));
        info.path = None;
    }
    info.truth = Arc::new(computed);
    info
}

fn compute_with_bar(
    data: &Dataset,
    k: usize,
    category: Option<u8>,
    rows: usize,
    quiet: bool,
    filter: FilterMode,
) -> Truth {
    let done = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    std::thread::scope(|scope| {
        if !quiet {
            scope.spawn(|| {
                let bar = ProgressBar::new(rows as u64);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {pos}/{len} rows · {elapsed_precise}",
                    )
                    .expect("a valid template")
                    .progress_chars("=> "),
                );
                bar.set_message(format!("exact ground truth ({})", filter.label()));
                while !finished.load(Ordering::Relaxed) {
                    bar.set_position(done.load(Ordering::Relaxed));
                    std::thread::sleep(Duration::from_millis(100));
                }
                bar.finish_and_clear();
            });
        }
        let truth = truth::exact(data, k, category, &done);
        finished.store(true, Ordering::Relaxed);
        truth
    })
}

/// The tie-aware recall of the file's neighbour lists against the exact truth.
fn agreement(data: &Dataset, exact: &Truth, file: &Truth) -> f64 {
    let mut total = recall::Score::default();
    for (q, ids) in file.ids.iter().enumerate() {
        let answer: Vec<u64> = ids.iter().map(|id| u64::from(*id)).collect();
        total.add(&recall::score(data, exact, q, None, &answer));
    }
    total.recall().unwrap_or(0.0)
}

/// The tie-aware recall of the file's lists against the exact search on an evenly spread
/// sample of the queries, and the sample's size.
fn sample_agreement(data: &Dataset, file: &Truth) -> (f64, usize) {
    let queries = data.query_count();
    let n = queries.min(FILE_CHECK_QUERIES);
    let sample: Vec<usize> = (0..n).map(|i| i * queries / n.max(1)).collect();
    let exact = truth::exact_sample(data, file.k, &sample);
    let (mut hits, mut expected) = (0usize, 0usize);
    for (i, q) in sample.iter().enumerate() {
        let slack = 1e-6 * exact.kth[i].abs().max(1.0);
        expected += exact.ids[i].len();
        hits += file.ids[*q]
            .iter()
            .take(file.k)
            .filter(|id| {
                exact.ids[i].contains(id)
                    || truth::distance(data.metric, data.query(*q), data.row(**id as usize))
                        <= exact.kth[i] + slack
            })
            .count();
    }
    (hits as f64 / expected.max(1) as f64, n)
}

fn write_cache(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}
