//! `mqtt-bench compare` and `mqtt-bench report` on two real runs of the binary with no subcommand
//! (the embedded broker, three short rounds each), and the report of a real run rendered in chromium.

use common::testing::tooling::Tool;

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    Tool {
        bin: env!("CARGO_BIN_EXE_mqtt-bench"),
        quick: "--scenarios qos1,qos0 --duration 300ms --sweep 2k,5k --latency-rate 1k \
                --subscribers 4 --ceiling 30s",
        ..Tool::default()
    }
    .assert_two_runs(dir.path());
}
