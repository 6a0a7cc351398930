//! `sql-bench app`: seeds 003/004's application-shaped suite. Every engine is seeded with the
//! same generated records, its index set is checked against the declaration from its own
//! catalog, every scenario's answer is checked against the generator before it is timed, and
//! every request goes through the application's data layer. Phases: plan → connect → per
//! round and engine (alternating order): create, fill, verify, read scenarios, append.

pub mod cells;
pub mod layer;
pub mod measure;
pub mod record;
pub mod report;
pub mod scenarios;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use common::environment::{Environment, loadavg, wait_for_quiet};
use common::human::parse_count;
use common::options::CommonOpts;
use common::progress::Progress;
use common::protocol::round_order;
use common::results::{DataInfo, Report, Status};
use common::writer::ResultsDir;
use serde::Serialize;

use self::cells::Cells;
use self::record::{Dataset, INDEXED_FIELDS, generate};
use self::scenarios::{Params, Scenario};
use crate::Summary;
use crate::durability::Durability;
use crate::query::Collection;
use crate::suites::systems::{self, Connected};

/// The collection every engine holds, with the declared index set.
pub const COLLECTION: Collection = Collection {
    name: "app_records",
    indexed: &INDEXED_FIELDS,
};
/// Longest the load gate waits for a quiet machine.
const LOAD_GATE_MAX_WAIT: Duration = Duration::from_secs(600);
/// Generator streams of the fill and of the append.
const FILL_STREAM: u64 = 10;
const APPEND_STREAM: u64 = 11;

#[derive(clap::Args, Serialize, Debug, Clone)]
#[command(mut_arg("warmup", |a| a
    .default_value("2")
    .help("Warm-up iterations per scenario, engine and round, run and discarded")))]
#[command(mut_arg("rounds", |a| a
    .help("Rounds; each re-seeds every engine from empty and pools its measurements")))]
pub struct AppOpts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Records generated and loaded into every engine (seed 003: 250,000).
    #[arg(long, default_value = "250k", value_parser = parse_count)]
    pub rows: u64,

    /// Records appended onto the populated collection [default: --rows].
    #[arg(long, value_parser = parse_count)]
    pub append_rows: Option<u64>,

    /// Records per insert batch, one transaction each.
    #[arg(long, default_value = "5000", value_parser = parse_count)]
    pub batch: u64,

    /// Measured iterations per read scenario, engine and round.
    #[arg(long, default_value = "10", value_parser = parse_count)]
    pub iterations: u64,

    /// Scenarios to run, comma-separated [default: all]: fill, append, point-read, inspection,
    /// first-page, deep-page, flag-scan, range-scan, count, load-all.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub scenarios: Vec<String>,

    /// The durability every engine must be in; an engine that does not report it is refused.
    #[arg(long, value_enum, ignore_case = true, default_value = "c0")]
    pub config: Durability,

    /// Measure an engine whose durability does not match --config anyway, labelled.
    #[arg(long)]
    pub allow_unmatched_durability: bool,

    /// Leave the collection in place after the last round (by default it is dropped).
    #[arg(long)]
    pub keep_data: bool,
}

impl AppOpts {
    pub fn append_rows(&self) -> u64 {
        self.append_rows.unwrap_or(self.rows)
    }

    /// The scenarios asked for, in the order of the seed's table.
    fn plan_scenarios(&self) -> anyhow::Result<Vec<Scenario>> {
        if self.scenarios.is_empty() {
            return Ok(Scenario::ALL.to_vec());
        }
        let asked = self
            .scenarios
            .iter()
            .map(|s| Scenario::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::msg)?;
        Ok(Scenario::ALL
            .into_iter()
            .filter(|s| asked.contains(s))
            .collect())
    }

    fn validate(&self) -> anyhow::Result<()> {
        self.common.validate().map_err(anyhow::Error::msg)?;
        if self.common.rate.is_some() {
            bail!(
                "--rate does not apply to sql-bench app: every request is sequential, as in the application"
            );
        }
        if self.batch > 50_000 {
            bail!(
                "--batch {} is more than 50,000 records in one statement",
                self.batch
            );
        }
        Ok(())
    }
}

/// The generated records and what each scenario must answer.
pub struct Data {
    pub fill: Dataset,
    pub append: Dataset,
    pub params: Params,
}

/// Runs the suite. Bad input fails before any engine's data is touched.
pub async fn run(opts: &AppOpts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    opts.validate()?;
    let scenarios = opts.plan_scenarios()?;
    let specs = systems::plan_targets(&opts.common)?;
    let progress = Progress::start(opts.common.quiet);
    let mut environment = Environment::capture();
    if let Some(gate) = opts.common.load_gate {
        environment.load_gate = Some(wait_for_quiet(gate, LOAD_GATE_MAX_WAIT, |load| {
            progress.line(format!(
                "waiting for the load average ({load:.2}) to fall to {gate:.2}…"
            ));
        }));
    }
    let started = common::clock::now_rfc3339();
    let dir = opts.common.output.clone().unwrap_or_else(|| {
        ResultsDir::default_path("sql-bench", "app", &common::clock::compact(&started))
    });
    let results = ResultsDir::create(&dir)?;
    let connected = match connect(opts, &specs, &results).await {
        Ok(connected) => connected,
        Err(e) => {
            drop(progress);
            results.discard();
            return Err(e);
        }
    };
    progress.line(format!(
        "generating {} + {} records…",
        opts.rows,
        opts.append_rows()
    ));
    let fill = generate(opts.common.seed, FILL_STREAM, 0, opts.rows, opts.rows);
    let append = generate(
        opts.common.seed,
        APPEND_STREAM,
        opts.rows,
        opts.append_rows(),
        opts.rows,
    );
    let params = Params::choose(&fill.records, opts.common.seed);
    let data = Data {
        fill,
        append,
        params,
    };
    let report = begin_report(opts, &connected, &data, environment)?;
    measure_all(
        opts, connected, &scenarios, &data, report, results, progress, interrupt,
    )
    .await
}

/// Connects and checks that no foreign table stands where the collection goes.
async fn connect(
    opts: &AppOpts,
    specs: &[common::options::TargetSpec],
    results: &ResultsDir,
) -> anyhow::Result<Vec<Connected>> {
    let mut connected = systems::connect_all(
        specs,
        results.path(),
        opts.config,
        opts.allow_unmatched_durability,
        opts.common.reference.as_deref(),
    )
    .await?;
    systems::ensure_some_measurable(&connected)?;
    for system in connected.iter_mut().filter(|s| s.refused.is_none()) {
        system.target.check_collection(&COLLECTION).await?;
    }
    Ok(connected)
}

fn begin_report(
    opts: &AppOpts,
    systems: &[Connected],
    data: &Data,
    environment: Environment,
) -> anyhow::Result<Report> {
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let section = "Drop-in mode: one JSON document per record, six declared secondary indexes, every request sequential through the data layer";
    let mut report = Report::begin(
        "sql-bench",
        env!("CARGO_PKG_VERSION"),
        "app",
        section,
        options,
        environment,
    );
    let mut checksum = data.fill.checksum;
    checksum.update(data.append.checksum.hex().as_bytes());
    report.data = Some(DataInfo {
        seed: opts.common.seed,
        checksum: checksum.hex(),
        description: format!(
            "{} measurement records filled, {} appended (JSON documents, about {} bytes each)",
            common::human::format_thousands(opts.rows as f64),
            common::human::format_thousands(opts.append_rows() as f64),
            data.fill.docs.iter().map(|d| d.json.len()).sum::<usize>()
                / data.fill.docs.len().max(1)
        ),
    });
    report.systems = systems.iter().map(|s| s.info.clone()).collect();
    report.reference = Some(
        opts.common
            .reference
            .clone()
            .unwrap_or_else(|| systems[0].info.name.clone()),
    );
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn measure_all(
    opts: &AppOpts,
    mut systems: Vec<Connected>,
    scenarios: &[Scenario],
    data: &Data,
    mut report: Report,
    results: ResultsDir,
    progress: Progress,
    interrupt: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    let mut cells = Cells::new(opts, &systems, scenarios, data);
    cells.write_into(&mut report);
    results.write_results(&report)?;
    'rounds: for round in 0..opts.common.rounds {
        for index in round_order(systems.len(), round) {
            if interrupt.load(Ordering::SeqCst) {
                break 'rounds;
            }
            let system = &mut systems[index];
            if system.refused.is_some() {
                continue;
            }
            let last = round + 1 == opts.common.rounds;
            let context = measure::RoundContext {
                opts,
                round: round + 1,
                scenarios,
                data,
                progress: &progress,
                interrupt: &interrupt,
                keep: opts.keep_data && last,
            };
            measure::round(&context, system, &mut cells, index, |cells| {
                cells.write_into(&mut report);
                results.write_results(&report)
            })
            .await?;
        }
    }
    if interrupt.load(Ordering::SeqCst) {
        report
            .notes
            .push("The run was interrupted (Ctrl-C); cells not measured in full say so.".into());
    }
    for (system, info) in systems.iter().zip(report.systems.iter_mut()) {
        info.verified.extend(cells.evidence(&system.info.name));
    }
    cells.write_into(&mut report);
    report.notes.extend(report::notes(opts, &report, &cells));
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    report.verdicts = report::verdicts(&report);
    report.extra.insert(
        "summary".into(),
        serde_json::to_value(report::summary(&report))?,
    );
    results.write_results(&report)?;
    results.write_atomic("report.md", report::render_markdown(&report).as_bytes())?;
    drop(progress);
    println!("{}", report::render_terminal(&report));
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
