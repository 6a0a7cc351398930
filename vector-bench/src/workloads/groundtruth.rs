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
    /// recall of the file's lists against the exact truth at the largest k (1.0 = they agree).
    pub file_agreement: Option<f64>,
    /// The first place where the file's lists disagree with the vectors beyond ties, at any
    /// rank the sweep scores (`None` when they agree, or were not checked); a file that
    /// disagrees is replaced by the exact truth.
    #[serde(default)]
    pub file_disagreement: Option<String>,
    /// How many of the file's lists that agreement was measured on (a sample, unless the whole
    /// truth was computed).
    pub file_checked_queries: Option<usize>,
    /// A warning about the cache (it could not be written, or was damaged and replaced).
    pub cache_note: Option<String>,
    #[serde(skip)]
    pub truth: Arc<Truth>,
}

impl TruthInfo {
    /// This family's truth is the file's own lists.
    fn use_file(mut self, file: &Truth) -> TruthInfo {
        self.source = "file".into();
        self.path = None;
        self.truth = Arc::new(file.clone());
        self
    }

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
                    " · the file's lists: every query's rows in order of their distance, and {n} queries against the exact search at every k (recall {a:.4} at the largest)"
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

/// Queries of a file's neighbour lists checked against the exact search (every query's list is
/// checked for order and repeated rows).
pub const FILE_CHECK_QUERIES: usize = 50;

/// How the ground truth is settled.
#[derive(Debug, Clone, Copy)]
pub struct TruthPlan<'a> {
    pub k: usize,
    /// Every k the sweep scores (a file's lists are checked at each).
    pub ks: &'a [usize],
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
        ks,
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
        file_disagreement: None,
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
            if !check_file {
                info.cache_note = Some(
                    "the file's neighbour lists are trusted unchecked (--trust-truth-file)".into(),
                );
                return info.use_file(file_truth);
            }
            let (agreement, disagreement, queries) = check_sample(data, file_truth, ks);
            info.file_agreement = Some(agreement);
            info.file_checked_queries = Some(queries);
            match disagreement {
                None => return info.use_file(file_truth),
                Some(why) => {
                    info.cache_note = Some(format!(
                        "the file's neighbour lists disagree with the vectors ({why}): the exact ground truth is used instead"
                    ));
                    info.file_disagreement = Some(why);
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
        let all: Vec<usize> = (0..data.query_count()).collect();
        let (agreement, disagreement) = compare(data, file_truth, &computed, &all, ks);
        info.file_agreement = Some(agreement);
        if let Some(why) = &disagreement {
            info.cache_note = Some(format!(
                "the file's neighbour lists disagree with the exact search ({why})"
            ));
        }
        info.file_disagreement = disagreement;
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

/// Checks a file's neighbour lists at every rank the sweep scores, with every distance
/// recomputed from the vectors (none is taken from the file): on every query, the rows are
/// distinct and in order of distance (beyond ties), so each k's first rows are the file's
/// nearest; on an evenly spread sample, at each k of `ks`, each of the first k rows is no farther
/// than the exact search's k-th. Returns the tie-aware recall at the largest k on the sample,
/// the first disagreement, and the sample's size.
fn check_sample(data: &Dataset, file: &Truth, ks: &[usize]) -> (f64, Option<String>, usize) {
    let queries = data.query_count();
    let n = queries.min(FILE_CHECK_QUERIES);
    let sample: Vec<usize> = (0..n).map(|i| i * queries / n.max(1)).collect();
    let exact = truth::exact_sample(data, file.k, &sample);
    let (agreement, mut disagreement) = compare(data, file, &exact, &sample, ks);
    if disagreement.is_none() {
        disagreement = (0..queries).find_map(|q| out_of_order(data, file, q));
    }
    (agreement, disagreement, n)
}

/// Where query `q`'s list in the file repeats a row or puts a row after a farther one.
fn out_of_order(data: &Dataset, file: &Truth, q: usize) -> Option<String> {
    let list = &file.ids[q][..file.ids[q].len().min(file.k)];
    let mut previous: Option<(u32, f64)> = None;
    for (rank, id) in list.iter().enumerate() {
        if list[..rank].contains(id) {
            return Some(format!("query {q}: row {id} is listed twice"));
        }
        let d = truth::distance(data.metric, data.query(q), data.row(*id as usize));
        if let Some((before, d_before)) = previous
            && d_before > d + recall::tie_slack(d)
        {
            return Some(format!(
                "query {q}: rank {rank} (row {before}, distance {d_before:.6}) is farther than rank {} (row {id}, distance {d:.6})",
                rank + 1
            ));
        }
        previous = Some((*id, d));
    }
    None
}

/// The file's lists of `queries` against the exact truth of the same queries (`exact.ids[i]`
/// is query `queries[i]`'s, nearest first): at each k of `ks`, every one of the file's first k
/// rows must be no farther than the exact k-th (ties count). The tie-aware recall at the
/// largest k, and the first row beyond ties.
fn compare(
    data: &Dataset,
    file: &Truth,
    exact: &Truth,
    queries: &[usize],
    ks: &[usize],
) -> (f64, Option<String>) {
    let largest = ks.iter().copied().max().unwrap_or(file.k).min(file.k);
    let (mut hits, mut expected) = (0usize, 0usize);
    let mut first = None;
    for (i, q) in queries.iter().enumerate() {
        let truth = &exact.ids[i];
        let distance =
            |id: u32| truth::distance(data.metric, data.query(*q), data.row(id as usize));
        for &k in ks.iter().filter(|k| **k <= file.k) {
            let depth = k.min(truth.len());
            let Some(&kth_id) = truth.get(depth.wrapping_sub(1)) else {
                continue;
            };
            let kth = distance(kth_id);
            for (rank, id) in file.ids[*q].iter().take(depth).enumerate() {
                let d = distance(*id);
                let near = truth[..depth].contains(id) || d <= kth + recall::tie_slack(kth);
                if k == largest {
                    expected += 1;
                    hits += usize::from(near);
                }
                if !near && first.is_none() {
                    first = Some(format!(
                        "query {q} at k {k}: rank {} (row {id}) is at distance {d:.6}, farther than the exact k-th neighbour (row {kth_id}, distance {kth:.6})",
                        rank + 1
                    ));
                }
            }
        }
    }
    (hits as f64 / expected.max(1) as f64, first)
}

fn write_cache(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{DataPlan, Metric, generate};

    /// 800 × 8 L2 rows and `queries` queries whose file lists are the exact top 20, changed by
    /// `corrupt`; with the exact lists.
    fn with_file(queries: usize, corrupt: impl Fn(&Dataset, &mut [Vec<u32>])) -> (Dataset, Truth) {
        let plan = DataPlan {
            data: "generated".into(),
            query_file: None,
            truth_file: None,
            rows: 800,
            dims: 8,
            clusters: 4,
            queries,
            metric: Metric::L2,
            seed: 5,
        };
        let mut data = Dataset::assemble(generate::generate(&plan), Metric::L2, 5).unwrap();
        let exact = truth::exact(&data, 20, None, &AtomicU64::new(0));
        let mut lists = exact.ids.clone();
        corrupt(&data, &mut lists);
        data.file_truth = Some(lists);
        (data, exact)
    }

    fn settle(data: &Dataset, ks: &[usize]) -> TruthInfo {
        let cache = tempfile::tempdir().unwrap();
        let plan = TruthPlan {
            k: *ks.last().unwrap(),
            ks,
            cache_dir: cache.path(),
            force: false,
            check_file: true,
            quiet: true,
        };
        truths(data, &[FilterMode::None], plan).remove(0)
    }

    fn farthest(data: &Dataset, q: usize) -> u32 {
        (0..data.rows() as u32)
            .max_by(|a, b| {
                let d =
                    |id: &u32| truth::distance(data.metric, data.query(q), data.row(*id as usize));
                d(a).total_cmp(&d(b))
            })
            .unwrap()
    }

    #[test]
    fn a_file_that_agrees_at_every_rank_is_used() {
        let (data, exact) = with_file(30, |_, _| {});
        let info = settle(&data, &[1, 10, 20]);
        assert_eq!(info.source, "file", "{:?}", info.cache_note);
        assert_eq!(info.file_disagreement, None);
        assert_eq!(info.file_agreement, Some(1.0));
        assert_eq!(info.truth.ids, exact.ids);
    }

    #[test]
    fn a_wrong_first_neighbour_is_found_at_k_1_and_the_exact_truth_used() {
        // Rank 1 is the farthest row; ranks 2..20 are the true 1st..19th: 19 of 20 agree at
        // k 20, none at k 1.
        let (data, exact) = with_file(30, |data, lists| {
            let far = farthest(data, 0);
            lists[0].insert(0, far);
            lists[0].truncate(20);
        });
        let far = farthest(&data, 0);
        let info = settle(&data, &[1, 10, 20]);
        assert_eq!(info.source, "computed");
        let why = info.file_disagreement.as_deref().unwrap();
        assert!(
            why.starts_with(&format!(
                "query 0 at k 1: rank 1 (row {far}) is at distance"
            )),
            "{why}"
        );
        assert!(
            info.cache_note
                .as_deref()
                .unwrap()
                .ends_with("the exact ground truth is used instead")
        );
        assert_eq!(info.truth.ids, exact.ids);
    }

    #[test]
    fn every_query_is_checked_for_order_and_repeats_not_only_the_sample() {
        // 60 queries: the sample of 50 (query i × 60 / 50) skips queries 5 and 11.
        let (data, exact) = with_file(60, |_, lists| lists[5].swap(0, 1));
        let info = settle(&data, &[1, 10]);
        assert_eq!(info.source, "computed");
        let (first, second) = (exact.ids[5][0], exact.ids[5][1]);
        let why = info.file_disagreement.unwrap();
        assert!(
            why.starts_with(&format!("query 5: rank 1 (row {second}, distance"))
                && why.contains(&format!("is farther than rank 2 (row {first}, distance")),
            "{why}"
        );
        let (data, _) = with_file(60, |_, lists| lists[11][3] = lists[11][2]);
        let info = settle(&data, &[10]);
        assert_eq!(info.source, "computed");
        let twice = exact.ids[11][2];
        assert_eq!(
            info.file_disagreement.unwrap(),
            format!("query 11: row {twice} is listed twice")
        );
    }
}
