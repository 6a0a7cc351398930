//! SIGTERM (what Kubernetes sends a pod it stops) ends a run as Ctrl-C does: the process exits
//! on its own, what was measured is kept, and the run says it was interrupted.

use common::testing::sigterm::assert_sigterm_keeps_the_run;

#[test]
fn sigterm_keeps_what_was_measured_and_marks_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [
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
    ];
    assert_sigterm_keeps_the_run(env!("CARGO_BIN_EXE_sql-bench"), &args, &out);
}
