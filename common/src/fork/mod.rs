//! `--forks N`: the process, not the round, is the unit of replication. Two processes of one
//! binary with the same flags can land in different states of the machine for their whole
//! lives (where the kernel placed their threads and the server's, what the allocator got), so
//! rounds inside one process understate the variance between runs (JMH's forks; hyperfine
//! times whole processes for the same reason). The parent re-executes the tool N times, one
//! fork after another, each with the same options, `--fork K` and its own results folder under
//! `forks/K`; each fork opens its own connections, warms up and measures, in the order that
//! continues the alternation of the one before. The data is prepared once: the first fork
//! makes and verifies it, the later ones verify it from the engine and measure on it (an
//! embedded engine's files live in the run's folder, not the fork's), the last drops it
//! (`scale::Worker::prepares` / `cleans_up`). A tool whose preparation is itself measured (a
//! YCSB load, a measured ingest, an index build) prepares in every fork. The parent then
//! makes one report of them ([`combine`]), judges it and writes every export, as a run in one
//! process does.

mod combine;

pub use combine::{Fork, combine, combine_cell};

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use anyhow::Context;

use crate::exit::Exit;
use crate::export::ToolReport;
use crate::options::CommonOpts;
use crate::results::ForkRun;
use crate::run::{Summary, Tool};
use crate::writer::ResultsDir;

/// A tool's parsed command line, asked whether it is a run that forks.
pub trait Forking {
    /// The tool and the common options of a run that may fork (the benchmark itself, not a
    /// helper command such as computing ground truth); `None` for anything else.
    fn forking(&self) -> Option<(Tool, &CommonOpts)>;
}

/// Whether this process starts the forks: two or more asked, not itself a fork, and one
/// machine (each worker of a run of several is one process: `merge` adds them up).
pub fn starts_forks(common: &CommonOpts) -> bool {
    common.forks >= 2 && common.fork == 0 && common.worker_count == 1
}

/// The arguments without `--output DIR` and `--forks N` (in either spelling), which each fork
/// is given anew.
fn without_own_flags(args: Vec<OsString>) -> Vec<OsString> {
    let mut kept = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let text = arg.to_string_lossy();
        if text == "--output" || text == "--forks" || text == "--fork" {
            skip_value = true;
            continue;
        }
        if ["--output=", "--forks=", "--fork="]
            .iter()
            .any(|p| text.starts_with(p))
        {
            continue;
        }
        kept.push(arg);
    }
    kept
}

/// `exit 0`, `exit 2`, `killed by signal 9`.
fn ended(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "ended".into(),
    }
}

/// Ctrl-C or SIGTERM to the parent: the fork running is asked to stop as Ctrl-C asks a run
/// (it finishes its window and writes its report), no further fork starts, and the run's
/// report is made of what was measured. A second signal stops the fork and the parent at once.
fn watch_signals(child: Arc<AtomicI32>) -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let Some(mut signals) = crate::interrupt::Signals::listen() else {
                return;
            };
            for press in 0.. {
                signals.next().await;
                set.store(true, Ordering::SeqCst);
                let pid = child.load(Ordering::SeqCst);
                if pid > 0 {
                    #[allow(unsafe_code)]
                    // SAFETY: kill(2) with a PID this process started and a valid signal.
                    unsafe {
                        libc::kill(pid, libc::SIGINT);
                    }
                }
                if press == 0 {
                    eprintln!(
                        "\ninterrupted: the fork running finishes its window and writes its report; no further fork starts (again to quit now)"
                    );
                } else {
                    std::process::exit(130);
                }
            }
        });
    });
    flag
}

/// Runs the forks of `tool` and makes one run of them (see the module's documentation).
pub fn run_forks(
    tool: Tool,
    common: &CommonOpts,
    renderer: &dyn ToolReport,
) -> anyhow::Result<Summary> {
    let count = common.forks;
    let dir = crate::run::results_path(tool, common);
    let results = ResultsDir::create(&dir)?;
    let forks_dir = dir.join("forks");
    std::fs::create_dir_all(&forks_dir)
        .with_context(|| format!("cannot create {}", forks_dir.display()))?;
    let exe = std::env::current_exe().context("cannot find this program to start its forks")?;
    let args = without_own_flags(std::env::args_os().skip(1).collect());
    let child = Arc::new(AtomicI32::new(0));
    let interrupt = watch_signals(child.clone());
    let mut forks: Vec<Fork> = Vec::new();
    for fork in 1..=count {
        if interrupt.load(Ordering::SeqCst) {
            break;
        }
        let out = crate::run::fork_folder(&dir, fork);
        let stdout = std::fs::File::create(forks_dir.join(format!("{fork}.stdout.txt")))?;
        let mut process = Command::new(&exe)
            .args(&args)
            .arg("--output")
            .arg(&out)
            .arg("--forks")
            .arg(count.to_string())
            .arg("--fork")
            .arg(fork.to_string())
            .stdout(Stdio::from(stdout))
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start fork {fork} ({})", exe.display()))?;
        let pid = process.id();
        child.store(pid as i32, Ordering::SeqCst);
        if !common.quiet {
            eprintln!(
                "fork {fork}/{count} · process {pid} · results in {}",
                out.display()
            );
        }
        let status = process.wait().context("waiting for a fork")?;
        child.store(0, Ordering::SeqCst);
        let report = read_part(&out, tool.name);
        if fork == 1 && report.is_none() && status.code() == Some(i32::from(Exit::BadInput.code()))
        {
            // Bad input: the fork said why on one line and made nothing; neither does the run.
            let _ = std::fs::remove_dir_all(&forks_dir);
            results.discard();
            std::process::exit(i32::from(Exit::BadInput.code()));
        }
        forks.push(Fork {
            run: ForkRun {
                fork,
                pid,
                ended: ended(status),
                started_at: report.as_ref().map(|r| r.started_at.clone()),
                finished_at: report.as_ref().and_then(|r| r.finished_at.clone()),
                results: format!("forks/{fork}"),
                calibration: report.as_ref().and_then(|r| r.environment.calibration),
            },
            report,
        });
    }
    if forks.iter().all(|f| f.report.is_none()) {
        let first = forks
            .first()
            .map_or("never started".into(), |f| f.run.ended.clone());
        anyhow::bail!("no fork wrote a report (fork 1: {first}); nothing was measured");
    }
    let mut report = combine(&forks, count);
    if let Some(options) = report.options.as_object_mut() {
        options.insert("fork".into(), serde_json::json!(0));
        options.insert(
            "output".into(),
            serde_json::Value::String(dir.display().to_string()),
        );
    }
    if interrupt.load(Ordering::SeqCst)
        && !report
            .notes
            .iter()
            .any(|n| n.starts_with("The run was interrupted"))
    {
        report.notes.push(format!(
            "The run was interrupted after {} of {count} forks; cells not measured in full say so.",
            forks.len()
        ));
    }
    crate::run::publish(report, &results, renderer, common.quiet)
}

/// A fork's report, when it wrote one.
fn read_part(dir: &Path, tool: &str) -> Option<crate::results::Report> {
    crate::load::load(dir, tool).ok().map(|l| l.report)
}

/// The benchmark of a tool whose parsed options are `opts`: in forks when they ask for two or
/// more, else in this process (`run`).
pub fn run_or_fork<P: Forking>(
    opts: P,
    renderer: &dyn ToolReport,
    run: impl FnOnce(P) -> anyhow::Result<Summary>,
) -> anyhow::Result<Summary> {
    if let Some((tool, common)) = opts.forking().filter(|(_, c)| starts_forks(c)) {
        crate::redact::install_panic_hook();
        return run_forks(tool, common, renderer);
    }
    run(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fork_gets_the_parents_arguments_without_its_output_and_fork_count() {
        let args: Vec<OsString> = [
            "crud",
            "--output",
            "x",
            "--rounds",
            "2",
            "--forks=3",
            "--quiet",
            "--fork",
            "1",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let kept: Vec<String> = without_own_flags(args)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["crud", "--rounds", "2", "--quiet"]);
    }
}
