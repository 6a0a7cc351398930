//! The run's plan, checked before any data is loaded or any system touched: every bad option is
//! one clear line.

use std::path::PathBuf;

use anyhow::bail;
use common::options::TargetSpec;
use common::procstat::{ServerPid, rss_of};

use crate::dataset::{DataPlan, Dataset};
use crate::index::{IndexSpec, Variant};
use crate::opts::Opts;
use crate::targets::{DEFAULT_TARGET, is_embedded};
use crate::workloads::{Family, FilterMode};

/// The most rows × dimensions a run will hold in memory (4 bytes each): 8 GiB.
const MAX_VALUES: u64 = 2 << 30;
/// The widest search breadth a point may ask for.
const MAX_EF: u64 = 1 << 16;

#[derive(Debug, Clone)]
pub struct Plan {
    pub data: DataPlan,
    pub targets: Vec<TargetSpec>,
    /// Every k asked for, ascending; the ground truth is computed at the largest.
    pub ks: Vec<usize>,
    /// The largest k: the depth of the ground truth.
    pub k: usize,
    pub efs: Vec<u64>,
    pub variants: Vec<Variant>,
    pub filters: Vec<FilterMode>,
    pub m: usize,
    pub ef_construction: usize,
    pub batch: usize,
    /// How long one system's build may take (`--build-ceiling`).
    pub build_ceiling: std::time::Duration,
    pub namespace: String,
    pub server_pids: Vec<ServerPid>,
    pub cache_dir: PathBuf,
    /// Check a truth file (or an HDF5 file's neighbours) at every k before using it.
    pub check_truth_file: bool,
}

impl Plan {
    /// Every curve: each variant with each query family at each k.
    pub fn families(&self) -> Vec<Family> {
        let mut out = Vec::new();
        for variant in &self.variants {
            for k in &self.ks {
                for filter in &self.filters {
                    out.push(Family {
                        variant: *variant,
                        filter: *filter,
                        k: *k,
                    });
                }
            }
        }
        out
    }

    /// The ef points measured at `k`: those at least k (a search that keeps fewer candidates
    /// than k cannot return k neighbours).
    pub fn efs_at(&self, k: usize) -> Vec<u64> {
        self.efs
            .iter()
            .copied()
            .filter(|ef| *ef >= k as u64)
            .collect()
    }

    /// The index of `variant` over `data`, as every target builds it.
    pub fn spec(&self, data: &Dataset, variant: Variant) -> IndexSpec {
        IndexSpec {
            namespace: self.namespace.clone(),
            variant,
            dims: data.dims,
            metric: data.metric,
            m: self.m,
            ef_construction: self.ef_construction,
            rows: data.rows(),
        }
    }
}

/// Checks the options and turns them into a plan.
pub fn plan(opts: &Opts) -> anyhow::Result<Plan> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    let (rows, dims) = (opts.rows(), opts.dims());
    let mut ks: Vec<u64> = opts.k.clone();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks[0] == 0 {
        bail!("--k must name at least one k of 1 or more");
    }
    let k = opts.max_k();
    if opts.data == "generated" {
        if k > rows {
            bail!("--k {k} is larger than the dataset ({rows} rows)");
        }
        if rows.saturating_mul(dims) > MAX_VALUES {
            bail!(
                "--rows {rows} × --dims {dims} is more than {MAX_VALUES} values (8 GiB); use fewer rows or dimensions"
            );
        }
    }
    let mut efs = opts.efs();
    efs.sort_unstable();
    efs.dedup();
    let smallest_k = ks[0];
    if let Some(ef) = efs.iter().find(|ef| **ef < smallest_k) {
        bail!(
            "--ef {ef} is below --k {smallest_k}: a search that keeps {ef} candidates cannot return {smallest_k} neighbours; use ef ≥ k"
        );
    }
    if let Some(big) = ks.iter().find(|k| !efs.iter().any(|ef| ef >= *k)) {
        bail!("--k {big} is above every --ef point: add an ef of at least {big}");
    }
    if let Some(ef) = efs.iter().find(|ef| **ef > MAX_EF) {
        bail!("--ef {ef} is larger than {MAX_EF}");
    }
    if opts.m < 2 || opts.m > 256 {
        bail!("--m {} is outside 2..=256", opts.m);
    }
    if opts.ef_construction < opts.m {
        bail!(
            "--ef-construction {} is below --m {}; HNSW needs at least m candidates to link",
            opts.ef_construction,
            opts.m
        );
    }
    check_namespace(&opts.namespace)?;
    if opts.query_file.is_some() && opts.data == "generated" {
        bail!("--query-file needs a TEXMEX base file in --data");
    }
    let mut targets = opts.common.targets.clone();
    if targets.is_empty() {
        targets.push(TargetSpec::parse(DEFAULT_TARGET).map_err(anyhow::Error::msg)?);
    }
    check_server_pids(&opts.server_pids, targets.len())?;
    let workers = opts.common.worker_count;
    if let Some(embedded) = targets.iter().find(|t| workers > 1 && is_embedded(t)) {
        bail!(
            "{}: an embedded index lives inside each worker's process, so {workers} workers would search {workers} separate indexes; run several workers against a server",
            embedded.name.as_deref().unwrap_or(embedded.scheme())
        );
    }
    Ok(Plan {
        data: DataPlan {
            data: opts.data.clone(),
            query_file: opts.query_file.clone(),
            truth_file: opts.truth_file.clone(),
            rows: rows as usize,
            dims: dims as usize,
            clusters: opts.clusters as usize,
            queries: opts.queries() as usize,
            metric: opts.metric,
            seed: opts.common.seed,
        },
        targets,
        ks: ks.iter().map(|k| *k as usize).collect(),
        k: k as usize,
        efs,
        variants: dedup(&opts.variant_list()),
        filters: dedup(&opts.filters),
        m: opts.m as usize,
        ef_construction: opts.ef_construction as usize,
        batch: opts.batch as usize,
        build_ceiling: opts.build_ceiling,
        namespace: opts.namespace.clone(),
        server_pids: opts.server_pids.clone(),
        cache_dir: opts.cache_dir.clone().unwrap_or_else(default_cache_dir),
        check_truth_file: !opts.trust_truth_file,
    })
}

/// What only the loaded data can tell.
pub fn check_data(plan: &Plan, data: &Dataset) -> anyhow::Result<()> {
    if plan.k > data.rows() {
        bail!(
            "--k {} is larger than the dataset ({}: {} rows)",
            plan.k,
            data.description,
            data.rows()
        );
    }
    if data.query_count() == 0 {
        bail!("{} has no queries", data.description);
    }
    Ok(())
}

/// Every `--server-pid` names a process running here, and says whose it is when there are
/// several targets.
fn check_server_pids(pids: &[ServerPid], targets: usize) -> anyhow::Result<()> {
    for server in pids {
        let text = match &server.name {
            Some(name) => format!("{name}={}", server.pid),
            None if targets > 1 => bail!(
                "--server-pid {} does not say which of the {targets} targets it belongs to; write it as NAME=PID",
                server.pid
            ),
            None => server.pid.to_string(),
        };
        if rss_of(server.pid).is_none() {
            bail!(
                "--server-pid `{text}`: no process {} is running here",
                server.pid
            );
        }
    }
    Ok(())
}

/// A name every engine accepts as (part of) a collection or table name.
fn check_namespace(namespace: &str) -> anyhow::Result<()> {
    let valid = (3..=40).contains(&namespace.len())
        && namespace.starts_with(|c: char| c.is_ascii_lowercase())
        && namespace
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        bail!(
            "--namespace `{namespace}` must be 3 to 40 characters: lowercase letters, digits and _, starting with a letter"
        );
    }
    Ok(())
}

fn dedup<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(item) {
            out.push(*item);
        }
    }
    out
}

fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("fairbench").join("vector-bench")
}
