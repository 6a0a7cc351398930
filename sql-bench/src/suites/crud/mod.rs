//! `sql-bench crud`: seed 000's CRUD suite. Its phases: plan → connect → describe and verify
//! durability → prepare and verify data → warm up and measure, interleaved → record → render.

mod cluster;
pub mod data;
pub mod workers;
pub mod workload;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use common::environment::{Environment, durable_write_floor, loadavg, wait_for_quiet};
use common::human::{format_latency_ns, format_rate};
use common::options::{CommonOpts, TargetSpec};
use common::progress::Progress;
use common::protocol::{CellBuilder, Round, round_order, rounds};
use common::report::{render_terminal, verdicts};
use common::results::{Cell, Report, Status, SystemInfo};
use common::window::WindowPlan;
use common::writer::ResultsDir;
use serde::Serialize;

use self::data::CrudData;
use self::workload::{Kind, MAX_WINDOWS, Mix, Workload};
use crate::Summary;
use crate::durability::{Durability, ReadFrom};
use crate::replication::ReplicaSpec;
use crate::suites::systems;
use crate::targets::{KvTable, KvWindow, KvWorkers, Target};

/// The table point reads go to.
const READ_TABLE: &str = "crud_read";
/// The table inserts go to.
const WRITE_TABLE: &str = "crud_write";
/// Longest the load gate waits for a quiet machine.
const LOAD_GATE_MAX_WAIT: Duration = Duration::from_secs(600);
/// Time spent measuring each durable-write floor.
const FLOOR_BUDGET: Duration = Duration::from_millis(500);

#[derive(clap::Args, Serialize, Debug, Clone)]
pub struct CrudOpts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Workloads to run, comma-separated: write-Nc, read-Nc, mixed-Nc
    /// [default: write-1c and write, read and mixed at --connections].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workloads: Vec<String>,

    /// The durability every system must be in; a system that does not report it is refused.
    #[arg(long, value_enum, ignore_case = true, default_value = "c0")]
    pub config: Durability,

    /// Measure a system whose durability does not match --config anyway; every one of its cells
    /// is labelled `unmatched durability`.
    #[arg(long)]
    pub allow_unmatched_durability: bool,

    /// A target's replicas (standbys), as TARGET=HOST:PORT[,HOST:PORT…] or TARGET=URL; a bare
    /// address reuses the target's user, password and database. C1–C4 need every replica of the
    /// configuration, so each can be asked for its own status. TARGET may be left out when
    /// there is one target.
    #[arg(long = "replica", value_name = "TARGET=HOST:PORT", value_parser = ReplicaSpec::parse)]
    pub replicas: Vec<ReplicaSpec>,

    /// Where the read and mixed workloads' point reads go: the primary, or the replicas given
    /// with --replica (connections spread evenly over them; writes stay on the primary).
    #[arg(long, value_enum, default_value = "primary")]
    pub read_from: ReadFrom,

    /// Rows in the table point reads go to (seed 000: 1,000).
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub read_rows: u64,

    /// Bytes in each stored value.
    #[arg(long, default_value = "100", value_parser = value_size)]
    pub value_size: usize,

    /// Leave fairbench's tables in place after the run (by default they are dropped).
    #[arg(long)]
    pub keep_data: bool,
}

fn value_size(text: &str) -> Result<usize, String> {
    let n = common::human::parse_count(text)?;
    if n > 65_000 {
        return Err(format!("--value-size {n} is larger than 65,000 bytes"));
    }
    Ok(n as usize)
}

/// One system as the run sees it.
struct System {
    target: Box<dyn Target>,
    info: SystemInfo,
    workers: Option<Box<dyn KvWorkers>>,
    /// Why the system is not measured at all.
    refused: Option<String>,
    /// Why its reads cannot be trusted (the read table did not verify).
    reads_invalid: Option<String>,
    /// Its replicas and what its cluster reported (C0–C4).
    cluster: cluster::ClusterState,
}

impl System {
    fn name(&self) -> &str {
        &self.info.name
    }
}

fn plan_workloads(opts: &CrudOpts) -> anyhow::Result<Vec<Workload>> {
    cluster::check_options(opts)?;
    let connections = opts.common.connections;
    if connections > workload::MAX_CONNECTIONS {
        bail!(
            "--connections {connections} is more than {} connections",
            workload::MAX_CONNECTIONS
        );
    }
    let workloads = if opts.workloads.is_empty() {
        Workload::defaults(connections)
    } else {
        let parsed = opts
            .workloads
            .iter()
            .map(|w| Workload::parse(w, connections))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::msg)?;
        let mut unique: Vec<Workload> = Vec::new();
        for w in parsed {
            if !unique.contains(&w) {
                unique.push(w);
            }
        }
        unique
    };
    let windows = workloads.len() as u64 * u64::from(opts.common.warmup + opts.common.rounds);
    if windows >= MAX_WINDOWS {
        bail!(
            "{windows} windows per system is more than one run can key uniquely ({MAX_WINDOWS}); use fewer rounds or workloads"
        );
    }
    Ok(workloads)
}

fn tables(opts: &CrudOpts) -> (KvTable, KvTable) {
    let table = |name| KvTable {
        name,
        value_len: opts.value_size,
    };
    (table(READ_TABLE), table(WRITE_TABLE))
}

/// The most sessions any workload needs.
fn workloads_max_connections(opts: &CrudOpts) -> usize {
    plan_workloads(opts)
        .map(|w| w.iter().map(|w| w.connections).max().unwrap_or(1))
        .unwrap_or(opts.common.connections) as usize
}

/// Runs the suite. Bad input fails before any system's data is touched.
pub async fn run(opts: &CrudOpts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    let workloads = plan_workloads(opts)?;
    let specs = systems::plan_targets(&opts.common)?;
    let progress = Progress::start(opts.common.quiet);
    let environment = measure_environment(opts, &progress);
    let started = common::clock::now_rfc3339();
    let dir = opts.common.output.clone().unwrap_or_else(|| {
        ResultsDir::default_path("sql-bench", "crud", &common::clock::compact(&started))
    });
    let results = ResultsDir::create(&dir)?;
    match prepare(opts, &specs, &results, &progress).await {
        Ok(systems) => {
            measure(
                opts,
                systems,
                workloads,
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

fn measure_environment(opts: &CrudOpts, progress: &Progress) -> Environment {
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

/// Connects to every system, reads what each reports, verifies durability, checks the
/// namespace, then creates and verifies the tables and opens the worker sessions.
async fn prepare(
    opts: &CrudOpts,
    specs: &[TargetSpec],
    results: &ResultsDir,
    progress: &Progress,
) -> anyhow::Result<Vec<System>> {
    let (read, write) = tables(opts);
    let mut systems = connect_all(opts, specs, results).await?;
    cluster::verify_all(opts, specs, &mut systems).await?;
    if systems.iter().all(|s| s.refused.is_some()) {
        bail!(
            "no system can be measured: {}",
            systems
                .iter()
                .map(|s| format!("{} {}", s.name(), s.refused.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    for system in &systems {
        if let Some(reason) = &system.refused {
            progress.line(format!("{}: refused — {reason}", system.name()));
        } else if system
            .info
            .labels
            .iter()
            .any(|l| l == "unmatched durability")
        {
            progress.line(format!(
                "{}: measured with unmatched durability, labelled",
                system.name()
            ));
        }
    }
    for system in measured(&mut systems) {
        system.target.check_namespace(&[read, write]).await?;
    }
    let data = CrudData::generate(opts.common.seed, opts.read_rows, opts.value_size);
    for system in measured(&mut systems) {
        progress.line(format!(
            "{}: {} — preparing {}",
            system.name(),
            system.info.version,
            data.info.description
        ));
        create_tables(system, &data, read, write).await?;
        cluster::verify_replica_reads(opts, system, &data, read).await?;
    }
    let sessions = workloads_max_connections(opts);
    for system in measured(&mut systems) {
        system.workers = Some(system.target.open_kv_workers(sessions, read, write).await?);
    }
    Ok(systems)
}

/// The systems not refused.
fn measured(systems: &mut [System]) -> impl Iterator<Item = &mut System> {
    systems.iter_mut().filter(|s| s.refused.is_none())
}

/// Opens every target and reads what it reports about itself (see [`systems::connect_all`]).
async fn connect_all(
    opts: &CrudOpts,
    specs: &[TargetSpec],
    results: &ResultsDir,
) -> anyhow::Result<Vec<System>> {
    let connected = systems::connect_all(
        specs,
        results.path(),
        opts.config,
        opts.allow_unmatched_durability,
        opts.common.reference.as_deref(),
    )
    .await?;
    Ok(connected
        .into_iter()
        .map(|c| System {
            target: c.target,
            info: c.info,
            workers: None,
            refused: c.refused,
            reads_invalid: None,
            cluster: Default::default(),
        })
        .collect())
}

/// Creates both tables, verifies them from the engine's catalog, reads the read table back,
/// and measures the durable-write floor where the data lives.
async fn create_tables(
    system: &mut System,
    data: &CrudData,
    read: KvTable,
    write: KvTable,
) -> anyhow::Result<()> {
    system.target.create_kv(read, &data.read_rows).await?;
    system.target.create_kv(write, &[]).await?;
    for table in [read, write] {
        let evidence = system.target.verify_kv(table).await?;
        system.info.verified.extend(evidence);
    }
    let found = system.target.read_kv(read).await?;
    system.reads_invalid = data.read_table_mismatch(&found);
    if let Some(dir) = &system.info.data_dir {
        system.info.durable_write_floor_ns =
            durable_write_floor(&PathBuf::from(dir), FLOOR_BUDGET).ok();
    }
    Ok(())
}

async fn measure(
    opts: &CrudOpts,
    mut systems: Vec<System>,
    workloads: Vec<Workload>,
    mut environment: Environment,
    results: ResultsDir,
    progress: Progress,
    interrupt: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    let common = &opts.common;
    if let Ok(floor) = durable_write_floor(results.path(), FLOOR_BUDGET) {
        environment.durable_write_floor_ns = Some(floor);
        environment.durable_write_floor_path = Some(results.path().display().to_string());
    }
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let mut report = Report::begin(
        "sql-bench",
        env!("CARGO_PKG_VERSION"),
        "crud",
        &cluster::section(opts),
        options,
        environment,
    );
    report.data = Some(CrudData::generate(common.seed, opts.read_rows, opts.value_size).info);
    report.systems = systems.iter().map(|s| s.info.clone()).collect();
    report.reference = Some(
        common
            .reference
            .clone()
            .unwrap_or_else(|| systems[0].name().to_owned()),
    );
    report.notes = notes(opts, &systems);
    cluster::record_evidence(opts, &systems, &mut report);
    let mut builders: Vec<Vec<CellBuilder>> = workloads
        .iter()
        .map(|w| {
            systems
                .iter()
                .map(|s| {
                    let mut b = CellBuilder::new(
                        Cell::new(
                            &w.to_string(),
                            s.name(),
                            "ops/s",
                            w.connections,
                            common.rounds,
                        ),
                        common.ceiling,
                    );
                    for label in &s.info.labels {
                        b.add_label(label);
                    }
                    if let Some(reason) = &s.refused {
                        b.mark(Status::Refused, reason.clone());
                    } else if let (Some(reason), true) = (&s.reads_invalid, w.kind != Kind::Write) {
                        b.mark(
                            Status::Invalid,
                            format!("{reason}; reads are not timed against wrong data"),
                        );
                    }
                    b
                })
                .collect()
        })
        .collect();
    for row in &builders {
        for b in row {
            report.upsert_cell(b.to_cell());
        }
    }
    results.write_results(&report)?;

    let (_, write_table) = tables(opts);
    let plan = WindowPlan {
        duration: common.duration,
        ceiling: common.ceiling,
        rate_per_s: common.rate,
        interrupt: interrupt.clone(),
        progress: progress.sender(),
    };
    let values: Arc<[String]> = CrudData::generate(common.seed, 0, opts.value_size)
        .write_values
        .into();
    let mut window: u64 = 0;
    'workloads: for (wi, workload) in workloads.iter().enumerate() {
        for round in rounds(common.warmup, common.rounds) {
            for si in round_order(systems.len(), round.index) {
                if interrupt.load(Ordering::SeqCst) {
                    break 'workloads;
                }
                let builder = &mut builders[wi][si];
                let system = &mut systems[si];
                let Some(workers) = system.workers.as_mut() else {
                    continue;
                };
                if !builder.is_live() {
                    continue;
                }
                window += 1;
                let mix = Mix {
                    kind: workload.kind,
                    read_keys: opts.read_rows as i64,
                    value_len: opts.value_size,
                    values: values.clone(),
                    window,
                    seed: common.seed,
                };
                let label = format!(
                    "{workload} · {} · {}",
                    system.info.name,
                    round.label(common.warmup, common.rounds)
                );
                progress.window(label.clone(), common.duration);
                match workers
                    .run_window(workload.connections as usize, &mix, &plan)
                    .await
                {
                    Ok(window) => {
                        builder.add(round, &window.outcome);
                        if workload.kind != Kind::Read {
                            verify_writes(
                                system.target.as_mut(),
                                write_table,
                                &mix,
                                &window,
                                round,
                                builder,
                            )
                            .await;
                        }
                        progress.line(window_line(&label, &window.outcome));
                    }
                    Err(message) => {
                        builder.mark(Status::Error, format!("{}: {message}", round_name(round)));
                        progress.line(format!("{label}: {message}"));
                    }
                }
                report.upsert_cell(builder.to_cell());
                results.write_results(&report)?;
            }
        }
    }
    if interrupt.load(Ordering::SeqCst) {
        report
            .notes
            .push("The run was interrupted (Ctrl-C); cells not measured in full say so.".into());
    }
    cluster::recheck(opts, &mut systems, &mut builders, &mut report).await;
    finish(opts, systems, report, results, progress).await
}

fn round_name(round: Round) -> String {
    match round.measured {
        Some(n) => format!("round {n}"),
        None => format!("warm-up {}", round.index + 1),
    }
}

fn window_line(label: &str, outcome: &common::window::WindowOutcome) -> String {
    let latency =
        common::recorder::percentiles(&outcome.recorder.latency).map_or_else(String::new, |p| {
            format!(
                " · p50 {} · p99 {}",
                format_latency_ns(p.p50),
                format_latency_ns(p.p99)
            )
        });
    let errors = match outcome.recorder.counts.error {
        0 => String::new(),
        n => format!(" · {n} errors"),
    };
    format!(
        "{label}: {} ops/s{latency}{errors}",
        format_rate(outcome.throughput())
    )
}

/// Checks that the rows a write window left are the ones it acknowledged: at least every
/// acknowledged insert, at most those plus the ones whose outcome is unknown.
async fn verify_writes(
    target: &mut dyn Target,
    table: KvTable,
    mix: &Mix,
    window: &KvWindow,
    round: Round,
    builder: &mut CellBuilder,
) {
    let (low, high) = mix.write_key_range();
    let counts = window.outcome.recorder.counts;
    match target.count_kv(table, low, high).await {
        Ok(found) => {
            // Failed or abandoned operations may or may not have written their row.
            let min = window.inserts_acknowledged;
            let max = min + counts.error + counts.timeout;
            if found < min || found > max {
                builder.mark(
                    Status::Invalid,
                    format!("{}: {found} rows found after {min} acknowledged inserts (at most {max} possible)", round_name(round)),
                );
            }
        }
        Err(e) => builder.mark(
            Status::Error,
            format!(
                "{}: counting the written rows failed: {e}",
                round_name(round)
            ),
        ),
    }
}

fn notes(opts: &CrudOpts, systems: &[System]) -> Vec<String> {
    let mut notes = vec![
        cluster::topology_note(opts, systems),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".to_owned(),
    ];
    if systems.iter().any(|s| s.info.kind == "sqlite") {
        notes.push("SQLite runs inside the client process: no network and no protocol, and its writers queue on an in-process lock (one writer at a time).".into());
    }
    for s in systems.iter().filter(|s| !s.info.labels.is_empty()) {
        notes.push(format!("{} is measured with unmatched durability: its cells are not comparable with the others.", s.name()));
    }
    if opts.common.rate.is_none() {
        notes.push("Closed loop: each connection sends its next request when the previous one is answered, so latency and throughput are two views of the same queue.".into());
    }
    notes
}

/// Writes the final report, prints it, and drops fairbench's tables.
async fn finish(
    opts: &CrudOpts,
    mut systems: Vec<System>,
    mut report: Report,
    results: ResultsDir,
    progress: Progress,
) -> anyhow::Result<Summary> {
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    report.verdicts = verdicts(&report);
    floor_notes(&mut report);
    if !opts.keep_data {
        let (read, write) = tables(opts);
        for system in systems.iter_mut().filter(|s| s.refused.is_none()) {
            for table in [read, write] {
                if let Err(e) = system.target.drop_kv(table).await {
                    report.notes.push(format!("cleaning up failed: {e}"));
                }
            }
        }
    }
    results.write_exports(
        &report,
        &common::export::exporters(&common::export::SharedReport),
    )?;
    if let Some(evidence) = crate::replication::render::render_markdown(&report) {
        let markdown = common::report::render_markdown(&report) + &evidence;
        results.write_atomic("report.md", markdown.as_bytes())?;
    }
    drop(progress);
    println!("{}", render_terminal(&report));
    if let Some(evidence) = crate::replication::render::render_text(&report) {
        println!("{evidence}");
    }
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

/// Puts each system's single-connection write rate beside its durable-write floor.
fn floor_notes(report: &mut Report) {
    let mut lines = Vec::new();
    for system in &report.systems {
        let Some(floor) = system.durable_write_floor_ns else {
            continue;
        };
        let Some(write_1c) = report
            .cells
            .iter()
            .find(|c| c.system == system.name && c.workload == "write 1c")
            .and_then(Cell::usable_throughput)
        else {
            continue;
        };
        lines.push(format!(
            "{}: write 1c {} ops/s against a durable-write floor of {} in its data directory (one connection can commit at most {} times/s)",
            system.name,
            format_rate(write_1c.median),
            format_latency_ns(floor),
            format_rate(1e9 / floor as f64)
        ));
    }
    report.notes.extend(lines);
}
