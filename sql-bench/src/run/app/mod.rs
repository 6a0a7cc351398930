//! `sql-bench app`, as its phases: plan (every input checked before anything is touched) →
//! connect and describe every engine → generate the records → begin the report → per round
//! and engine, in alternating order: create, fill, verify, read scenarios, append → record →
//! render, on common's run lifecycle.

mod measure;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::options::TargetSpec;
use common::protocol::round_order;
use common::results::SystemInfo;
use common::run::{Begin, Lifecycle, Recording, Summary, Tool};

use crate::opts::AppOpts;
use crate::report::app::{AppReport, judge, notes, summary};
use crate::suites::app::cells::Cells;
use crate::suites::app::scenarios::Scenario;
use crate::suites::app::{COLLECTION, Data};
use crate::systems::{self, Connected};

const TOOL: Tool = Tool {
    name: "sql-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "app",
};

/// What was held equal for every engine.
const SECTION: &str = "Drop-in mode: one JSON document per record, six declared secondary indexes, every request sequential through the data layer";

/// Runs the suite. Bad input fails before any engine's data is touched.
pub async fn run(opts: &AppOpts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    opts.validate()?;
    let scenarios = plan_scenarios(opts)?;
    let specs = systems::plan_targets(&opts.common)?;
    let lifecycle = Lifecycle::start(TOOL, &opts.common, opts, interrupt)?;
    let mut systems = match connect(opts, &specs, &lifecycle).await {
        Ok(connected) => connected,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    lifecycle.progress().line(format!(
        "generating {} + {} records…",
        opts.rows,
        opts.append_rows()
    ));
    let data = Data::generate(opts.common.seed, opts.rows, opts.append_rows());
    let mut run = lifecycle.begin(Begin {
        section: SECTION.into(),
        systems: systems.iter().map(|s| s.info.clone()).collect(),
        reference: opts.common.reference.clone(),
        data: Some(data.info(opts.common.seed)),
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
        run.report
            .notes
            .push("The run was interrupted (Ctrl-C); cells not measured in full say so.".into());
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
