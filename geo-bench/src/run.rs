//! One geo-bench run, as its phases: plan (validate every input before touching anything) →
//! connect and describe → prepare and load → verify indexes and every query against the oracle
//! → measure, interleaved (in [`crate::measure`]) → record → render.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::bail;
use common::environment::{Environment, durable_write_floor, wait_for_quiet};
use common::options::TargetSpec;
use common::progress::Progress;
use common::results::{DataInfo, SystemInfo};
use common::writer::ResultsDir;

use crate::events::{CITIES, EventSet, STREAM_EVENTS, STREAM_INSERT_POOL, Spread, city};
use crate::oracle::{Oracle, Tolerance};
use crate::queries::{self, Family as QueryFamily, Query, QueryPlan};
use crate::targets::{self, Target};
use crate::workloads::Workload;
use crate::workloads::workers::GeoWorkers;
use crate::{Family, Opts, Summary};

/// Longest the load gate waits for a quiet machine.
const LOAD_GATE_MAX_WAIT: Duration = Duration::from_secs(600);
/// Time spent measuring each durable-write floor.
pub const FLOOR_BUDGET: Duration = Duration::from_millis(500);
/// Events in the pool insert windows cycle through.
const INSERT_POOL: usize = 16_384;

/// Everything a run measures, decided (and validated) before any system is touched.
pub struct Plan {
    pub spread: Spread,
    pub data: EventSet,
    pub pool: Arc<[crate::events::Event]>,
    /// Verified queries by family, in the order of the query table.
    pub queries: BTreeMap<QueryFamily, Arc<[Query]>>,
    pub workloads: Vec<Workload>,
    pub tolerance: Tolerance,
}

/// One system as the run sees it.
pub struct System {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    pub durable: bool,
    pub method: Vec<String>,
    pub workers: Option<Box<dyn GeoWorkers>>,
    /// Why the system is not measured at all.
    pub refused: Option<String>,
    /// Query families whose answers disagreed with the oracle, with an example.
    pub invalid: BTreeMap<QueryFamily, String>,
    pub supports_point_adds: bool,
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

fn spread(opts: &Opts) -> anyhow::Result<Spread> {
    let cities = if opts.cities.is_empty() {
        CITIES.to_vec()
    } else {
        opts.cities
            .iter()
            .map(|name| {
                city(name).ok_or_else(|| {
                    let known: Vec<&str> = CITIES.iter().map(|c| c.name).collect();
                    anyhow::anyhow!(
                        "--cities: unknown city `{name}` (known: {})",
                        known.join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    Ok(Spread {
        cities,
        uniform_share: opts.uniform_share,
    })
}

/// The workloads in report order: the insert curve (clients, then batch size), the query
/// table, then the pipelined adds.
fn workloads(opts: &Opts, families: &[QueryFamily]) -> Vec<Workload> {
    let mut out = Vec::new();
    if opts.workloads.contains(&Family::Insert) {
        for &clients in &opts.clients {
            for &batch in &opts.batch_sizes {
                out.push(Workload::Insert { batch, clients });
            }
        }
    }
    if opts.workloads.contains(&Family::Query) {
        for &family in families {
            out.push(Workload::Query {
                family,
                clients: opts.common.connections,
            });
        }
    }
    if opts.workloads.contains(&Family::Geoadd) {
        out.push(Workload::PointAdds {
            depth: opts.pipeline,
            clients: opts.common.connections,
        });
    }
    out.dedup();
    out
}

/// Validates the options and generates the data and queries. Fails on bad input only.
pub fn plan(opts: &Opts) -> anyhow::Result<Plan> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    if opts.workloads.is_empty() {
        bail!("--workloads names no workload (insert, query, geoadd)");
    }
    let spread = spread(opts)?;
    if spread.cities.is_empty() && spread.uniform_share == 0.0 {
        bail!("no city and no uniform share: the events would have nowhere to be");
    }
    let data = EventSet::generate(
        opts.common.seed,
        STREAM_EVENTS,
        opts.events as usize,
        &spread,
    );
    let generated = queries::generate(
        opts.common.seed,
        &QueryPlan {
            per_family: opts.queries as usize,
            radii_m: &opts.radii,
            spread: &spread,
        },
        &data,
    );
    let all: Vec<Query> = match &opts.query_file {
        None => generated,
        Some(path) => {
            let mut own = queries::read_query_file(path).map_err(anyhow::Error::msg)?;
            own.extend(
                generated
                    .into_iter()
                    .filter(|q| matches!(q, Query::Latest { .. })),
            );
            own
        }
    };
    for query in &all {
        queries::validate(query).map_err(anyhow::Error::msg)?;
    }
    let mut by_family: BTreeMap<QueryFamily, Vec<Query>> = BTreeMap::new();
    for query in all {
        by_family.entry(query.family()).or_default().push(query);
    }
    let families: Vec<QueryFamily> = by_family.keys().copied().collect();
    let pool = EventSet::generate(opts.common.seed, STREAM_INSERT_POOL, INSERT_POOL, &spread)
        .events
        .into();
    Ok(Plan {
        workloads: workloads(opts, &families),
        queries: by_family.into_iter().map(|(k, v)| (k, v.into())).collect(),
        spread,
        data,
        pool,
        tolerance: Tolerance {
            fixed_m: opts.tolerance_m,
            relative: opts.tolerance_pct / 100.0,
        },
    })
}

impl Plan {
    pub fn data_info(&self, seed: u64) -> DataInfo {
        DataInfo {
            seed,
            checksum: self.data.checksum.clone(),
            description: format!(
                "{} events of 128 bytes over {} entities, around {} cities with a {:.0}% uniform share; {} queries",
                self.data.events.len(),
                self.data.entities.len(),
                self.spread.cities.len(),
                self.spread.uniform_share * 100.0,
                self.queries.values().map(|q| q.len()).sum::<usize>()
            ),
        }
    }

    /// The most sessions any workload needs.
    fn sessions(&self) -> usize {
        self.workloads
            .iter()
            .map(|w| w.clients() as usize)
            .max()
            .unwrap_or(1)
    }
}

/// Runs geo-bench. Bad input fails before any system's data is touched.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let plan = plan(opts)?;
    let mut specs = opts.common.targets.clone();
    if specs.is_empty() {
        specs.push(TargetSpec::parse(targets::DEFAULT_TARGET).map_err(anyhow::Error::msg)?);
    }
    let progress = Progress::start(opts.common.quiet);
    let environment = measure_environment(opts, &progress);
    let started = common::clock::now_rfc3339();
    let dir = opts.common.output.clone().unwrap_or_else(|| {
        ResultsDir::default_path("geo-bench", "geo", &common::clock::compact(&started))
    });
    let results = ResultsDir::create(&dir)?;
    match prepare(opts, &plan, &specs, &results, &progress).await {
        Ok(systems) => {
            crate::measure::measure(
                opts,
                plan,
                systems,
                environment,
                results,
                progress,
                interrupt,
            )
            .await
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

/// The name of an unnamed system: its engine, and for key-value stores its durability mode.
fn default_name(kind: &str, durable: bool, settings: &BTreeMap<String, String>) -> String {
    match kind {
        "redis" | "valkey" if durable => format!("{kind}-durable"),
        "redis" | "valkey" if settings.get("appendonly").is_some_and(|v| v == "yes") => {
            format!("{kind}-aof")
        }
        "redis" | "valkey" => format!("{kind}-volatile"),
        other => other.to_owned(),
    }
}

/// Opens every target and reads what it reports about itself; refuses each that does not run
/// as its URL asked. Names unnamed systems and checks the reference names one of them.
async fn connect_all(
    opts: &Opts,
    specs: &[TargetSpec],
    results: &ResultsDir,
) -> anyhow::Result<Vec<System>> {
    let mut systems = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for spec in specs {
        let mut target = targets::open(spec, results.path()).await?;
        let d = target.describe().await?;
        let name = spec
            .name
            .clone()
            .unwrap_or_else(|| default_name(&d.kind, d.durable, &d.settings));
        if names.contains(&name) {
            bail!(
                "two targets are named `{name}`; tell them apart with NAME=URL (for example --target {name}2={})",
                spec.url_redacted()
            );
        }
        names.push(name.clone());
        target.identity_mut().name.clone_from(&name);
        let mut verified = d.settings.clone();
        verified.insert("durability".into(), d.durability.clone());
        systems.push(System {
            supports_point_adds: target.supports_point_adds(),
            info: SystemInfo {
                name,
                kind: d.kind.clone(),
                url_redacted: target.identity().url_redacted.clone(),
                version: d.version.clone(),
                verified,
                labels: vec![if d.durable {
                    "durable".into()
                } else {
                    "not durable".into()
                }],
                data_dir: d.data_dir.as_ref().map(|p| p.display().to_string()),
                durable_write_floor_ns: None,
            },
            target,
            durable: d.durable,
            method: d.method,
            workers: None,
            refused: d.refusal,
            invalid: BTreeMap::new(),
        });
    }
    if let Some(reference) = &opts.common.reference
        && !names.contains(reference)
    {
        bail!(
            "--reference {reference} names no target (targets: {})",
            names.join(", ")
        );
    }
    Ok(systems)
}

/// Connects, prepares and loads every system that is not refused, verifies its indexes and
/// its answers to every query, and opens its worker sessions.
async fn prepare(
    opts: &Opts,
    plan: &Plan,
    specs: &[TargetSpec],
    results: &ResultsDir,
    progress: &Progress,
) -> anyhow::Result<Vec<System>> {
    let mut systems = connect_all(opts, specs, results).await?;
    if systems.iter().all(|s| s.refused.is_some()) {
        let reasons: Vec<String> = systems
            .iter()
            .map(|s| format!("{}: {}", s.name(), s.refused.as_deref().unwrap_or("")))
            .collect();
        bail!("no system can be measured: {}", reasons.join("; "));
    }
    let only_point_adds = plan
        .workloads
        .iter()
        .all(|w| matches!(w, Workload::PointAdds { .. }));
    if only_point_adds
        && !systems
            .iter()
            .any(|s| s.refused.is_none() && s.supports_point_adds)
    {
        bail!(
            "--workloads geoadd needs a system that takes single-point adds (Redis or Valkey); none of the targets does"
        );
    }
    let oracle = Oracle::new(&plan.data, plan.tolerance);
    for system in systems.iter_mut() {
        if let Some(reason) = &system.refused {
            progress.line(format!("{}: refused — {reason}", system.name()));
            continue;
        }
        progress.line(format!(
            "{}: {} — loading {} events",
            system.name(),
            system.info.version,
            plan.data.events.len()
        ));
        system.target.prepare().await?;
        system.target.load(&plan.data.events).await?;
        let evidence = system.target.verify_indexes().await?;
        system.info.verified.extend(evidence);
        if let Some(dir) = &system.info.data_dir {
            system.info.durable_write_floor_ns =
                durable_write_floor(std::path::Path::new(dir), FLOOR_BUDGET).ok();
        }
        let mut workers = system.target.open_workers(plan.sessions()).await?;
        verify_queries(system, workers.as_mut(), plan, &oracle, progress).await?;
        system.workers = Some(workers);
    }
    Ok(systems)
}

/// Asks the system every query through the code that is timed and compares each answer with
/// the oracle's; a family with any disagreement is marked invalid with the first example.
async fn verify_queries(
    system: &mut System,
    workers: &mut dyn GeoWorkers,
    plan: &Plan,
    oracle: &Oracle<'_>,
    progress: &Progress,
) -> anyhow::Result<()> {
    for (family, queries) in &plan.queries {
        let answers = workers
            .answer_all(queries)
            .await
            .map_err(|e| anyhow::anyhow!("{}: verifying queries: {e}", system.name()))?;
        let failures: Vec<String> = queries
            .iter()
            .zip(&answers)
            .filter_map(|(q, ids)| oracle.check(q, ids).err())
            .collect();
        if let Some(first) = failures.first() {
            let reason = format!(
                "{} of {} {family} answers disagree with the exact oracle (boundary tolerance {}); first: {first}",
                failures.len(),
                queries.len(),
                plan.tolerance.describe()
            );
            progress.line(format!("{}: {reason}", system.name()));
            system.invalid.insert(*family, reason);
        }
    }
    Ok(())
}
