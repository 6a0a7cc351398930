//! One engine's round: a fresh collection with the declared indexes, the fill (generated batch
//! by batch, the first `--warmup` batches untimed), the catalog checks, each read scenario
//! (every iteration's answer verified as its rows stream in, warm-ups discarded, iterations
//! timed), and the append onto the populated collection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::cputime::process_cpu_ns;
use common::human::{format_latency_ns, format_rate};
use common::progress::Progress;
use common::results::Status;
use common::run::Recording;
use common::servercpu::ServerProcess;
use common::writer::WriteError;

use crate::opts::AppOpts;
use crate::query::{CollectionState, Doc, DocError, DocSession};
use crate::suites::app::cells::{Cells, Inserted};
use crate::suites::app::layer::{DataLayer, LayerError};
use crate::suites::app::scenarios::{self, Scenario};
use crate::suites::app::{COLLECTION, Data};
use crate::systems::Connected;

pub struct RoundContext<'a> {
    pub opts: &'a AppOpts,
    /// 1-based.
    pub round: u32,
    pub scenarios: &'a [Scenario],
    pub data: &'a Data,
    pub interrupt: &'a AtomicBool,
    /// Leave the collection in place afterwards.
    pub keep: bool,
}

impl RoundContext<'_> {
    fn reads(&self) -> Vec<Scenario> {
        self.scenarios
            .iter()
            .copied()
            .filter(|s| !s.is_write())
            .collect()
    }

    fn label(&self, system: &str, what: &str) -> String {
        format!(
            "{system} · round {}/{} · {what}",
            self.round, self.opts.common.rounds
        )
    }

    fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::SeqCst)
    }
}

/// The status and reason a failed request earns its cell.
fn failure(round: u32, error: &LayerError) -> (Status, String) {
    match error {
        LayerError::Doc(DocError::Timeout) => (
            Status::Timeout,
            format!("round {round}: no answer before the ceiling"),
        ),
        LayerError::Doc(DocError::Refused(message)) => (
            Status::Refused,
            format!("the engine refused the request: {message}"),
        ),
        LayerError::Doc(DocError::Lost(message)) => (
            Status::Error,
            format!("round {round}: the connection was lost: {message}"),
        ),
        LayerError::Decode(message) => (Status::Invalid, format!("round {round}: {message}")),
    }
}

/// Puts the cells, as they stand, into the report and writes `results.json`.
fn save(run: &mut Recording, cells: &Cells) -> Result<(), WriteError> {
    cells.write_into(&mut run.report);
    run.save()
}

/// Runs one round on one engine; cells record what happened, and are written out after every
/// scenario.
pub async fn round(
    ctx: &RoundContext<'_>,
    system: &mut Connected,
    cells: &mut Cells,
    index: usize,
    run: &mut Recording,
) -> anyhow::Result<()> {
    let round = ctx.round;
    let all = ctx.scenarios;
    let name = system.info.name.clone();
    if let Err(e) = system.target.create_collection(&COLLECTION).await {
        cells.mark_each(
            all,
            index,
            Status::Error,
            &format!("round {round}: creating the collection failed: {e}"),
        );
        save(run, cells)?;
        return Ok(());
    }
    let mut session = match system.target.open_doc_session(&COLLECTION).await {
        Ok(session) => session,
        Err(e) => {
            cells.mark_each(all, index, Status::Error, &format!("round {round}: {e}"));
            save(run, cells)?;
            return Ok(());
        }
    };
    if fill(ctx, &name, session.as_mut(), cells, index, run.progress()).await {
        measure_filled(ctx, system, &mut session, cells, index, run).await?;
    }
    if let Some(bytes) = session.engine_heap_peak_bytes() {
        cells.note_engine_heap(index, bytes);
    }
    save(run, cells)?;
    drop(session);
    if !ctx.keep
        && let Err(e) = system.target.drop_collection(&COLLECTION).await
    {
        run.progress()
            .line(format!("{name}: dropping the collection failed: {e}"));
    }
    Ok(())
}

/// Everything after a successful fill: the catalog checks, the reads, the append.
async fn measure_filled(
    ctx: &RoundContext<'_>,
    system: &mut Connected,
    session: &mut Box<dyn DocSession>,
    cells: &mut Cells,
    index: usize,
    run: &mut Recording,
) -> anyhow::Result<()> {
    let (round, all) = (ctx.round, ctx.scenarios);
    let name = system.info.name.clone();
    match system.target.inspect_collection(&COLLECTION).await {
        Ok(state) => check_catalog(ctx, &state, cells, index),
        Err(e) => cells.mark_each(
            all,
            index,
            Status::Error,
            &format!("round {round}: reading the catalog failed: {e}"),
        ),
    }
    save(run, cells)?;
    for scenario in ctx.reads() {
        if ctx.interrupted() {
            break;
        }
        if !cells.is_live(scenario, index) {
            continue;
        }
        let progress = run.progress();
        let lost = read_scenario(
            ctx,
            &name,
            session.as_mut(),
            scenario,
            cells,
            index,
            progress,
        )
        .await;
        save(run, cells)?;
        if lost {
            // A lost connection is replaced for the scenarios that follow.
            match system.target.open_doc_session(&COLLECTION).await {
                Ok(fresh) => *session = fresh,
                Err(e) => {
                    cells.mark_each(all, index, Status::Error, &format!("round {round}: {e}"));
                    save(run, cells)?;
                    return Ok(());
                }
            }
        }
    }
    if all.contains(&Scenario::Append)
        && cells.is_live(Scenario::Append, index)
        && !ctx.interrupted()
    {
        append(
            ctx,
            &name,
            system,
            session.as_mut(),
            cells,
            index,
            run.progress(),
        )
        .await;
    }
    Ok(())
}

/// Why inserting stopped early.
enum Stopped {
    /// Ctrl-C: nothing is marked; the cells say they are incomplete.
    Interrupted,
    /// The engine failed this batch, after this many succeeded.
    Failed(DocError, usize),
}

/// Inserts `batches` (generated as they are taken, outside the timed calls), each a
/// transaction bounded by the ceiling. The first `warmup` batches are written and not timed;
/// the rest are timed one by one, with the client's CPU time over them, and the server's from
/// the first timed batch to the last. On failure: the error and how many batches got in.
async fn insert_all(
    session: &mut dyn DocSession,
    batches: impl Iterator<Item = Vec<Doc>>,
    warmup: u32,
    ceiling: Duration,
    interrupt: &AtomicBool,
    server: &ServerProcess,
) -> Result<Inserted, Stopped> {
    let mut inserted = Inserted::default();
    let mut server_before = None;
    let mut timed_from = None;
    for (done, batch) in batches.enumerate() {
        if interrupt.load(Ordering::SeqCst) {
            return Err(Stopped::Interrupted);
        }
        if done == warmup as usize {
            server_before = server.cpu_ns();
            timed_from = Some(Instant::now());
        }
        let cpu_before = process_cpu_ns();
        let started = Instant::now();
        session
            .insert_batch(&batch, started + ceiling)
            .await
            .map_err(|e| Stopped::Failed(e, done))?;
        let time = started.elapsed();
        if done < warmup as usize {
            inserted.warmup_rows += batch.len() as u64;
        } else {
            inserted.client_cpu_ns += process_cpu_ns().saturating_sub(cpu_before);
            inserted.add_batch(time, batch.len() as u64);
        }
    }
    if let Some(from) = timed_from {
        inserted.server_cpu_ns = server.cpu_since(server_before);
        inserted.server_wall = from.elapsed();
    }
    Ok(inserted)
}

/// The fill from empty: timed when `fill` is asked for, else done untimed for the reads.
/// Returns false when the collection could not be filled (every cell of the round is marked).
async fn fill(
    ctx: &RoundContext<'_>,
    name: &str,
    session: &mut dyn DocSession,
    cells: &mut Cells,
    index: usize,
    progress: &Progress,
) -> bool {
    let opts = ctx.opts;
    progress.line(ctx.label(name, &format!("filling {} records", opts.rows)));
    let timed = ctx.scenarios.contains(&Scenario::Fill);
    let warmup = if timed { opts.common.warmup } else { 0 };
    let server = cells.server(index).clone();
    match insert_all(
        session,
        ctx.data.fill_batches(opts.batch),
        warmup,
        opts.common.ceiling,
        ctx.interrupt,
        &server,
    )
    .await
    {
        Ok(inserted) => {
            if timed {
                cells.record_batches(Scenario::Fill, index, &inserted);
                progress.line(ctx.label(
                    name,
                    &format!("fill: {} rows/s", format_rate(inserted.rows_per_s())),
                ));
            }
            true
        }
        Err(Stopped::Interrupted) => false,
        Err(Stopped::Failed(error, done)) => {
            let (status, reason) = failure(ctx.round, &LayerError::Doc(error));
            let reason = format!("{reason} (the fill stopped after {done} batches)");
            cells.mark_each(ctx.scenarios, index, status, &reason);
            false
        }
    }
}

/// Before anything is timed: the engine holds exactly the rows written and exactly the
/// declared index set, read from its own catalog.
fn check_catalog(ctx: &RoundContext<'_>, state: &CollectionState, cells: &mut Cells, index: usize) {
    let round = ctx.round;
    let indexes: Vec<String> = state
        .indexes
        .iter()
        .map(|i| match (i.primary, i.covers) {
            (true, _) => format!("{} (primary key)", i.name),
            (false, Some(field)) => format!("{} ({field})", i.name),
            (false, None) => format!("{} ({})", i.name, i.definition),
        })
        .collect();
    cells.add_evidence(index, "app_records.indexes", indexes.join(", "));
    let extra: Vec<String> = state
        .extra()
        .iter()
        .map(|i| format!("{} {}", i.name, i.definition))
        .collect();
    cells.add_evidence(
        index,
        "app_records.extra_indexes",
        if extra.is_empty() {
            "none".to_owned()
        } else {
            extra.join("; ")
        },
    );
    let missing = state.missing(&COLLECTION);
    if !missing.is_empty() {
        let reason = format!(
            "index parity: no index on {} in the engine's catalog (it holds: {})",
            missing.join(", "),
            indexes.join(", ")
        );
        cells.mark_each(ctx.scenarios, index, Status::Refused, &reason);
        return;
    }
    let written = ctx.opts.rows;
    if state.rows != written {
        let reason = format!(
            "round {round}: the collection holds {} rows after the fill; {written} were written",
            state.rows
        );
        let mut affected = ctx.reads();
        affected.push(Scenario::Append);
        cells.mark_each(&affected, index, Status::Invalid, &reason);
    }
}

/// Verifies a read scenario's answer, runs its warm-ups, then times its iterations. Returns
/// true when the connection was lost.
async fn read_scenario(
    ctx: &RoundContext<'_>,
    name: &str,
    session: &mut dyn DocSession,
    scenario: Scenario,
    cells: &mut Cells,
    index: usize,
    progress: &Progress,
) -> bool {
    let opts = ctx.opts;
    let ceiling = opts.common.ceiling;
    let params = ctx.data.params();
    let expected = cells
        .expected(scenario)
        .expect("read scenarios have an expected answer");
    let mut samples = Vec::with_capacity(opts.iterations as usize);
    let total = 1 + u64::from(opts.common.warmup) + opts.iterations;
    let first_timed = 1 + u64::from(opts.common.warmup);
    let server = cells.server(index).clone();
    let (mut server_before, mut timed_from) = (None, None);
    for iteration in 0..total {
        if ctx.interrupted() {
            return false;
        }
        if iteration == first_timed {
            server_before = server.cpu_ns();
            timed_from = Some(Instant::now());
        }
        let started = Instant::now();
        let mut layer = DataLayer::new(session, started + ceiling);
        let result = scenarios::run(scenario, &mut layer, params).await;
        let elapsed = started.elapsed();
        let answer = match result {
            Ok(answer) => answer,
            Err(error) => {
                let (status, reason) = failure(ctx.round, &error);
                cells.mark(scenario, index, status, &reason);
                return matches!(error, LayerError::Doc(DocError::Lost(_)));
            }
        };
        if let Some(how) = session.answered_by() {
            cells.add_answered_by(scenario, index, how);
        }
        // Every iteration's answer is reduced as its rows arrive; each is checked, the first
        // before any is timed.
        if answer != expected {
            let reason = format!(
                "round {}, iteration {}: returned {} rows (digest {}); the generated data gives {} (digest {})",
                ctx.round,
                iteration + 1,
                answer.rows,
                answer.digest_hex(),
                expected.rows,
                expected.digest_hex()
            );
            cells.mark(scenario, index, Status::Invalid, &reason);
            return false;
        }
        if iteration >= first_timed {
            samples.push(elapsed.as_nanos() as u64);
        }
    }
    // The server's CPU over the timed iterations, read before the progress line is written.
    let server_cpu = server.cpu_since(server_before);
    let timed_wall = timed_from.map_or(Duration::ZERO, |from| from.elapsed());
    let mut sorted = samples.clone();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    progress.line(ctx.label(
        name,
        &format!("{}: median {}", scenario.key(), format_latency_ns(median)),
    ));
    let iterations = samples.len() as u64;
    cells.record_iterations(scenario, index, samples);
    if iterations > 0 {
        cells.record_server_cpu(scenario, index, server_cpu, timed_wall, iterations);
    }
    false
}

/// The append onto the populated collection, then a count of what it holds.
async fn append(
    ctx: &RoundContext<'_>,
    name: &str,
    system: &mut Connected,
    session: &mut dyn DocSession,
    cells: &mut Cells,
    index: usize,
    progress: &Progress,
) {
    let opts = ctx.opts;
    let server = cells.server(index).clone();
    match insert_all(
        session,
        ctx.data.append_batches(opts.batch),
        opts.common.warmup,
        opts.common.ceiling,
        ctx.interrupt,
        &server,
    )
    .await
    {
        Ok(inserted) => {
            cells.record_batches(Scenario::Append, index, &inserted);
            progress.line(ctx.label(
                name,
                &format!("append: {} rows/s", format_rate(inserted.rows_per_s())),
            ));
        }
        Err(Stopped::Interrupted) => return,
        Err(Stopped::Failed(error, done)) => {
            let (status, reason) = failure(ctx.round, &LayerError::Doc(error));
            cells.mark(
                Scenario::Append,
                index,
                status,
                &format!("{reason} (after {done} batches)"),
            );
            return;
        }
    }
    let expected = opts.rows + opts.append_rows();
    match system.target.inspect_collection(&COLLECTION).await {
        Ok(state) if state.rows == expected => {}
        Ok(state) => cells.mark(
            Scenario::Append,
            index,
            Status::Invalid,
            &format!(
                "round {}: the collection holds {} rows after the append; {expected} were written",
                ctx.round, state.rows
            ),
        ),
        Err(e) => cells.mark(
            Scenario::Append,
            index,
            Status::Error,
            &format!("round {}: {e}", ctx.round),
        ),
    }
}
