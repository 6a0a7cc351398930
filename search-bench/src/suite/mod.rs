//! The search suite, as its phases: plan → connect and check every index → generate corpus,
//! queries and truth → ingest (measured, interleaved) → verify every answer → measure the
//! queries (interleaved) → record → render.

mod phases;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};
use common::environment::{Environment, durable_write_floor, loadavg};
use common::options::TargetSpec;
use common::progress::Progress;
use common::report::{render_markdown, render_terminal, verdicts};
use common::results::{Report, Status, SystemInfo};
use common::writer::ResultsDir;

use crate::corpus::{Bulk, Corpus};
use crate::queries::{QueryKind, QuerySet};
use crate::targets::{self, Description, Engine, IndexSpec, SearchWorkers};
use crate::{Opts, Summary, render, truth};

const FLOOR_BUDGET: Duration = Duration::from_millis(500);
const MAX_INGEST_THREADS: u64 = 256;
const MAX_CONNECTIONS: u32 = 1024;
const MAX_QUERIES: u64 = 100_000;

/// One row of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Ingest,
    Query(QueryKind),
}

impl Workload {
    fn parse(text: &str) -> Result<Workload, String> {
        let text = text.trim();
        if text == "ingest" {
            return Ok(Workload::Ingest);
        }
        QueryKind::ALL
            .into_iter()
            .find(|k| k.key() == text)
            .map(Workload::Query)
            .ok_or_else(|| {
                format!("unknown workload `{text}`; choose from ingest, match, phrase, bool, agg")
            })
    }

    pub fn label(self, opts: &Opts) -> String {
        match self {
            Workload::Ingest => format!(
                "_bulk ingest, {} threads × {}-doc batches",
                opts.ingest_threads,
                common::human::format_thousands(opts.batch as f64)
            ),
            Workload::Query(kind) => kind.label().to_owned(),
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Workload::Ingest => "docs/s",
            Workload::Query(_) => "q/s",
        }
    }
}

/// The workloads to run, in the order they run (ingest first: it loads the data).
fn plan_workloads(opts: &Opts) -> anyhow::Result<Vec<Workload>> {
    let mut chosen: Vec<Workload> = if opts.workloads.is_empty() {
        std::iter::once(Workload::Ingest)
            .chain(QueryKind::ALL.map(Workload::Query))
            .collect()
    } else {
        opts.workloads
            .iter()
            .map(|w| Workload::parse(w))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?
    };
    let order = |w: &Workload| match w {
        Workload::Ingest => 0,
        Workload::Query(k) => 1 + *k as usize,
    };
    chosen.sort_by_key(order);
    chosen.dedup();
    Ok(chosen)
}

fn check_limits(opts: &Opts) -> anyhow::Result<()> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    if opts.ingest_threads > MAX_INGEST_THREADS {
        bail!(
            "--ingest-threads {} is more than {MAX_INGEST_THREADS}",
            opts.ingest_threads
        );
    }
    if opts.common.connections > MAX_CONNECTIONS {
        bail!(
            "--connections {} is more than {MAX_CONNECTIONS}",
            opts.common.connections
        );
    }
    if opts.queries > MAX_QUERIES {
        bail!(
            "--queries {} is more than {MAX_QUERIES} per workload",
            opts.queries
        );
    }
    if opts.docs > u64::from(u32::MAX) {
        bail!("--docs {} is more than {} documents", opts.docs, u32::MAX);
    }
    Ok(())
}

/// One engine as the run sees it.
pub(crate) struct System {
    pub engine: Box<dyn Engine>,
    pub info: SystemInfo,
    pub description: Description,
    pub searchers: Option<Box<dyn SearchWorkers>>,
    /// Why none of its queries can be trusted (its index does not hold the corpus).
    pub broken: Option<(Status, String)>,
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

/// What every engine is given: the corpus as `_bulk` bodies, the query sets and the truth.
pub(crate) struct Material {
    pub corpus: Corpus,
    pub bulks: Arc<[Bulk]>,
    pub sets: Vec<QuerySet>,
    /// The exact answers, set by set, query by query.
    pub truth: Vec<Vec<crate::answer::Answer>>,
}

impl Material {
    fn generate(opts: &Opts, kinds: &[QueryKind]) -> Material {
        let corpus = Corpus::generate(opts.common.seed, opts.docs);
        let bulks: Arc<[Bulk]> = corpus.bulk_bodies(opts.batch as usize).into();
        let sets: Vec<QuerySet> = kinds
            .iter()
            .map(|k| QuerySet::generate(*k, &corpus, opts.common.seed, opts.queries as usize))
            .collect();
        let refs: Vec<&QuerySet> = sets.iter().collect();
        let truth = truth::expected(&corpus, &refs);
        Material {
            corpus,
            bulks,
            sets,
            truth,
        }
    }
}

/// Runs the suite. Bad input fails before any engine's data is touched, and leaves no folder.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    check_limits(opts)?;
    let workloads = plan_workloads(opts)?;
    let mut specs = opts.common.targets.clone();
    if specs.is_empty() {
        specs.push(TargetSpec::parse(targets::DEFAULT_TARGET).map_err(anyhow::Error::msg)?);
    }
    let progress = Progress::start(opts.common.quiet);
    let environment = common::phases::capture_environment(opts.common.load_gate, &progress);
    let started = common::clock::now_rfc3339();
    let dir = opts.common.output.clone().unwrap_or_else(|| {
        ResultsDir::default_path("search-bench", "search", &common::clock::compact(&started))
    });
    let results = ResultsDir::create(&dir)?;
    let systems = match connect_all(opts, &specs, &results).await {
        Ok(systems) => systems,
        Err(e) => {
            drop(progress);
            results.discard();
            return Err(e);
        }
    };
    let kinds: Vec<QueryKind> = workloads
        .iter()
        .filter_map(|w| match w {
            Workload::Query(k) => Some(*k),
            Workload::Ingest => None,
        })
        .collect();
    progress.line(format!(
        "generating {} documents, {} queries per workload and their exact answers",
        common::human::format_thousands(opts.docs as f64),
        opts.queries
    ));
    let material = Material::generate(opts, &kinds);
    let report = begin_report(opts, &systems, environment, &material, &results)?;
    let run = phases::Run {
        opts,
        workloads,
        systems,
        material,
        report,
        results,
        progress,
        interrupt,
    };
    let run = run.execute().await?;
    finish(run).await
}

/// Opens every engine, reads what it is, names it, and checks that its index is absent or
/// search-bench's own, before anything is written anywhere.
async fn connect_all(
    opts: &Opts,
    specs: &[TargetSpec],
    results: &ResultsDir,
) -> anyhow::Result<Vec<System>> {
    let index = IndexSpec {
        name: opts.index.clone(),
        request_cache: !opts.no_request_cache,
    };
    let mut systems = Vec::new();
    for spec in specs {
        let mut engine = targets::open(spec, &index, results.path()).await?;
        let description = engine.describe().await?;
        let identity = engine.identity().clone();
        systems.push(System {
            info: SystemInfo {
                name: spec
                    .name
                    .clone()
                    .unwrap_or_else(|| description.kind.clone()),
                kind: description.kind.clone(),
                url_redacted: identity.url_redacted,
                version: description.version.clone(),
                ..SystemInfo::default()
            },
            engine,
            description,
            searchers: None,
            broken: None,
        });
    }
    let mut names: Vec<String> = Vec::new();
    for system in &mut systems {
        let name = system.info.name.clone();
        if names.contains(&name) {
            bail!(
                "two targets are named `{name}`; tell them apart with NAME=URL (for example --target {name}2={})",
                system.info.url_redacted
            );
        }
        system.engine.identity_mut().name.clone_from(&name);
        names.push(name);
    }
    if let Some(reference) = &opts.common.reference
        && !names.contains(reference)
    {
        bail!(
            "--reference {reference} names no target (targets: {})",
            names.join(", ")
        );
    }
    for system in &mut systems {
        system.engine.check_index().await?;
    }
    Ok(systems)
}

fn begin_report(
    opts: &Opts,
    systems: &[System],
    mut environment: Environment,
    material: &Material,
    results: &ResultsDir,
) -> anyhow::Result<Report> {
    if let Ok(floor) = durable_write_floor(results.path(), FLOOR_BUDGET) {
        environment.durable_write_floor_ns = Some(floor);
        environment.durable_write_floor_path = Some(results.path().display().to_string());
    }
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let mut report = Report::begin(
        "search-bench",
        env!("CARGO_PKG_VERSION"),
        "search",
        "search workloads, one corpus, identical request bodies",
        options,
        environment,
    );
    report.data = Some(material.corpus.info.clone());
    report.systems = systems.iter().map(|s| s.info.clone()).collect();
    report.reference = Some(
        opts.common
            .reference
            .clone()
            .unwrap_or_else(|| systems[0].name().to_owned()),
    );
    report.notes = notes(opts, systems);
    Ok(report)
}

fn notes(opts: &Opts, systems: &[System]) -> Vec<String> {
    let mut notes = vec![
        "Every engine is one node and the client ran on this machine, beside any local server: the client's CPU time is taken from the engines'.".to_owned(),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".to_owned(),
        "Before timing, every query's total hit count and every aggregation bucket (key, doc count, average price) were checked against exact answers computed from the generated corpus; ranking is reported as top-10 overlap only (scoring may legitimately differ).".to_owned(),
        "Ingest time runs from the first `_bulk` request until every document is searchable (the final refresh or commit included); the bodies are serialized before the clock starts.".to_owned(),
        "Timed searches ask for exact totals (`track_total_hits: true`), as verified, on every engine.".to_owned(),
    ];
    if systems.iter().any(|s| s.description.embedded) {
        notes.push("tantivy runs inside search-bench: no network, no HTTP and no JSON parsing on its search path (its `_bulk` bodies are parsed), so its client CPU is the engine's own.".into());
    }
    if systems.iter().any(|s| !s.description.embedded) {
        if opts.no_request_cache {
            notes.push("--no-request-cache: every search is sent with `request_cache=false`, so no size-0 aggregation is served from Elasticsearch's shard request cache.".into());
        } else {
            notes.push("The shard request cache was left as configured (on by default): Elasticsearch/OpenSearch may serve a repeated size-0 aggregation from it rather than recompute it; --no-request-cache bypasses it.".into());
        }
    }
    if opts.common.rate.is_none() {
        notes.push("Closed loop: each connection sends its next request when the previous one is answered.".into());
    }
    notes
}

/// Writes the final report, prints it, and drops search-bench's indexes.
async fn finish(run: phases::Run<'_>) -> anyhow::Result<Summary> {
    let phases::Run {
        opts,
        mut systems,
        mut report,
        results,
        progress,
        ..
    } = run;
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    report.verdicts = verdicts(&report);
    report.notes.extend(render::cpu_notes(&report));
    if !opts.keep_index {
        for system in &mut systems {
            if let Err(e) = system.engine.drop_index().await {
                report.notes.push(format!("cleaning up failed: {e}"));
            }
        }
    }
    results.write_exports(
        &report,
        &common::export::exporters(&common::export::SharedReport),
    )?;
    let markdown = format!(
        "{}\n{}",
        render_markdown(&report),
        render::markdown(&report)
    );
    results.write_atomic("report.md", markdown.as_bytes())?;
    drop(progress);
    println!("{}{}", render_terminal(&report), render::text(&report));
    if !opts.common.quiet {
        eprintln!("results: {}", results.path().display());
    }
    let all_ok = report.cells.iter().all(|c| c.status == Status::Ok);
    Ok(Summary {
        report,
        results_dir: results.path().to_owned(),
        exit_code: if all_ok { 0 } else { 1 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn workloads_run_in_a_fixed_order_and_unknown_ones_are_refused() {
        let opts = Opts::parse_from(["search-bench", "--workloads", "agg,match,ingest,match"]);
        let planned = plan_workloads(&opts).unwrap();
        assert_eq!(
            planned,
            [
                Workload::Ingest,
                Workload::Query(QueryKind::Match),
                Workload::Query(QueryKind::Aggregation)
            ]
        );
        let all = plan_workloads(&Opts::parse_from(["search-bench"])).unwrap();
        assert_eq!(all.len(), 5);
        let bad = Opts::parse_from(["search-bench", "--workloads", "fuzzy"]);
        let error = plan_workloads(&bad).unwrap_err().to_string();
        assert!(error.contains("unknown workload `fuzzy`"), "{error}");
    }

    #[test]
    fn nonsense_sizes_are_refused_by_the_parser() {
        for args in [
            vec!["search-bench", "--docs", "0"],
            vec!["search-bench", "--batch", "0"],
            vec!["search-bench", "--index", "Upper"],
            vec!["search-bench", "--index", "_hidden"],
        ] {
            assert!(Opts::try_parse_from(&args).is_err(), "{args:?}");
        }
        let many = Opts::parse_from(["search-bench", "--ingest-threads", "1000"]);
        assert!(check_limits(&many).is_err());
    }
}
