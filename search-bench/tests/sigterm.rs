//! SIGTERM (what Kubernetes sends a pod it stops) ends a run as Ctrl-C does: the process exits
//! on its own, what was measured is kept, and the run says it was interrupted.

mod support;

use common::testing::sigterm::assert_sigterm_keeps_the_run;

#[test]
fn sigterm_keeps_what_was_measured_and_marks_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = support::args(&out, &["--duration", "2s", "--rounds", "3", "--forks", "1"]);
    assert_sigterm_keeps_the_run(env!("CARGO_BIN_EXE_search-bench"), &args, &out);
}
