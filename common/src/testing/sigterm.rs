//! SIGTERM mid-run, as Kubernetes stops a pod: the tool exits on its own, what was measured is
//! kept, the report is closed and says the run was interrupted by SIGTERM.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::results::Report;

/// Starts `bin` with `args` (writing into `out`), sends it SIGTERM once its first cell is on
/// disk, and checks how it ended (see the module). Returns the report it wrote.
pub fn assert_sigterm_keeps_the_run(bin: &str, args: &[&str], out: &Path) -> Report {
    let mut run = Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    while !std::fs::read_to_string(out.join("results.json"))
        .is_ok_and(|t| t.contains("\"workload\""))
    {
        if began.elapsed() > Duration::from_secs(120) {
            let _ = run.kill();
            panic!("no cell written in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let stopped = Instant::now();
    let ended = loop {
        if let Some(ended) = run.try_wait().unwrap() {
            break ended;
        }
        if stopped.elapsed() > Duration::from_secs(60) {
            let _ = run.kill();
            panic!("still running 60 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        ended.code().is_some(),
        "the run exited on its own: {ended:?}"
    );
    let report = super::read_report(out);
    assert!(report.finished_at.is_some(), "the report was closed");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.starts_with("The run was interrupted (SIGTERM)")),
        "{:?}",
        report.notes
    );
    assert!(!report.cells.is_empty());
    report
}
