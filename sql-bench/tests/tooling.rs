//! `sql-bench compare` and `sql-bench report` on two real runs of the binary with no subcommand
//! (the CRUD suite on an embedded SQLite file, three short rounds each), the report of a real run rendered in
//! chromium, and what `k8s-manifest` refuses.
//! The book's reference page of `sql-bench` is checked against its `--help` here too.

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

/// `k8s-manifest` with the benchmark's arguments after `--` and `--workers 2`.
fn manifest(args: &[&str]) -> anyhow::Result<common::exit::Exit> {
    common::testing::tooling::manifest("sql-bench", &sql_bench::TOOLING, args)
}

/// A manifest whose pods would all exit 2 is refused with the line the suite's run refuses
/// with (checked as the run checks, before anything is touched: no server is reached here).
#[test]
fn k8s_manifest_refuses_what_the_suite_refuses_with_its_own_line() {
    let embedded = "sqlite: an embedded engine lives inside each worker's process, so 2 workers would measure 2 separate databases";
    for (args, expected) in [
        (vec!["crud", "--workloads", "read-4c"], embedded),
        (vec!["ycsb", "--workload", "a"], embedded),
        (
            vec![
                "crud",
                "--target",
                "postgres://db.example/b",
                "--workloads",
                "write-1c",
            ],
            "write 1c: 1 connection(s) cannot be shared by 2 workers",
        ),
        (
            vec!["app", "--rows", "1000"],
            "--worker-count 2: sql-bench app times one client's requests, one at a time, over one data set",
        ),
        (
            vec!["crud", "--rounds", "x"],
            "invalid value 'x' for '--rounds",
        ),
    ] {
        let error = format!("{:#}", manifest(&args).unwrap_err());
        assert!(error.contains(expected), "{args:?}: {error}");
        assert!(!error.contains('\n'), "one line: {error}");
    }
    let valid = [
        "crud",
        "--target",
        "postgres://db.example/b",
        "--workloads",
        "read-4c",
    ];
    assert!(manifest(&valid).is_ok());
}

/// The book's reference page (docs/src/reference/sql-bench.md) is what `sql-bench --help` and each
/// subcommand's `--help` print now.
#[test]
fn the_reference_page_is_the_help() {
    common::reference::assert_page(sql_bench::command(), env!("CARGO_MANIFEST_DIR"));
}
