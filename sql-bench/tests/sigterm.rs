//! SIGTERM (what Kubernetes sends a pod it stops) ends a run as Ctrl-C does: the process exits
//! on its own, what was measured is kept, and the run says it was interrupted.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::testing::read_report;

#[test]
fn sigterm_keeps_what_was_measured_and_marks_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut run = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args([
            "crud",
            "--workloads",
            "write-1c,read-2c",
            "--connections",
            "2",
            "--duration",
            "2s",
            "--warmup",
            "0",
            "--rounds",
            "3",
            "--forks",
            "1",
            "--quiet",
            "--output",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Once the first cell is on disk, the run is measuring: stop it as Kubernetes would.
    let began = Instant::now();
    while !std::fs::read_to_string(out.join("results.json"))
        .is_ok_and(|t| t.contains("\"workload\""))
    {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "no cell written in 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ended = run.wait().unwrap();
    assert!(
        ended.code().is_some(),
        "the run exited on its own: {ended:?}"
    );
    let report = read_report(&out);
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
}
