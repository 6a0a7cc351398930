//! The sweep. Its phases: plan → connect and describe every system → load the data → check
//! every namespace → ground truth → per variant: build and verify on every system, then every
//! (filter, ef) point measured in interleaved rounds → record → render.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use common::environment::{Environment, loadavg, wait_for_quiet};
use common::human::{format_latency_ns, format_rate};
use common::progress::Progress;
use common::protocol::{round_order, rounds};
use common::results::{Cell, DataInfo, Report, Status, SystemInfo};
use common::window::WindowPlan;
use common::writer::ResultsDir;
use serde_json::json;

use super::groundtruth::{self, TruthInfo};
use super::plan::{self, Plan};
use super::point::{PointBuilder, round_label};
use super::{Family, Variant};
use crate::Opts;
use crate::Summary;
use crate::dataset::{self, Dataset};
use crate::targets::{self, IndexSpec, Searchers, VectorTarget, Work};

/// Longest the load gate waits for a quiet machine.
const LOAD_GATE_MAX_WAIT: Duration = Duration::from_secs(600);

/// One system as the run sees it.
struct System {
    target: Box<dyn VectorTarget>,
    info: SystemInfo,
    /// Open while the current variant's index is measured.
    searchers: Option<Box<dyn Searchers>>,
}

impl System {
    fn name(&self) -> &str {
        &self.info.name
    }
}

/// What the run needs once everything is checked.
struct Prepared {
    systems: Vec<System>,
    data: Arc<Dataset>,
    truths: Vec<TruthInfo>,
}

/// Runs the sweep. Bad input fails before any system's data is touched.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let plan = plan::plan(opts)?;
    let progress = Progress::start(opts.common.quiet);
    let environment = measure_environment(opts, &progress);
    let started = common::clock::now_rfc3339();
    let dir = opts.common.output.clone().unwrap_or_else(|| {
        ResultsDir::default_path("vector-bench", "hnsw", &common::clock::compact(&started))
    });
    let results = ResultsDir::create(&dir)?;
    if opts.truth_only {
        return match truth_only(opts, &plan, environment, &results, progress).await {
            Ok(summary) => Ok(summary),
            Err(e) => {
                results.discard();
                Err(e)
            }
        };
    }
    match prepare(opts, &plan, &progress).await {
        Ok(prepared) => {
            let report = begin_report(opts, &plan, &prepared, environment)?;
            measure(opts, &plan, prepared, report, results, progress, interrupt).await
        }
        Err(e) => {
            drop(progress);
            results.discard();
            Err(e)
        }
    }
}

fn measure_environment(opts: &Opts, progress: &Progress) -> Environment {
    let mut environment = Environment::capture();
    if let Some(gate) = opts.common.load_gate {
        environment.load_gate = Some(wait_for_quiet(gate, LOAD_GATE_MAX_WAIT, |load| {
            progress.line(format!(
                "waiting for the load average ({load:.2}) to fall to {gate:.2}…"
            ));
        }));
    }
    environment
}

async fn load_data(plan: &Plan) -> anyhow::Result<Arc<Dataset>> {
    let data_plan = plan.data.clone();
    let data = tokio::task::spawn_blocking(move || dataset::load(&data_plan))
        .await
        .context("loading the data")??;
    plan::check_data(plan, &data)?;
    Ok(Arc::new(data))
}

/// Connects and describes every system, loads the data, checks every namespace, and settles
/// the ground truth.
async fn prepare(opts: &Opts, plan: &Plan, progress: &Progress) -> anyhow::Result<Prepared> {
    let systems = connect_all(opts, plan).await?;
    let data = load_data(plan).await?;
    let mut systems = systems;
    for system in &mut systems {
        for variant in &plan.variants {
            if system.target.offer(*variant).is_ok() {
                system.target.check(&spec(plan, &data, *variant)).await?;
            }
        }
    }
    progress.line(format!(
        "data: {} · checksum {}",
        data.description, data.checksum
    ));
    let truths = {
        let data = data.clone();
        let (k, filters, cache) = (plan.k, plan.filters.clone(), plan.cache_dir.clone());
        let quiet = opts.common.quiet;
        tokio::task::spawn_blocking(move || {
            groundtruth::truths(&data, k, &filters, &cache, false, quiet)
        })
        .await
        .context("computing the ground truth")?
    };
    for info in &truths {
        progress.line(truth_line(info));
    }
    Ok(Prepared {
        systems,
        data,
        truths,
    })
}

fn truth_line(info: &TruthInfo) -> String {
    let how = match info.source.as_str() {
        "computed" => format!(
            "computed in {:.2}s ({} distances/s)",
            info.seconds,
            format_rate(info.distances_per_s.unwrap_or(0.0))
        ),
        "file" => "from the data file".to_owned(),
        _ => "from the cache".to_owned(),
    };
    let agreement = info.file_agreement.map_or(String::new(), |a| {
        format!(" · the file's lists agree at recall {a:.4}")
    });
    format!(
        "ground truth ({}): {} queries × {} rows, {how}{agreement}",
        info.filter.label(),
        info.queries,
        common::human::format_thousands(info.rows as f64)
    )
}

fn spec(plan: &Plan, data: &Dataset, variant: Variant) -> IndexSpec {
    IndexSpec {
        namespace: plan.namespace.clone(),
        variant,
        dims: data.dims,
        metric: data.metric,
        m: plan.m,
        ef_construction: plan.ef_construction,
        rows: data.rows(),
    }
}

/// Opens every target and reads what it reports about itself, then settles names.
async fn connect_all(opts: &Opts, plan: &Plan) -> anyhow::Result<Vec<System>> {
    let mut systems = Vec::new();
    for spec in &plan.targets {
        let mut target = targets::open(spec).await?;
        let description = target.describe().await?;
        let identity = target.identity().clone();
        systems.push(System {
            target,
            info: SystemInfo {
                name: identity.name.clone(),
                kind: identity.kind.clone(),
                url_redacted: identity.url_redacted.clone(),
                version: description.version,
                verified: description.settings,
                ..SystemInfo::default()
            },
            searchers: None,
        });
    }
    let mut names: Vec<String> = Vec::new();
    for (system, spec) in systems.iter_mut().zip(&plan.targets) {
        let name = spec
            .name
            .clone()
            .unwrap_or_else(|| system.info.kind.clone());
        if names.contains(&name) {
            bail!(
                "two targets are named `{name}`; tell them apart with NAME=URL (for example --target {name}2={})",
                system.info.url_redacted
            );
        }
        names.push(name.clone());
        system.target.identity_mut().name.clone_from(&name);
        system.info.name = name;
    }
    if let Some(reference) = opts.common.reference.as_deref()
        && !names.iter().any(|n| n == reference)
    {
        bail!(
            "--reference {reference} names no target (targets: {})",
            names.join(", ")
        );
    }
    Ok(systems)
}

fn begin_report(
    opts: &Opts,
    plan: &Plan,
    prepared: &Prepared,
    environment: Environment,
) -> anyhow::Result<Report> {
    let data = &prepared.data;
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let section = format!(
        "{} · {} · HNSW m = {}, ef_construction = {} · k = {}",
        data.description,
        data.metric.as_str(),
        plan.m,
        plan.ef_construction,
        plan.k
    );
    let mut report = Report::begin(
        "vector-bench",
        env!("CARGO_PKG_VERSION"),
        "hnsw",
        &section,
        options,
        environment,
    );
    report.data = Some(DataInfo {
        seed: data.seed,
        checksum: data.checksum.clone(),
        description: format!(
            "{} ({} queries; category 0 holds {} rows, category 1 holds {})",
            data.description,
            data.query_count(),
            data.category_size(dataset::CATEGORY_10PCT),
            data.category_size(dataset::CATEGORY_1PCT)
        ),
    });
    report.systems = prepared.systems.iter().map(|s| s.info.clone()).collect();
    report.reference = Some(
        opts.common
            .reference
            .clone()
            .unwrap_or_else(|| prepared.systems[0].name().to_owned()),
    );
    report
        .extra
        .insert("ground_truth".into(), json!(prepared.truths));
    report.extra.insert("builds".into(), json!([]));
    report.notes = crate::report::notes(
        opts,
        &prepared
            .systems
            .iter()
            .map(|s| s.info.kind.clone())
            .collect::<Vec<_>>(),
    );
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    opts: &Opts,
    plan: &Plan,
    prepared: Prepared,
    mut report: Report,
    results: ResultsDir,
    progress: Progress,
    interrupt: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    let Prepared {
        mut systems,
        data,
        truths,
    } = prepared;
    results.write_results(&report)?;
    let window = WindowPlan {
        duration: opts.common.duration,
        ceiling: opts.common.ceiling,
        rate_per_s: opts.common.rate,
        interrupt: interrupt.clone(),
        progress: progress.sender(),
    };
    'variants: for variant in &plan.variants {
        let spec = spec(plan, &data, *variant);
        for system in &mut systems {
            build_one(plan, opts, system, &spec, &data, &mut report, &progress).await;
            results.write_results(&report)?;
        }
        for truth in &truths {
            let family = Family {
                variant: *variant,
                filter: truth.filter,
            };
            for ef in &plan.efs {
                if interrupt.load(Ordering::SeqCst) {
                    break 'variants;
                }
                let work = Arc::new(Work {
                    data: data.clone(),
                    k: plan.k,
                    ef: *ef as usize,
                    category: family.filter.category(),
                });
                measure_point(
                    opts,
                    &mut systems,
                    family,
                    &work,
                    truth,
                    &window,
                    &mut report,
                    &results,
                    &progress,
                    &interrupt,
                )
                .await?;
            }
        }
        for system in &mut systems {
            system.searchers = None;
            if !opts.keep_data
                && system.target.offer(*variant).is_ok()
                && let Err(e) = system.target.drop_index(&spec).await
            {
                report.notes.push(format!("cleaning up failed: {e}"));
            }
        }
    }
    if interrupt.load(Ordering::SeqCst) {
        report
            .notes
            .push("The run was interrupted (Ctrl-C); cells not measured in full say so.".into());
    }
    finish(systems, report, results, progress, opts.common.quiet)
}

/// Builds `spec` on one system, verifies it, records the build, and opens its search sessions.
/// A system that does not offer the variant, or fails to build it, gets refused/error cells.
async fn build_one(
    plan: &Plan,
    opts: &Opts,
    system: &mut System,
    spec: &IndexSpec,
    data: &Arc<Dataset>,
    report: &mut Report,
    progress: &Progress,
) {
    let name = system.name().to_owned();
    let offer = system.target.offer(spec.variant);
    let mut entry = json!({
        "system": name,
        "variant": spec.variant,
        "offered": offer.as_ref().ok(),
    });
    let problem: Option<(Status, String)> = match offer {
        Err(why) => Some((Status::Refused, format!("not offered: {why}"))),
        Ok(_) => {
            progress.line(format!(
                "{name}: building the {} index ({} rows)…",
                spec.variant.as_str(),
                common::human::format_thousands(spec.rows as f64)
            ));
            let rss_before = crate::memory::own().map(|r| r.current_bytes);
            let done = AtomicU64::new(0);
            match system.target.build(spec, data, plan.batch, &done).await {
                Err(e) => Some((Status::Error, format!("building the index failed: {e}"))),
                Ok(build) => {
                    let rows_per_s = spec.rows as f64 / build.insert_s.max(1e-9);
                    progress.line(format!(
                        "{name}: {} index built in {:.1}s (insert {:.1}s, {} rows/s)",
                        spec.variant.as_str(),
                        build.build_s,
                        build.insert_s,
                        format_rate(rows_per_s)
                    ));
                    entry["build"] = json!(build);
                    entry["insert_rows_per_s"] = json!(rows_per_s);
                    if system.info.kind == "usearch" {
                        let after = crate::memory::own().map(|r| r.current_bytes);
                        entry["process_rss_growth_bytes"] =
                            json!(after.zip(rss_before).map(|(a, b)| a.saturating_sub(b)));
                    }
                    if let Some((_, pid)) = plan.server_pids.iter().find(|(n, _)| *n == name) {
                        entry["server_rss_bytes"] = json!(crate::memory::of_tree(*pid));
                    }
                    verify_and_open(plan, opts, system, spec, &mut entry).await
                }
            }
        }
    };
    if let Some((status, reason)) = &problem {
        entry["problem"] = json!(reason);
        progress.line(format!("{name}: {} — {reason}", spec.variant.as_str()));
        for filter in &plan.filters {
            for ef in &plan.efs {
                let family = Family {
                    variant: spec.variant,
                    filter: *filter,
                };
                report.upsert_cell(Cell::unmeasured(
                    &family.workload(*ef),
                    &name,
                    "queries/s",
                    *status,
                    reason,
                ));
            }
        }
    }
    if let Some(builds) = report
        .extra
        .get_mut("builds")
        .and_then(|b| b.as_array_mut())
    {
        builds.push(entry);
    }
    // The settings read back from this variant's index join the system's evidence.
    if let Some(info) = report.systems.iter_mut().find(|s| s.name == name) {
        info.verified.clone_from(&system.info.verified);
    }
}

/// Reads the index back and checks it was built as asked; opens the search sessions.
async fn verify_and_open(
    plan: &Plan,
    opts: &Opts,
    system: &mut System,
    spec: &IndexSpec,
    entry: &mut serde_json::Value,
) -> Option<(Status, String)> {
    let verified = match system.target.verify(spec).await {
        Ok(v) => v,
        Err(e) => return Some((Status::Error, format!("reading the index back failed: {e}"))),
    };
    entry["verified"] = json!(verified);
    for (key, wanted) in [
        ("m", plan.m.to_string()),
        ("ef_construction", plan.ef_construction.to_string()),
        ("rows", spec.rows.to_string()),
    ] {
        if let Some(found) = verified.get(key)
            && *found != wanted
        {
            return Some((
                Status::Invalid,
                format!("the index reports {key} = {found}, asked for {wanted}"),
            ));
        }
    }
    for (key, value) in &verified {
        system
            .info
            .verified
            .insert(format!("{}.{key}", spec.variant.as_str()), value.clone());
    }
    match system
        .target
        .searchers(spec, opts.common.connections as usize)
        .await
    {
        Ok(searchers) => {
            system.searchers = Some(searchers);
            None
        }
        Err(e) => Some((
            Status::Error,
            format!("opening search sessions failed: {e}"),
        )),
    }
}

/// Measures one point on every system that has its index open, rounds interleaved in
/// alternating order.
#[allow(clippy::too_many_arguments)]
async fn measure_point(
    opts: &Opts,
    systems: &mut [System],
    family: Family,
    work: &Arc<Work>,
    truth: &TruthInfo,
    window: &WindowPlan,
    report: &mut Report,
    results: &ResultsDir,
    progress: &Progress,
    interrupt: &AtomicBool,
) -> anyhow::Result<()> {
    let common = &opts.common;
    let ef = work.ef as u64;
    let mut builders: Vec<Option<PointBuilder>> = Vec::with_capacity(systems.len());
    for system in systems.iter_mut() {
        let Some(searchers) = system.searchers.as_mut() else {
            builders.push(None);
            continue;
        };
        let mut builder = PointBuilder::new(
            family,
            ef,
            &system.info.name,
            work.k,
            common.connections,
            common.rounds,
            common.ceiling,
        );
        match searchers.prepare(work).await {
            Ok(reported) => builder.ef_reported(reported),
            Err(e) => builder.mark(Status::Error, format!("setting ef {ef} failed: {e}")),
        }
        report.upsert_cell(builder.to_cell());
        builders.push(Some(builder));
    }
    for round in rounds(common.warmup, common.rounds) {
        for si in round_order(systems.len(), round.index) {
            if interrupt.load(Ordering::SeqCst) {
                return Ok(());
            }
            let (Some(builder), Some(searchers)) =
                (builders[si].as_mut(), systems[si].searchers.as_mut())
            else {
                continue;
            };
            if !builder.is_live() {
                continue;
            }
            let label = format!(
                "{} · {} · {}",
                family.workload(ef),
                systems[si].info.name,
                round.label(common.warmup, common.rounds)
            );
            match searchers.pass(work).await {
                Ok(pass) => builder.add_pass(round, &pass, &work.data, &truth.truth),
                Err(e) => builder.mark(Status::Error, format!("{}: {e}", round_label(round))),
            }
            progress.window(label.clone(), common.duration);
            match searchers
                .window(common.connections as usize, work, window)
                .await
            {
                Ok(outcome) => {
                    builder.add_window(round, &outcome);
                    progress.line(window_line(&label, &outcome, builder));
                }
                Err(e) => {
                    builder.mark(Status::Error, format!("{}: {e}", round_label(round)));
                    progress.line(format!("{label}: {e}"));
                }
            }
            report.upsert_cell(builder.to_cell());
            results.write_results(report)?;
        }
    }
    Ok(())
}

fn window_line(
    label: &str,
    outcome: &common::window::WindowOutcome,
    builder: &PointBuilder,
) -> String {
    let cell = builder.to_cell();
    let recall = cell
        .extra
        .get("recall")
        .and_then(serde_json::Value::as_f64)
        .map_or(String::new(), |r| format!(" · recall {r:.4}"));
    let p50 = cell.latency_ns.map_or(String::new(), |l| {
        format!(" · p50 {}", format_latency_ns(l.p50))
    });
    format!(
        "{label}: {} q/s{recall}{p50}",
        format_rate(outcome.throughput())
    )
}

/// Writes the final report and charts, prints the summary.
fn finish(
    systems: Vec<System>,
    mut report: Report,
    results: ResultsDir,
    progress: Progress,
    quiet: bool,
) -> anyhow::Result<Summary> {
    drop(systems);
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    if let Some(rss) = crate::memory::own() {
        // The client's own peak: data, ground truth and, for usearch, every index it held.
        report
            .extra
            .insert("client_peak_rss_bytes".into(), json!(rss.peak_bytes));
    }
    crate::report::settle(&mut report);
    write_all(&results, &report)?;
    drop(progress);
    println!("{}", crate::report::render_terminal(&report));
    if !quiet {
        eprintln!("results: {}", results.path().display());
    }
    let all_ok = report.cells.iter().all(|c| c.status == Status::Ok);
    Ok(Summary {
        report,
        results_dir: results.path().to_owned(),
        exit_code: if all_ok { 0 } else { 1 },
    })
}

/// `results.json`, `report.md` and one recall-vs-QPS chart per curve family.
fn write_all(results: &ResultsDir, report: &Report) -> anyhow::Result<()> {
    results.write_results(report)?;
    results.write_atomic(
        "report.md",
        crate::report::render_markdown(report).as_bytes(),
    )?;
    for (name, svg) in crate::report::chart::render_charts(report) {
        results.write_atomic(&name, svg.as_bytes())?;
    }
    Ok(())
}

/// `--truth-only`: loads the data, computes every family's ground truth and reports its time.
async fn truth_only(
    opts: &Opts,
    plan: &Plan,
    environment: Environment,
    results: &ResultsDir,
    progress: Progress,
) -> anyhow::Result<Summary> {
    let data = load_data(plan).await?;
    let truths = {
        let data = data.clone();
        let (k, filters, cache) = (plan.k, plan.filters.clone(), plan.cache_dir.clone());
        let quiet = opts.common.quiet;
        tokio::task::spawn_blocking(move || {
            groundtruth::truths(&data, k, &filters, &cache, true, quiet)
        })
        .await
        .context("computing the ground truth")?
    };
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let mut report = Report::begin(
        "vector-bench",
        env!("CARGO_PKG_VERSION"),
        "ground-truth",
        &data.description,
        options,
        environment,
    );
    report.data = Some(DataInfo {
        seed: data.seed,
        checksum: data.checksum.clone(),
        description: data.description.clone(),
    });
    report.extra.insert("ground_truth".into(), json!(truths));
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    results.write_results(&report)?;
    drop(progress);
    for info in &truths {
        println!("{}", truth_line(info));
        if let Some(note) = &info.cache_note {
            println!("  note: {note}");
        }
    }
    Ok(Summary {
        report,
        results_dir: results.path().to_owned(),
        exit_code: 0,
    })
}
