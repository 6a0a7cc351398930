//! `vector-bench compare` and `vector-bench report` on two real runs of the binary with no subcommand
//! (usearch over a small generated dataset, three short rounds each), the report of a real run
//! rendered in chromium, and what `k8s-manifest` refuses.
//! The book's reference page of `vector-bench` is checked against its `--help` here too.

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

/// A manifest for an embedded index (the usearch default, or one named), whose pods would all
/// exit 2, is refused with the run's own line before anything is reached; one for a server is
/// printed.
#[test]
fn k8s_manifest_refuses_an_embedded_index_with_the_runs_own_line() {
    let manifest = |args: &[&str]| {
        common::testing::tooling::manifest("vector-bench", &vector_bench::TOOLING, args)
    };
    for args in [&[][..], &["--target", "mine=usearch"][..]] {
        let error = format!("{:#}", manifest(args).unwrap_err());
        let name = if args.is_empty() { "usearch" } else { "mine" };
        assert!(
            error.starts_with(&format!(
                "{name}: an embedded index lives inside each worker's process, so 2 workers would search 2 separate indexes"
            )),
            "{args:?}: {error}"
        );
        assert!(!error.contains('\n'), "one line: {error}");
    }
    assert!(manifest(&["--target", "pgvector=postgres://db.example/vec"]).is_ok());
}

/// The book's reference page (docs/src/reference/vector-bench.md) is what `vector-bench --help` and each
/// subcommand's `--help` print now.
#[test]
fn the_reference_page_is_the_help() {
    common::reference::assert_page(
        common::cli::tool_command::<vector_bench::Opts>(vector_bench::EXAMPLES),
        env!("CARGO_MANIFEST_DIR"),
    );
}
