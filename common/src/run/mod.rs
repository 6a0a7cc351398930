//! The lifecycle every tool's run goes through, written once: the results folder, the load
//! gate and the environment (with the durable-write floor), the report begun, every cell
//! written the moment it is measured, and the closing step (verdicts, every export, the
//! terminal summary, the exit code). A tool supplies its plan, its prepare/verify step, the
//! measurement of one cell and its own renderers ([`ToolReport`]).
//!
//! ```text
//! plan (the tool; bad input fails here, before anything exists)
//!   → Lifecycle::start      the targets' secrets (refused before anything exists), results
//!                           folder, load gate, environment
//!   → prepare (the tool)    connect, describe, load, verify — Lifecycle::abandon on failure
//!   → Lifecycle::begin      the report, each system's durable-write floor, results.json
//!   → measure (the tool)    Recording::record after every window
//!   → Recording::finish     verdicts, every export, the summary, the exit code
//! ```

mod names;
mod runtime;

pub use names::check_names;
pub use runtime::{Summary, block_on, exit};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::credentials::Secrets;
use crate::environment::{Environment, durable_write_floor, loadavg};
use crate::exit::Exit;
use crate::export::{ToolReport, exporters};
use crate::options::CommonOpts;
use crate::progress::{Progress, RunPlan};
use crate::results::{Cell, DataInfo, Location, Report, SystemInfo, WorkerInfo};
use crate::scale::{BarrierError, Segment, Worker};
use crate::window::WindowPlan;
use crate::writer::{ResultsDir, WriteError};

/// Time spent measuring each durable-write floor.
pub const FLOOR_BUDGET: Duration = Duration::from_millis(500);

/// The note an interrupted run carries unless the tool wrote a more precise one.
pub fn interrupted_note() -> String {
    format!(
        "The run was interrupted ({}); cells not measured in full say so.",
        crate::interrupt::cause()
    )
}

/// Which tool is running which suite.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// The command's name (`sql-bench`).
    pub name: &'static str,
    /// `env!("CARGO_PKG_VERSION")` of the tool.
    pub version: &'static str,
    /// The suite (`crud`, `search`, `geo`, …): in the folder name, the run id and the report.
    pub suite: &'static str,
}

/// A run between its plan and its report: the folder exists, nothing has been measured.
pub struct Lifecycle {
    tool: Tool,
    data: PathBuf,
    options: serde_json::Value,
    environment: Environment,
    results: ResultsDir,
    progress: Progress,
    interrupt: Arc<AtomicBool>,
    quiet: bool,
    secrets: Secrets,
}

/// What the report starts with, once every system is prepared.
#[derive(Debug, Clone, Default)]
pub struct Begin {
    /// What was held equal for every system (DESIGN rule 10: one section per run).
    pub section: String,
    pub systems: Vec<SystemInfo>,
    /// The system others are compared against; `None` is the first.
    pub reference: Option<String>,
    pub data: Option<DataInfo>,
    pub notes: Vec<String>,
}

impl Lifecycle {
    /// Reads the targets' secrets (`--password-file`, `FAIRBENCH_PASSWORD_<NAME>`,
    /// `FAIRBENCH_API_KEY_<NAME>`; one line and nothing made when one names no target or
    /// cannot be read), creates the results folder (proving it writable), waits for the load
    /// gate and captures the machine with the durable-write floor of the results folder. Call
    /// it after the plan: bad input must fail before any folder exists.
    pub fn start(
        tool: Tool,
        common: &CommonOpts,
        options: &impl Serialize,
        interrupt: Arc<AtomicBool>,
    ) -> anyhow::Result<Lifecycle> {
        if common.worker_count > 1 && !crate::scale::runs_as_workers(tool.name, tool.suite) {
            anyhow::bail!(
                "--worker-count {}: {} {} does not run as several workers yet (only {} do); run it on one machine",
                common.worker_count,
                tool.name,
                tool.suite,
                crate::scale::WORKER_TOOLS.join(", ")
            );
        }
        let secrets = Secrets::gather(common)?;
        let options = serde_json::to_value(options).context("serializing the options")?;
        let progress = Progress::start(common.quiet);
        let mut environment = crate::phases::capture_environment(common.load_gate, &progress);
        environment.calibration = Some(crate::calibration::Calibration {
            start: crate::calibration::probe(),
            end: None,
        });
        crate::protocol::set_fork(common.fork);
        let results = ResultsDir::create(&results_path(tool, common))?;
        if let Ok(floor) = durable_write_floor(results.path(), FLOOR_BUDGET) {
            environment.durable_write_floor_ns = Some(floor);
            environment.durable_write_floor_path = Some(results.path().display().to_string());
        }
        let data = data_folder(results.path(), common);
        Ok(Lifecycle {
            tool,
            data,
            options,
            environment,
            results,
            progress,
            interrupt,
            quiet: common.quiet,
            secrets,
        })
    }

    /// [`Lifecycle::start`], then this process's place among the run's workers
    /// ([`Worker::join`], on the options as results.json keeps them, under the run's Ctrl-C
    /// flag); the folder goes again when joining fails.
    pub async fn start_joined(
        tool: Tool,
        common: &CommonOpts,
        options: &impl Serialize,
        interrupt: Arc<AtomicBool>,
    ) -> anyhow::Result<(Lifecycle, Worker)> {
        let lifecycle = Lifecycle::start(tool, common, options, interrupt)?;
        match Worker::join(
            common,
            tool.version,
            &lifecycle.options,
            &lifecycle.interrupt,
        )
        .await
        {
            Ok(worker) => Ok((lifecycle, worker)),
            Err(e) => Err(lifecycle.abandon(e.into())),
        }
    }

    /// The targets' passwords and API keys ([`Secrets::password`], [`Secrets::api_key`],
    /// [`Secrets::url_with_password`]), read once.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The results folder.
    pub fn results_path(&self) -> &Path {
        self.results.path()
    }

    /// Where embedded systems keep their data: the results folder, or for a fork the run's
    /// folder, so that every fork opens the data the first one made.
    pub fn data_path(&self) -> &Path {
        &self.data
    }

    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    pub fn interrupt(&self) -> &Arc<AtomicBool> {
        &self.interrupt
    }

    /// Gives up before anything was measured (bad input found while preparing): the folder
    /// goes if this run made it, and `error` is handed back to be returned.
    pub fn abandon(self, error: anyhow::Error) -> anyhow::Error {
        drop(self.progress);
        self.results.discard();
        error
    }

    /// [`Lifecycle::abandon`] by one of several workers: the others, which would wait for this
    /// one at the barrier, are stopped first with `reason`.
    pub async fn abandon_worker(
        self,
        worker: &mut Worker,
        reason: &str,
        error: anyhow::Error,
    ) -> anyhow::Error {
        worker.abort(reason).await;
        self.abandon(error)
    }

    /// Starts the report: the systems (each local one's durable-write floor measured in its
    /// data directory, what cannot be measured of a remote one said), written at once.
    pub fn begin(self, begin: Begin) -> anyhow::Result<Recording> {
        let Begin {
            section,
            mut systems,
            reference,
            data,
            notes,
        } = begin;
        for system in &mut systems {
            measure_floor(system);
        }
        let mut report = Report::begin(
            self.tool.name,
            self.tool.version,
            self.tool.suite,
            &section,
            self.options,
            self.environment,
        );
        report.reference = reference.or_else(|| systems.first().map(|s| s.name.clone()));
        report.systems = systems;
        report.data = data;
        report.notes = notes;
        self.results.write_results(&report)?;
        Ok(Recording {
            report,
            results: self.results,
            progress: self.progress,
            interrupt: self.interrupt,
            quiet: self.quiet,
        })
    }
}

/// The durable-write floor of a system's data directory when this machine can see it; for a
/// remote system, a line saying it could not be measured.
fn measure_floor(system: &mut SystemInfo) {
    if system.durable_write_floor_ns.is_some() {
        return;
    }
    match (&system.data_dir, system.location) {
        (Some(dir), _) => match durable_write_floor(Path::new(dir), FLOOR_BUDGET) {
            Ok(floor) => system.durable_write_floor_ns = Some(floor),
            Err(e) => system
                .not_measured
                .push(format!("durable-write floor: cannot write in {dir} ({e})")),
        },
        (None, Location::Remote) => system
            .not_measured
            .push("durable-write floor of its disk: the server is on another host".into()),
        (None, _) => {}
    }
}

/// A run whose report has begun: cells are recorded as they are measured.
pub struct Recording {
    /// The report as it stands; a tool adds notes and `extra` before [`Recording::finish`].
    pub report: Report,
    results: ResultsDir,
    progress: Progress,
    interrupt: Arc<AtomicBool>,
    quiet: bool,
}

impl Recording {
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// What every worker of a window shares: `common`'s duration and ceiling, this worker's
    /// `segment` of `rate_per_s` (the open-loop rate of the whole run; `None` is closed loop),
    /// and this run's interrupt and progress.
    pub fn window_plan(
        &self,
        common: &CommonOpts,
        segment: Segment,
        rate_per_s: Option<f64>,
    ) -> WindowPlan {
        WindowPlan {
            duration: common.duration,
            ceiling: common.ceiling,
            rate_per_s: rate_per_s.map(|r| segment.share_of_rate(r)),
            interrupt: self.interrupt.clone(),
            progress: self.progress.sender(),
        }
    }

    pub fn interrupt(&self) -> &Arc<AtomicBool> {
        &self.interrupt
    }

    /// Tells the progress lines what the run will measure: `cells` (workload × system), each
    /// of `common`'s warm-ups and rounds, in this fork of `common`'s forks.
    pub fn plan_progress(&self, common: &CommonOpts, cells: usize) {
        let (fork, forks) = if common.fork == 0 {
            (0, 1)
        } else {
            (common.fork, common.forks)
        };
        self.progress.plan(RunPlan {
            cells: cells as u64,
            windows_per_cell: u64::from(common.warmup + common.rounds),
            window: common.duration,
            fork,
            forks,
        });
    }

    /// Whether Ctrl-C (or the test's flag) asked the run to stop.
    pub fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::SeqCst)
    }

    pub fn results_path(&self) -> &Path {
        self.results.path()
    }

    /// Puts `cell` into the report and rewrites `results.json` atomically, so a crash or
    /// Ctrl-C loses nothing already measured.
    pub fn record(&mut self, cell: Cell) -> Result<(), WriteError> {
        self.report.upsert_cell(cell);
        self.save()
    }

    /// Rewrites `results.json` as the report stands.
    pub fn save(&self) -> Result<(), WriteError> {
        self.results.write_results(&self.report)
    }

    /// The run of several workers stopped at the start barrier: `unfinished` are the cells
    /// not measured in full, each already saying why; the `worker` block records the failure,
    /// results.json is written, and the barrier's error (its own exit code) goes back. When
    /// the barrier stopped because a worker was interrupted, the run ends as an interrupted
    /// run does instead: the cells as last recorded, a note naming the worker, every export
    /// written and the exit code of its cells (the `worker` block still says why, so `merge`
    /// refuses the part as incomplete).
    pub fn stopped_at_barrier(
        mut self,
        unfinished: Vec<Cell>,
        worker: Option<WorkerInfo>,
        error: BarrierError,
        tool: &dyn ToolReport,
    ) -> anyhow::Result<Summary> {
        if let BarrierError::Interrupted {
            worker: who, cause, ..
        } = &error
        {
            self.interrupt.store(true, Ordering::SeqCst);
            self.report.worker = worker;
            self.report.notes.push(format!(
                "The run was interrupted: worker {who} was interrupted ({cause}) and stopped every worker at the next meeting; cells not measured in full say so."
            ));
            return self.finish(tool);
        }
        for cell in unfinished {
            self.report.upsert_cell(cell);
        }
        self.report.worker = worker;
        self.report
            .notes
            .push(format!("The run stopped at the start barrier: {error}."));
        if let Err(e) = self.save() {
            return Err(anyhow::Error::from(e).context(error.to_string()));
        }
        Err(error.into())
    }

    /// Closes the run: the end of the environment, the verdicts, every export written once,
    /// the summary printed, and the exit code.
    pub fn finish(self, tool: &dyn ToolReport) -> anyhow::Result<Summary> {
        let Recording {
            mut report,
            results,
            progress,
            interrupt,
            quiet,
        } = self;
        if interrupt.load(Ordering::SeqCst)
            && !report
                .notes
                .iter()
                .any(|n| n.starts_with("The run was interrupted"))
        {
            report.notes.push(interrupted_note());
        }
        if interrupt.load(Ordering::SeqCst) {
            mark_stopped(&mut report);
        }
        report.environment.loadavg_end = Some(loadavg());
        if let Some(calibration) = &mut report.environment.calibration {
            calibration.end = Some(crate::calibration::probe());
        }
        report.finished_at = Some(crate::clock::now_rfc3339());
        drop(progress);
        publish(report, &results, tool, quiet)
    }
}

/// A worker interrupted after its last meeting (no meeting told the others): its part is
/// still marked stopped, so `merge` refuses it at once rather than add a window cut short.
fn mark_stopped(report: &mut Report) {
    let Some(worker) = report.worker.as_mut() else {
        return;
    };
    if let Some(barrier) = worker.barrier.as_mut()
        && barrier.failure.is_none()
    {
        barrier.failure = Some(format!(
            "worker {} was interrupted ({}) after its last meeting",
            worker.index,
            crate::interrupt::cause()
        ));
    }
}

/// Where a run's results go: `--output`, else `results/<tool>-<suite>-<UTC timestamp>/`.
pub fn results_path(tool: Tool, common: &CommonOpts) -> PathBuf {
    common.output.clone().unwrap_or_else(|| {
        let now = crate::clock::now_rfc3339();
        ResultsDir::default_path(tool.name, tool.suite, &crate::clock::compact(&now))
    })
}

/// Where fork `fork` of the run in `dir` writes its results: `dir/forks/K`.
pub fn fork_folder(dir: &Path, fork: u32) -> PathBuf {
    dir.join("forks").join(fork.to_string())
}

/// Where embedded systems keep their data: the run's own folder, which for a fork is the one
/// holding its `forks/K` ([`fork_folder`]), so every fork opens what the first one made.
fn data_folder(results: &Path, common: &CommonOpts) -> PathBuf {
    match (common.fork, results.parent().and_then(Path::parent)) {
        (1.., Some(run)) => run.to_owned(),
        _ => results.to_owned(),
    }
}

/// The end of every finished run, in one process or made of forks: the verdicts, every export
/// written once, the summary printed, and the exit code.
pub fn publish(
    mut report: Report,
    results: &ResultsDir,
    tool: &dyn ToolReport,
    quiet: bool,
) -> anyhow::Result<Summary> {
    let judgement = tool.judge(&report);
    report.verdicts = judgement.verdicts;
    report.no_verdicts = judgement.no_verdicts;
    results.write_exports(&report, &exporters(tool))?;
    println!("{}", crate::redact::scrub(&tool.terminal(&report)));
    if !quiet {
        eprintln!("results: {}", results.path().display());
    }
    Ok(Summary {
        exit: Exit::of(&report),
        results_dir: results.path().to_owned(),
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::SharedReport;
    use crate::results::Status;
    use crate::testing::refusal;
    use clap::Parser;

    #[derive(Parser, Serialize)]
    struct Cli {
        #[command(flatten)]
        common: CommonOpts,
    }

    const TOOL: Tool = Tool {
        name: "test-bench",
        version: "0.0.0",
        suite: "unit",
    };

    fn start(dir: &Path) -> Lifecycle {
        let cli = Cli::parse_from(["t", "--quiet", "--output", dir.to_str().unwrap()]);
        Lifecycle::start(TOOL, &cli.common, &cli, Arc::new(AtomicBool::new(false))).unwrap()
    }

    fn system(name: &str, location: Location, data_dir: Option<&Path>) -> SystemInfo {
        SystemInfo {
            name: name.into(),
            location,
            data_dir: data_dir.map(|d| d.display().to_string()),
            ..SystemInfo::default()
        }
    }

    #[test]
    fn a_run_writes_every_export_and_exits_by_its_cells() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let data = tempfile::tempdir().unwrap();
        let lifecycle = start(&out);
        assert!(lifecycle.environment.durable_write_floor_ns.is_some());
        let mut run = lifecycle
            .begin(Begin {
                section: "s".into(),
                systems: vec![
                    system("local", Location::Local, Some(data.path())),
                    system("far", Location::Remote, None),
                ],
                ..Begin::default()
            })
            .unwrap();
        assert_eq!(run.report.reference.as_deref(), Some("local"));
        assert!(run.report.systems[0].durable_write_floor_ns.is_some());
        assert!(run.report.systems[1].durable_write_floor_ns.is_none());
        assert!(run.report.systems[1].not_measured[0].contains("another host"));
        let mut cell = Cell::new("w", "far", "ops/s", 1, 1);
        cell.status = Status::Timeout;
        run.record(cell).unwrap();
        let saved: Report =
            serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
        assert_eq!(saved.cells.len(), 1, "a cell is on disk once recorded");
        let summary = run.finish(&SharedReport).unwrap();
        assert_eq!(summary.exit, Exit::NotAllOk);
        assert!(summary.report.finished_at.is_some());
        for file in ["results.json", "report.md"] {
            assert!(out.join(file).exists(), "{file}");
        }
    }

    #[test]
    fn an_unreadable_password_file_stops_the_run_before_any_folder_exists() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let missing = dir.path().join("missing.pw");
        let file = format!("pg={}", missing.display());
        let cli = Cli::parse_from([
            "t",
            "--quiet",
            "--output",
            out.to_str().unwrap(),
            "--target",
            "pg=postgres://u@127.0.0.1/db",
            "--password-file",
            &file,
        ]);
        let error = refusal(Lifecycle::start(
            TOOL,
            &cli.common,
            &cli,
            Arc::new(AtomicBool::new(false)),
        ));
        assert!(
            error.starts_with(&format!("--password-file {file}: cannot read it")),
            "{error}"
        );
        assert!(!out.exists());
        std::fs::write(&missing, "zq-lifecycle-pw\n").unwrap();
        let lifecycle =
            Lifecycle::start(TOOL, &cli.common, &cli, Arc::new(AtomicBool::new(false))).unwrap();
        let (password, _) = lifecycle
            .secrets()
            .password(&cli.common.targets[0])
            .unwrap();
        assert_eq!(password.expose(), "zq-lifecycle-pw");
    }

    #[test]
    fn a_secret_read_from_a_file_never_reaches_the_results_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let secret = "zq-never-written-7f3a";
        let pw = dir.path().join("pg.pw");
        std::fs::write(&pw, format!("{secret}\n")).unwrap();
        let file = format!("pg={}", pw.display());
        let cli = Cli::parse_from([
            "t",
            "--quiet",
            "--output",
            out.to_str().unwrap(),
            "--target",
            "pg=postgres://u@127.0.0.1/db",
            "--password-file",
            &file,
        ]);
        let lifecycle =
            Lifecycle::start(TOOL, &cli.common, &cli, Arc::new(AtomicBool::new(false))).unwrap();
        // A careless target: the URL with the password as its "redacted" URL, the secret in a
        // reason and a note. The writer replaces it wherever it stands.
        let url = lifecycle
            .secrets()
            .url_with_password(&cli.common.targets[0]);
        assert!(url.contains(secret));
        let mut system = system("pg", Location::Local, None);
        system.url_redacted = url;
        let mut run = lifecycle
            .begin(Begin {
                systems: vec![system],
                notes: vec![format!("login as u/{secret} worked")],
                ..Begin::default()
            })
            .unwrap();
        let mut cell = Cell::new("w", "pg", "ops/s", 1, 1);
        cell.status = Status::Error;
        cell.reason = Some(format!("password authentication failed for {secret}"));
        run.record(cell).unwrap();
        run.finish(&SharedReport).unwrap();
        crate::testing::assert_no_secret(&out, b"", b"", secret);
    }

    #[test]
    fn an_abandoned_run_leaves_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let error = start(&out).abandon(anyhow::anyhow!("bad input"));
        assert_eq!(error.to_string(), "bad input");
        assert!(!out.exists());
    }

    #[test]
    fn an_interrupted_run_says_so_once() {
        let dir = tempfile::tempdir().unwrap();
        let lifecycle = start(dir.path());
        lifecycle.interrupt.store(true, Ordering::SeqCst);
        let mut run = lifecycle.begin(Begin::default()).unwrap();
        assert!(run.interrupted());
        run.report
            .notes
            .push("The run was interrupted during ingest.".into());
        let summary = run.finish(&SharedReport).unwrap();
        let notes = &summary.report.notes;
        assert_eq!(
            notes
                .iter()
                .filter(|n| n.starts_with("The run was interrupted"))
                .count(),
            1
        );
        assert_eq!(summary.exit, Exit::AllOk);
    }
}
