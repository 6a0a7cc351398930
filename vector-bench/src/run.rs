//! One vector-bench run, as its phases: plan (every input checked before anything is touched)
//! → connect and describe every system → load the data, check every namespace, settle the
//! ground truth → the exact scan of every query family (the baseline) → per variant: build and
//! verify the index on every system, then the sweep of its (ef, k, filter) points in
//! interleaved rounds → record → render, on common's run lifecycle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use common::procstat::own_rss;
use common::progress::Progress;
use common::results::DataInfo;
use common::run::{Begin, Lifecycle, Summary, Tool};
use common::window::WindowPlan;
use serde_json::json;

use crate::dataset::{self, Dataset};
use crate::opts::Opts;
use crate::plan::Plan;
use crate::report::{TruthReport, VectorReport};
use crate::systems::{self, System};
use crate::targets::{Reach, exact};
use crate::workloads::baseline;
use crate::workloads::groundtruth::{self, TruthInfo, TruthPlan, Truths};
use crate::workloads::sweep::Sweep;

const TOOL: Tool = Tool {
    name: "vector-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "hnsw",
};

/// `--truth-only` is a suite of its own: it measures no system.
const TRUTH_TOOL: Tool = Tool {
    suite: "ground-truth",
    ..TOOL
};

/// What the run needs once everything is checked.
struct Prepared {
    systems: Vec<System>,
    reference: String,
    data: Arc<Dataset>,
    truths: Truths,
}

/// Runs the sweep. Bad input fails before any system's data is touched.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let opts = &opts.resolved();
    let plan = crate::plan::plan(opts)?;
    if opts.truth_only {
        return truth_only(opts, &plan, interrupt).await;
    }
    let lifecycle = Lifecycle::start(TOOL, &opts.common, opts, interrupt)?;
    let reach = Reach::of(&lifecycle, &opts.common);
    let prepared = match prepare(opts, &plan, &reach, lifecycle.progress()).await {
        Ok(prepared) => prepared,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    let Prepared {
        mut systems,
        reference,
        data,
        truths,
    } = prepared;
    let mut infos = systems::infos(&systems);
    infos.push(exact_info(&data, &truths));
    let mut run = lifecycle.begin(Begin {
        section: section(&plan, &data),
        systems: infos,
        reference: Some(reference),
        data: Some(data_info(&data)),
        notes: crate::report::notes(opts, &kinds(&systems)),
    })?;
    run.report
        .extra
        .insert("ground_truth".into(), json!(truths.infos));
    run.report.extra.insert("builds".into(), json!([]));
    run.save()?;
    let common = &opts.common;
    let (interrupt, progress) = (run.interrupt().clone(), run.progress().sender());
    let window = WindowPlan {
        duration: common.duration,
        ceiling: common.ceiling,
        rate_per_s: common.rate,
        interrupt,
        progress,
    };
    let sweep = Sweep {
        common,
        data: &data,
        truths: &truths,
        efs: &plan.efs,
        ks: &plan.ks,
        window: &window,
    };
    let connections = common.connections as usize;
    let categories: Vec<Option<u8>> = truths.filters().iter().map(|f| f.category()).collect();
    let scan = exact::open(&data, &categories, connections).await?;
    baseline::measure(&sweep, exact::NAME, scan, &mut run).await?;
    for variant in &plan.variants {
        if run.interrupted() {
            break;
        }
        let spec = plan.spec(&data, *variant);
        systems::build_all(&mut systems, &plan, &spec, &data, connections, &mut run).await?;
        sweep
            .measure(*variant, &mut systems::lanes(&mut systems), &mut run)
            .await?;
        // An interrupted run stops at once; the index it was measuring stays.
        if run.interrupted() {
            break;
        }
        systems::drop_all(&mut systems, &spec, opts.keep_data, &mut run.report.notes).await;
    }
    drop(systems);
    if let Some(rss) = own_rss() {
        // The client's own peak: data, ground truth and, for usearch, every index it held.
        run.report
            .extra
            .insert("client_peak_rss_bytes".into(), json!(rss.peak_bytes));
    }
    let curves = crate::report::curves_json(&run.report);
    run.report.extra.insert("curves".into(), curves);
    let pareto = json!(crate::report::pareto::views(&run.report));
    run.report.extra.insert("pareto".into(), pareto);
    run.finish(&VectorReport)
}

/// Connects and describes every system, loads the data, checks every namespace, and settles
/// the ground truth.
async fn prepare(
    opts: &Opts,
    plan: &Plan,
    reach: &Reach,
    progress: &Progress,
) -> anyhow::Result<Prepared> {
    let reference = opts.common.reference.as_deref();
    let (mut systems, reference) =
        systems::connect_all(&plan.targets, reference, reach, &[exact::NAME]).await?;
    let data = load_data(plan).await?;
    systems::check_namespaces(&mut systems, plan, &data).await?;
    progress.line(format!(
        "data: {} · checksum {}",
        data.description, data.checksum
    ));
    let infos = ground_truth(opts, plan, &data, false).await?;
    for info in &infos {
        progress.line(info.line());
        if let Some(note) = &info.cache_note {
            progress.line(format!("  note: {note}"));
        }
    }
    let truths = Truths::new(&data, infos, &plan.ks);
    Ok(Prepared {
        systems,
        reference,
        data,
        truths,
    })
}

async fn load_data(plan: &Plan) -> anyhow::Result<Arc<Dataset>> {
    let data_plan = plan.data.clone();
    let data = tokio::task::spawn_blocking(move || dataset::load(&data_plan))
        .await
        .context("loading the data")??;
    crate::plan::check_data(plan, &data)?;
    Ok(Arc::new(data))
}

/// Every family's ground truth, off the runtime's workers; `force` computes it even when a
/// cache or the data file has it.
async fn ground_truth(
    opts: &Opts,
    plan: &Plan,
    data: &Arc<Dataset>,
    force: bool,
) -> anyhow::Result<Vec<TruthInfo>> {
    let data = data.clone();
    let (k, filters, cache) = (plan.k, plan.filters.clone(), plan.cache_dir.clone());
    let (quiet, check_file) = (opts.common.quiet, plan.check_truth_file);
    tokio::task::spawn_blocking(move || {
        let plan = TruthPlan {
            k,
            cache_dir: &cache,
            force,
            check_file,
            quiet,
        };
        groundtruth::truths(&data, &filters, plan)
    })
    .await
    .context("computing the ground truth")
}

/// What was held equal for every system.
fn section(plan: &Plan, data: &Dataset) -> String {
    let ks: Vec<String> = plan.ks.iter().map(|k| k.to_string()).collect();
    format!(
        "{} · {} · HNSW m = {}, ef_construction = {} · k = {}",
        data.description,
        data.metric.as_str(),
        plan.m,
        plan.ef_construction,
        ks.join(", ")
    )
}

/// The exact scan's report entry, with the rows each family scans.
fn exact_info(data: &Dataset, truths: &Truths) -> common::results::SystemInfo {
    let mut info = exact::info();
    for t in &truths.infos {
        info.verified
            .insert(format!("rows.{}", t.filter.label()), t.rows.to_string());
    }
    info.verified
        .insert("dimensions".into(), data.dims.to_string());
    info
}

fn data_info(data: &Dataset) -> DataInfo {
    DataInfo {
        seed: data.seed,
        checksum: data.checksum.clone(),
        description: format!(
            "{} ({} queries; category 0 holds {} rows, category 1 holds {})",
            data.description,
            data.query_count(),
            data.category_size(dataset::CATEGORY_10PCT),
            data.category_size(dataset::CATEGORY_1PCT)
        ),
    }
}

fn kinds(systems: &[System]) -> Vec<String> {
    systems.iter().map(|s| s.info.kind.clone()).collect()
}

/// `--truth-only`: loads the data, computes every family's ground truth and reports its time.
async fn truth_only(
    opts: &Opts,
    plan: &Plan,
    interrupt: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    let lifecycle = Lifecycle::start(TRUTH_TOOL, &opts.common, opts, interrupt)?;
    let computed = async {
        let data = load_data(plan).await?;
        let truths = ground_truth(opts, plan, &data, true).await?;
        anyhow::Ok((data, truths))
    };
    let (data, truths) = match computed.await {
        Ok(done) => done,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    let mut run = lifecycle.begin(Begin {
        section: data.description.clone(),
        data: Some(DataInfo {
            seed: data.seed,
            checksum: data.checksum.clone(),
            description: data.description.clone(),
        }),
        ..Begin::default()
    })?;
    run.report
        .extra
        .insert("ground_truth".into(), json!(truths));
    run.finish(&TruthReport)
}
