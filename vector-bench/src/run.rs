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
use common::results::{DataInfo, Status};
use common::run::{Begin, Lifecycle, Recording, Summary, Tool};
use common::scale::{BarrierError, Worker};
use serde_json::json;

use crate::dataset::{self, Dataset};
use crate::opts::Opts;
use crate::plan::Plan;
use crate::report::{TruthReport, VectorReport};
use crate::systems::{self, System};
use crate::targets::{Bounds, Reach, exact};
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
    let (lifecycle, worker) = Lifecycle::start_joined(TOOL, &opts.common, opts, interrupt).await?;
    // Each fork builds its indexes: the build is measured (its time, and the graph it makes
    // sets the recall every later figure is matched on), so a fork that skipped it would
    // leave those figures one process's.
    let mut worker = worker.in_fork(0, 1);
    let reach = Reach::of(&lifecycle, &opts.common);
    let prepared = match prepare(opts, &plan, &reach, lifecycle.progress()).await {
        Ok(prepared) => prepared,
        Err(e) => {
            let reason = format!("worker {} could not prepare: {e}", worker.segment.index);
            return Err(lifecycle.abandon_worker(&mut worker, &reason, e).await);
        }
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
        notes: crate::report::notes(opts, &kinds(&systems), data.metric),
    })?;
    run.report
        .extra
        .insert("ground_truth".into(), json!(truths.infos));
    run.report.extra.insert("builds".into(), json!([]));
    run.report.worker = worker.info();
    run.save()?;
    let common = &opts.common;
    let segment = worker.segment;
    let window = run.window_plan(common, segment, common.rate);
    let sweep = Sweep {
        common,
        data: &data,
        truths: &truths,
        efs: &plan.efs,
        ks: &plan.ks,
        window: &window,
        segment,
    };
    let measured = async {
        measure(opts, &plan, &sweep, &mut systems, &mut run, &mut worker).await?;
        // Worker 0 drops the last index only once every worker is done with it.
        worker.sync(0).await?;
        anyhow::Ok(())
    };
    if let Err(e) = measured.await {
        return match e.downcast::<BarrierError>() {
            Ok(error) => stopped(run, &worker, error),
            Err(e) => Err(e),
        };
    }
    run.report.worker = worker.info();
    if worker.prepares()
        && !run.interrupted()
        && let Some(spec) = plan.variants.last().map(|v| plan.spec(&data, *v))
    {
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

/// The exact baseline, then per variant: build (worker 0) and open every system, measure the
/// sweep, and drop the index before the next variant (the last one is dropped once every
/// worker is done).
async fn measure(
    opts: &Opts,
    plan: &Plan,
    sweep: &Sweep<'_>,
    systems: &mut [System],
    run: &mut Recording,
    worker: &mut Worker,
) -> anyhow::Result<()> {
    let connections = sweep.connections() as usize;
    let categories: Vec<Option<u8>> = sweep
        .truths
        .filters()
        .iter()
        .map(|f| f.category())
        .collect();
    let modes: Vec<&crate::targets::Mode> = systems
        .iter()
        .flat_map(|s| s.lanes.iter().map(|l| &l.mode))
        .collect();
    run.plan_progress(sweep.common, sweep.planned_cells(&plan.variants, &modes));
    let scan = exact::open(sweep.data, &categories, connections).await?;
    baseline::measure(sweep, exact::NAME, scan, run, worker).await?;
    let last = plan.variants.len().saturating_sub(1);
    for (i, variant) in plan.variants.iter().enumerate() {
        if run.interrupted() {
            break;
        }
        let spec = plan.spec(sweep.data, *variant);
        systems::build_all(systems, plan, &spec, sweep.data, connections, run, worker).await?;
        sweep
            .measure(
                *variant,
                &mut systems::lanes(systems, plan, worker.segment.count),
                run,
                worker,
            )
            .await?;
        // An interrupted run stops at once; the index it was measuring stays.
        if run.interrupted() {
            break;
        }
        for lane in systems.iter_mut().flat_map(|s| s.lanes.iter_mut()) {
            lane.searchers = None;
        }
        if i < last {
            // Every worker is done with this index before worker 0 drops it.
            worker.sync(0).await?;
            if worker.prepares() {
                systems::drop_all(systems, &spec, opts.keep_data, &mut run.report.notes).await;
            }
        }
    }
    Ok(())
}

/// The run stopped at the barrier: every cell not measured in full says why, and the error
/// (the barrier's exit code) goes back with results.json written; or, when a worker was
/// interrupted, the run ends as an interrupted one.
fn stopped(run: Recording, worker: &Worker, error: BarrierError) -> anyhow::Result<Summary> {
    let unfinished = run
        .report
        .cells
        .iter()
        .filter(|c| c.throughput.as_ref().map_or(0, |t| t.rounds.len()) < c.rounds_planned as usize)
        .map(|c| {
            let mut cell = c.clone();
            if !matches!(cell.status, Status::Refused) {
                cell.status = Status::Error;
                cell.reason = Some(format!("stopped: {error}"));
            }
            cell
        })
        .collect();
    run.stopped_at_barrier(unfinished, worker.info(), error, &VectorReport)
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
    let (mut systems, reference) = systems::connect_all(
        &plan.targets,
        reference,
        reach,
        Bounds {
            ceiling: opts.common.ceiling,
            build: plan.build_ceiling,
        },
        &[exact::NAME],
    )
    .await?;
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
    let ks = plan.ks.clone();
    let (quiet, check_file) = (opts.common.quiet, plan.check_truth_file);
    tokio::task::spawn_blocking(move || {
        let plan = TruthPlan {
            k,
            ks: &ks,
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

/// Computing ground truth (`--truth-only`) measures no system: it runs in one process.
impl common::fork::Forking for Opts {
    fn forking(&self) -> Option<(common::run::Tool, &common::options::CommonOpts)> {
        (!self.truth_only).then_some((TOOL, &self.common))
    }
}
