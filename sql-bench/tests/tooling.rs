//! `sql-bench compare` and `sql-bench report` on two real runs of the binary with no subcommand
//! (the CRUD suite on an embedded SQLite file, three short rounds each), and the report of a real run rendered in chromium.

use common::testing::tooling::Tool;

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    Tool {
        bin: env!("CARGO_BIN_EXE_sql-bench"),
        before: "crud",
        quick: "--duration 200ms --connections 2",
        ..Tool::default()
    }
    .assert_two_runs(dir.path());
}
