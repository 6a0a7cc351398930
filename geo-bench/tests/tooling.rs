//! `geo-bench compare` and `geo-bench report` on two real runs of the binary with no subcommand
//! (the embedded SQLite R*Tree, three short rounds each), and the report of a real run rendered
//! in chromium.
//! The book's reference page of `geo-bench` is checked against its `--help` here too.

use common::testing::tooling::Tool;

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    Tool {
        bin: env!("CARGO_BIN_EXE_geo-bench"),
        quick: "--duration 150ms --connections 2 --events 3000 --queries 25 \
                --batch-sizes 1,100 --clients 1",
        files: &["insert-curve.svg", "hdr/insert-b1-c1--sqlite.hlog"],
        stdout_says: &["insert"],
        ..Tool::default()
    }
    .assert_two_runs(dir.path());
}

/// The book's reference page (docs/src/reference/geo-bench.md) is what `geo-bench --help` and each
/// subcommand's `--help` print now.
#[test]
fn the_reference_page_is_the_help() {
    common::reference::assert_page(
        common::cli::tool_command::<geo_bench::Opts>(geo_bench::EXAMPLES),
        env!("CARGO_MANIFEST_DIR"),
    );
}
