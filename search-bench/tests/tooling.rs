//! `search-bench compare` and `search-bench report` on two real runs of the binary with no subcommand
//! (an embedded tantivy index, three short rounds each), the report of a real run rendered in chromium,
//! and what `k8s-manifest` refuses.
//! The book's reference page of `search-bench` is checked against its `--help` here too.

use common::testing::tooling::Tool;

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    Tool {
        bin: env!("CARGO_BIN_EXE_search-bench"),
        quick: "--docs 3000 --queries 48 --duration 200ms --connections 2 --ingest-threads 2",
        ..Tool::default()
    }
    .assert_two_runs(dir.path());
}

/// A manifest for the embedded tantivy default, whose pods would all exit 2, is refused with
/// the run's own line; one for a server is printed.
#[test]
fn k8s_manifest_refuses_the_embedded_default_with_the_runs_own_line() {
    let manifest = |args: &[&str]| {
        common::testing::tooling::manifest("search-bench", &search_bench::TOOLING, args)
    };
    let error = format!("{:#}", manifest(&[]).unwrap_err());
    assert!(
        error.starts_with(
            "--worker-count 2: `tantivy` is an embedded tantivy index inside each process"
        ),
        "{error}"
    );
    assert!(manifest(&["--target", "http://search.example:9200"]).is_ok());
}

/// The book's reference page (docs/src/reference/search-bench.md) is what `search-bench --help` and each
/// subcommand's `--help` print now.
#[test]
fn the_reference_page_is_the_help() {
    common::reference::assert_page(
        common::cli::tool_command::<search_bench::Opts>(search_bench::EXAMPLES),
        env!("CARGO_MANIFEST_DIR"),
    );
}
