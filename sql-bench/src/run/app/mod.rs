//! `sql-bench app`, as its phases: plan (every input checked before anything is touched) →
//! connect and describe every engine → generate the records → begin the report → per round
//! and engine, in alternating order: create, fill, verify, read scenarios, append → record →
//! render, on common's run lifecycle.

mod measure;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::options::TargetSpec;
use common::procstat::own_rss;
use common::protocol::round_order;
use common::results::SystemInfo;
use common::run::{Begin, Lifecycle, Recording, Summary, Tool};

use crate::opts::AppOpts;
use crate::report::app::{AppReport, judge, notes, summary};
use crate::suites::app::cells::Cells;
use crate::suites::app::scenarios::Scenario;
use crate::suites::app::{COLLECTION, Data};
use crate::systems::{self, Connected};

pub(crate) const TOOL: Tool = Tool {
    name: "sql-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "app",
};

/// What was held equal for every engine.
const SECTION: &str = "Drop-in mode: one JSON document per record, six declared secondary indexes, every request sequential through the data layer";

/// What is checked before anything is touched: the options, and that the run is on one
/// machine. Each scenario times one client's requests, one at a time, over one data set (seeds
/// 003/004): a second client machine would add load the scenarios do not define and measure
/// nothing a run on one does not.
pub(super) fn check(opts: &AppOpts) -> anyhow::Result<()> {
    opts.validate()?;
    let n = opts.common.worker_count;
    if n > 1 {
        anyhow::bail!(
            "--worker-count {n}: sql-bench app times one client's requests, one at a time, over one data set, so {n} client machines would measure nothing one does not; run it on one machine"
        );
    }
    Ok(())
}

/// Runs the suite. Bad input fails before any engine's data is touched.
pub async fn run(opts: &AppOpts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    check(opts)?;
    let scenarios = plan_scenarios(opts)?;
    check_write_warmup(opts, &scenarios)?;
    let specs = systems::plan_targets(&opts.common)?;
    let lifecycle = Lifecycle::start(TOOL, &opts.common, opts, interrupt)?;
    let mut systems = match connect(opts, &specs, &lifecycle).await {
        Ok(connected) => connected,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    lifecycle.progress().line(format!(
        "one pass over the seeded streams ({} records to fill, {} to append) for every expected answer…",
        opts.rows,
        opts.append_rows()
    ));
    let data = Data::prepare(opts.common.seed, opts.rows, opts.append_rows());
    let mut run = lifecycle.begin(Begin {
        section: SECTION.into(),
        systems: systems.iter().map(|s| s.info.clone()).collect(),
        reference: opts.common.reference.clone(),
        data: Some(data.info()),
        notes: Vec::new(),
    })?;
    let named: Vec<(&SystemInfo, Option<&str>)> = systems
        .iter()
        .map(|s| (&s.info, s.refused.as_deref()))
        .collect();
    let mut cells = Cells::new(opts, &named, &scenarios, &data);
    cells.write_into(&mut run.report);
    run.save()?;
    measure_rounds(opts, &mut systems, &scenarios, &data, &mut cells, &mut run).await?;
    if run.interrupted() {
        // Said here, before the notes that follow, as every report orders it.
        run.report.notes.push(common::run::interrupted_note());
    }
    record(opts, &systems, &cells, &mut run)?;
    run.finish(&AppReport)
}

/// The scenarios asked for, in the order of the seed's table.
fn plan_scenarios(opts: &AppOpts) -> anyhow::Result<Vec<Scenario>> {
    if opts.scenarios.is_empty() {
        return Ok(Scenario::ALL.to_vec());
    }
    let asked = opts
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

/// A timed write keeps its first `--warmup` batches untimed: it needs more batches than that.
fn check_write_warmup(opts: &AppOpts, scenarios: &[Scenario]) -> anyhow::Result<()> {
    let warmup = u64::from(opts.common.warmup);
    for (scenario, rows, flag) in [
        (Scenario::Fill, opts.rows, "--rows"),
        (Scenario::Append, opts.append_rows(), "--append-rows"),
    ] {
        let batches = rows.div_ceil(opts.batch);
        if scenarios.contains(&scenario) && batches <= warmup {
            anyhow::bail!(
                "{flag} {rows} in batches of {} makes {batches} batch{}, and `{}` writes its first {warmup} untimed (--warmup {warmup}): none would be timed; lower --batch or --warmup, or raise {flag}",
                opts.batch,
                if batches == 1 { "" } else { "es" },
                scenario.key()
            );
        }
    }
    Ok(())
}

/// Connects and checks that no foreign table stands where the collection goes.
async fn connect(
    opts: &AppOpts,
    specs: &[TargetSpec],
    lifecycle: &Lifecycle,
) -> anyhow::Result<Vec<Connected>> {
    let mut connected = systems::connect_all(
        specs,
        &crate::targets::Reach::of(lifecycle, &opts.common),
        opts.config,
        opts.allow_unmatched_durability,
        opts.common.reference.as_deref(),
    )
    .await?;
    systems::ensure_some_measurable(
        connected
            .iter()
            .map(|s| (s.info.name.as_str(), s.refused.as_deref())),
    )?;
    for system in connected.iter_mut().filter(|s| s.refused.is_none()) {
        system.target.check_collection(&COLLECTION).await?;
    }
    Ok(connected)
}

/// Every round re-seeds every engine from empty; engines go in alternating order.
async fn measure_rounds(
    opts: &AppOpts,
    systems: &mut [Connected],
    scenarios: &[Scenario],
    data: &Data,
    cells: &mut Cells,
    run: &mut Recording,
) -> anyhow::Result<()> {
    let interrupt = run.interrupt().clone();
    for round in 0..opts.common.rounds {
        for index in round_order(systems.len(), round) {
            if run.interrupted() {
                return Ok(());
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
                interrupt: &interrupt,
                keep: opts.keep_data && last,
            };
            measure::round(&context, system, cells, index, run).await?;
        }
    }
    Ok(())
}

/// What the catalogs showed joins each engine's verified settings; then the notes, the
/// verdicts and seed 004's summary (which counts them).
fn record(
    opts: &AppOpts,
    systems: &[Connected],
    cells: &Cells,
    run: &mut Recording,
) -> anyhow::Result<()> {
    let report = &mut run.report;
    for (system, info) in systems.iter().zip(report.systems.iter_mut()) {
        info.verified.extend(cells.evidence(&system.info.name));
    }
    cells.write_into(report);
    report.extra.insert(
        "client_memory".into(),
        client_memory(cells.engine_heap_peak_bytes()),
    );
    let notes = notes(opts, report, cells);
    report.notes.extend(notes);
    // `finish` computes the same verdicts again; the summary needs them now.
    let judgement = judge(report);
    report.verdicts = judgement.verdicts;
    report.no_verdicts = judgement.no_verdicts;
    report
        .extra
        .insert("summary".into(), serde_json::to_value(summary(report))?);
    Ok(())
}

/// The client's peak resident memory (the kernel's high-water mark for this process), with
/// what the engines running inside it reported holding, so that the two can be told apart.
fn client_memory(engines: &std::collections::BTreeMap<String, u64>) -> serde_json::Value {
    serde_json::json!({
        "peak_rss_bytes": own_rss().map(|r| r.peak_bytes),
        "engine_heap_peak_bytes": engines,
    })
}
