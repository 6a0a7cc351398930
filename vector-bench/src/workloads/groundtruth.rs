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
    /// When the file shipped ground truth and it was also computed: the tie-aware recall of the
    /// file's lists against the exact truth (1.0 = they agree).
    pub file_agreement: Option<f64>,
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
        let agreement = self.file_agreement.map_or(String::new(), |a| {
            format!(" · the file's lists agree at recall {a:.4}")
        });
        format!(
            "ground truth ({}): {} queries × {} rows, {how}{agreement}",
            self.filter.label(),
            self.queries,
            format_thousands(self.rows as f64)
        )
    }
}

/// The truth of every family, in `filters` order. `force` computes even when a cache or the
/// file has it (for timing, and to check the file's lists).
pub fn truths(
    data: &Dataset,
    k: usize,
    filters: &[FilterMode],
    cache_dir: &std::path::Path,
    force: bool,
    quiet: bool,
) -> Vec<TruthInfo> {
    filters
        .iter()
        .map(|filter| one(data, k, *filter, cache_dir, force, quiet))
        .collect()
}

fn one(
    data: &Dataset,
    k: usize,
    filter: FilterMode,
    cache_dir: &std::path::Path,
    force: bool,
    quiet: bool,
) -> TruthInfo {
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
        if let Some(file_truth) = from_file {
            info.source = "file".into();
            info.path = None;
            info.truth = Arc::new(file_truth);
            return info;
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
    if let Some(file_truth) = from_file {
        info.file_agreement = Some(agreement(data, &computed, &file_truth));
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

fn write_cache(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}
