//! `vector-bench compare` and `vector-bench report` on two real runs of the binary with no subcommand
//! (usearch over a small generated dataset, three short rounds each), and the report of a real run rendered in chromium.

use common::testing::tooling::Tool;

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    Tool {
        bin: env!("CARGO_BIN_EXE_vector-bench"),
        quick: "--rows 3000 --dims 32 --clusters 16 --queries 60 --ef 16,64 \
                --filters none,10pct --variants f32 --duration 200ms --connections 2",
        // Both runs share one ground-truth cache, as a user's runs would.
        shared_dir_flag: Some("--cache-dir"),
        ..Tool::default()
    }
    .assert_two_runs(dir.path());
}
