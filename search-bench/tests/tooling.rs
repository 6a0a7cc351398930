//! `search-bench compare` and `search-bench report` on two real runs of the binary with no subcommand
//! (an embedded tantivy index, three short rounds each), and the report of a real run rendered in chromium.

use std::path::Path;

use common::testing::tooling::{assert_compare_and_report, run_bin};

const BIN: &str = env!("CARGO_BIN_EXE_search-bench");

/// Three measured rounds (a verdict needs three a side) and short windows.
const QUICK: &[&str] = &[
    "--quiet",
    "--docs",
    "3000",
    "--queries",
    "48",
    "--duration",
    "200ms",
    "--rounds",
    "3",
    "--warmup",
    "1",
    "--connections",
    "2",
    "--ingest-threads",
    "2",
];

fn run(output: &Path) {
    let mut args = vec!["--output", output.to_str().unwrap()];
    args.extend_from_slice(QUICK);
    let ran = run_bin(Path::new(BIN), &args);
    // 1: the run finished with a cell that is not ok (a loaded machine can do that); compare
    // and report take such a run as they take any other.
    assert!(matches!(ran.code, Some(0 | 1)), "{ran:#?}");
}

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&a);
    run(&b);
    for file in ["results.csv", "report.html", "report.md"] {
        assert!(a.join(file).is_file(), "{file}");
    }
    assert_compare_and_report(Path::new(BIN), &a, &b, &dir.path().join("scratch"));
    common::testing::assert_html_renders(&a);
}
