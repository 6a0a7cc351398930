//! `sql-bench crud` end to end, in-process, against the embedded SQLite and the real
//! PostgreSQL and MariaDB servers the test command starts on loopback.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::results::{Location, Status};
use common::testing::{assert_all_ok, cell, system_names};
use support::*;

#[test]
fn the_embedded_default_measures_every_workload_and_writes_a_results_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let summary = run(&args("crud", &out, &[])).unwrap();
    assert_eq!(summary.exit, Exit::AllOk);
    assert_matches_schema(&out);
    let report = &summary.report;
    let names: Vec<&str> = report.cells.iter().map(|c| c.workload.as_str()).collect();
    assert_eq!(names, ["write 1c", "write 4c", "read 4c", "mixed 4c"]);
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
        assert_eq!(cell.system, "sqlite");
        let throughput = cell.throughput.as_ref().unwrap();
        assert_eq!(
            throughput.rounds.len(),
            2,
            "warm-up discarded, two rounds kept"
        );
        assert!(throughput.median > 0.0);
        assert!(cell.latency_ns.unwrap().p99 >= cell.latency_ns.unwrap().p50);
        assert!(cell.counts.ok > 0 && cell.counts.error == 0);
        assert!(cell.histogram_b64.is_some() && cell.client_cpu_ns_per_op.is_some());
        assert!(
            cell.service_time_ns.is_none(),
            "closed loop has no separate service time"
        );
    }
    let sqlite = &report.systems[0];
    assert_eq!(sqlite.verified["journal_mode"], "wal");
    assert_eq!(sqlite.verified["synchronous"], "2");
    assert!(sqlite.version.starts_with("SQLite 3."));
    assert!(sqlite.durable_write_floor_ns.is_some());
    assert_eq!(sqlite.location, Location::Embedded);
    assert!(sqlite.not_measured.is_empty(), "{:?}", sqlite.not_measured);
    assert!(report.data.as_ref().unwrap().checksum.len() == 16);

    let json = read_json(&out);
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["tool"], "sql-bench");
    assert_eq!(json["suite"], "crud");
    assert_eq!(json["options"]["duration_s"], 0.3);
    assert_eq!(json["options"]["rounds"], 2);
    assert!(json["environment"]["cores"].as_u64().unwrap() >= 1);
    assert!(
        json["environment"]["durable_write_floor_ns"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(json["finished_at"].is_string());
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("| write 1c |"), "{markdown}");
    assert!(
        markdown.contains("C0"),
        "the section names the durability configuration"
    );
    assert!(out.join("throughput.svg").exists());
}

#[test]
fn postgres_mariadb_and_sqlite_compare_in_one_round_with_verified_durability() {
    let Some(([pg, my], dir)) = on_servers([POSTGRES, MYSQL]) else {
        return;
    };
    // Three rounds: the fewest that give a verdict.
    let summary = run(&args(
        "crud",
        dir.path(),
        &[
            "--target", &pg, "--target", &my, "--target", "sqlite", "--rounds", "3",
        ],
    ))
    .unwrap();
    let report = &summary.report;
    assert_all_ok(&summary, dir.path());
    assert_eq!(
        system_names(report),
        ["postgres", "mariadb", "sqlite"],
        "unnamed systems are named after their engine"
    );
    assert_eq!(report.reference.as_deref(), Some("postgres"));
    for system in &report.systems[..2] {
        // Local servers: each floor is measured in the data directory the server reported.
        assert_eq!(system.location, Location::Local, "{}", system.name);
        assert!(system.data_dir.is_some(), "{}", system.name);
        assert!(system.durable_write_floor_ns.is_some(), "{}", system.name);
    }

    let postgres = &report.systems[0];
    assert!(
        postgres.version.starts_with("PostgreSQL 15"),
        "{}",
        postgres.version
    );
    for (setting, value) in [
        ("fsync", "on"),
        ("synchronous_commit", "on"),
        ("synchronous_standby_names", ""),
    ] {
        assert_eq!(postgres.verified[setting], value, "{setting}");
    }
    assert!(postgres.verified.contains_key("wal_sync_method"));
    assert_eq!(
        postgres.verified["crud_read.primary_key"],
        "k (btree, pg_index)"
    );
    assert_eq!(postgres.verified["crud_write.persistence"], "logged");
    assert!(
        !postgres.url_redacted.contains("fairbench@"),
        "{}",
        postgres.url_redacted
    );
    assert!(postgres.url_redacted.contains(":***@"));

    let maria = &report.systems[1];
    assert!(maria.version.contains("MariaDB"), "{}", maria.version);
    assert_eq!(maria.verified["innodb_flush_log_at_trx_commit"], "1");
    assert_eq!(maria.verified["log_bin"], "ON");
    assert_eq!(maria.verified["sync_binlog"], "1");
    assert_eq!(maria.verified["crud_write.engine"], "InnoDB");

    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
    }
    // Interleaved, the order alternating each round: read back from when each window opened.
    assert_eq!(common::testing::assert_systems_alternate(report), 4);
    // Every non-reference ok cell is judged against the reference on throughput, p50 and p99
    // (4 workloads × 2 systems × 3 metrics): a verdict, or the reason there is none.
    assert_eq!(report.verdicts.len() + report.no_verdicts.len(), 4 * 2 * 3);
    assert!(!report.verdicts.is_empty());
    for v in &report.verdicts {
        assert_eq!(v.reference, "postgres");
        assert!(
            v.interval[0] <= v.ratio * 1.000_001 && v.ratio <= v.interval[1] * 1.000_001,
            "the ratio of medians lies in its interval: {v:?}"
        );
        assert!(v.confidence >= 0.9 - 1e-9, "{v:?}");
    }
    // Tables are fairbench's own, and are dropped after the run.
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench'"
        ),
        "0"
    );
    assert_eq!(
        mariadb(
            &my,
            "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'fairbench'"
        ),
        "0"
    );
}

#[test]
fn the_servers_cpu_stands_beside_the_clients_read_from_postgres_backends_and_in_process_for_sqlite()
{
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let summary = run(&args(
        "crud",
        dir.path(),
        &[
            "--target",
            &pg,
            "--target",
            "sqlite",
            "--workloads",
            "read-4c",
        ],
    ))
    .unwrap();
    assert_matches_schema(dir.path());
    let postgres = cell(&summary.report, "read 4c", "postgres");
    assert_eq!(postgres.status, Status::Ok, "{postgres:?}");
    let source = postgres.server_cpu_source.as_deref().unwrap();
    assert!(source.starts_with("process tree of PID"), "{source}");
    // The work is done by the backends, children of the postmaster: the postmaster alone
    // spends next to nothing while four connections read.
    let per_op = postgres.server_cpu_ns_per_op.unwrap();
    assert!(per_op > 1_000.0, "server CPU per operation {per_op} ns");
    let cores = postgres.server_cpu_cores.unwrap();
    assert!(cores > 0.05, "{postgres:?}");
    let client = postgres.client_cpu_ns_per_op.unwrap();
    eprintln!(
        "postgres read 4c: server {per_op:.0} ns/op on {cores:.2} cores, client {client:.0} ns/op"
    );
    let sqlite = cell(&summary.report, "read 4c", "sqlite");
    assert_eq!(sqlite.server_cpu_source.as_deref(), Some("in process"));
    assert_eq!(
        (sqlite.server_cpu_ns_per_op, sqlite.server_cpu_cores),
        (None, None)
    );
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        markdown.contains("CPU per operation: client / server"),
        "{markdown}"
    );
    assert!(markdown.contains(" / in process |"), "{markdown}");
}

#[test]
fn open_loop_measures_from_the_intended_start_and_reports_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let summary = run(&args(
        "crud",
        &out,
        &[
            "--workloads",
            "read-4c",
            "--rate",
            "2k",
            "--duration",
            "500ms",
        ],
    ))
    .unwrap();
    let cell = cell(&summary.report, "read 4c", "sqlite");
    assert_eq!(cell.status, Status::Ok, "{cell:?}");
    assert_eq!(cell.target_rate, Some(2000.0));
    let achieved = cell.achieved_rate.unwrap();
    assert!((1_900.0..=2_100.0).contains(&achieved), "{achieved}");
    assert!(cell.service_time_ns.is_some() && cell.schedule_lag_ns.is_some());
    assert!(cell.missed_ticks.is_some());
    // Latency from the intended start can only be longer than the service time.
    assert!(cell.latency_ns.unwrap().p50 >= cell.service_time_ns.unwrap().p50);
}

#[test]
fn a_rate_an_fsync_bound_write_cannot_reach_is_the_systems_limit_not_the_clients() {
    let dir = tempfile::tempdir().unwrap();
    let summary = run(&args(
        "crud",
        dir.path(),
        &["--workloads", "write-1c", "--rate", "1M"],
    ))
    .unwrap();
    let cell = cell(&summary.report, "write 1c", "sqlite");
    // One durable commit at a time cannot take a million a second; the client waited on the
    // disk meanwhile, so the shortfall is the system's result.
    assert_eq!(cell.status, Status::Ok, "{cell:?}");
    assert!(
        cell.labels
            .iter()
            .any(|l| l == common::protocol::TARGET_NOT_REACHED),
        "{:?}",
        cell.labels
    );
    assert!(
        cell.achieved_rate.unwrap() < 0.95e6,
        "{:?}",
        cell.achieved_rate
    );
    let busy = cell.client_busy.unwrap();
    assert!(busy < common::protocol::CLIENT_LIMIT, "{busy}");
    assert_eq!(summary.exit, Exit::AllOk);
}

#[test]
fn ctrl_c_stops_the_run_and_still_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = interrupt.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        flag.store(true, Ordering::SeqCst);
    });
    let summary = run_with(&args("crud", &out, &["--duration", "1s"]), interrupt).unwrap();
    stopper.join().unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let report = &summary.report;
    assert!(
        report.notes.iter().any(|n| n.contains("interrupted")),
        "{:?}",
        report.notes
    );
    let incomplete = report
        .cells
        .iter()
        .filter(|c| c.status == Status::Error)
        .count();
    assert!(incomplete >= 3, "{:#?}", report.cells);
    assert!(
        report
            .cells
            .iter()
            .all(|c| c.status != Status::Error
                || c.reason.as_deref().unwrap().contains("incomplete"))
    );
    assert!(out.join("report.md").exists());
    assert!(read_json(&out)["finished_at"].is_string());
}

#[test]
fn a_durability_mismatch_is_refused_or_measured_and_labelled() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let unsafe_pg = format!("{pg}?options=-c%20synchronous_commit%3Doff");
    let target = format!("pg={unsafe_pg}");
    let summary = run(&args(
        "crud",
        &dir.path().join("refused"),
        &[
            "--workloads",
            "write-1c",
            "--target",
            &target,
            "--target",
            "sqlite",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let refused = cell(&summary.report, "write 1c", "pg");
    assert_eq!(refused.status, Status::Refused);
    assert!(
        refused
            .reason
            .as_deref()
            .unwrap()
            .contains("synchronous_commit=off"),
        "{:?}",
        refused.reason
    );
    assert_eq!(
        cell(&summary.report, "write 1c", "sqlite").status,
        Status::Ok
    );

    let only = run(&args(
        "crud",
        &dir.path().join("only"),
        &["--target", &target],
    ))
    .unwrap_err();
    assert!(
        format!("{only:#}").contains("no system can be measured"),
        "{only:#}"
    );
    assert!(!dir.path().join("only").exists(), "nothing is left behind");

    let out = dir.path().join("labelled");
    let labelled = run(&args(
        "crud",
        &out,
        &[
            "--workloads",
            "write-1c",
            "--target",
            &target,
            "--allow-unmatched-durability",
        ],
    ))
    .unwrap();
    let cell = cell(&labelled.report, "write 1c", "pg");
    assert_eq!(cell.status, Status::Ok);
    // The label names what does not match, so two engines unmatched differently never share a ratio.
    assert!(
        cell.labels.len() == 1 && cell.labels[0].starts_with("unmatched durability ("),
        "{:?}",
        cell.labels
    );
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("pg [unmatched durability ("),
        "{markdown}"
    );
}

#[test]
fn mariadb_without_a_durable_redo_log_is_refused() {
    let Some((my, dir)) = on_server(MYSQL) else {
        return;
    };
    mariadb(&my, "SET GLOBAL innodb_flush_log_at_trx_commit = 2");
    let result = run(&args(
        "crud",
        dir.path(),
        &["--workloads", "write-1c", "--target", &my],
    ));
    mariadb(&my, "SET GLOBAL innodb_flush_log_at_trx_commit = 1");
    let error = format!("{:#}", result.unwrap_err());
    assert!(
        error.contains("innodb_flush_log_at_trx_commit=2"),
        "{error}"
    );
}

#[test]
fn a_foreign_table_in_the_namespace_is_never_touched() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    psql(
        &pg,
        "CREATE SCHEMA IF NOT EXISTS fairbench; CREATE TABLE fairbench.crud_read (precious int); INSERT INTO fairbench.crud_read VALUES (7)",
    );
    let result = run(&args("crud", dir.path(), &["--target", &pg]));
    let left = psql(&pg, "SELECT precious FROM fairbench.crud_read");
    psql(&pg, "DROP TABLE fairbench.crud_read");
    let error = format!("{:#}", result.unwrap_err());
    assert!(
        error.contains("fairbench.crud_read exists but was not created by fairbench"),
        "{error}"
    );
    assert_eq!(left, "7", "the foreign table keeps its data");
}

#[test]
fn a_foreign_table_in_an_embedded_database_is_never_touched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("theirs.db");
    let theirs = rusqlite::Connection::open(&db).unwrap();
    theirs
        .execute_batch("CREATE TABLE fairbench_crud_read (precious INTEGER); INSERT INTO fairbench_crud_read VALUES (7);")
        .unwrap();
    let target = format!("sqlite:{}", db.display());
    let out = dir.path().join("out");
    let error = format!(
        "{:#}",
        run(&args("crud", &out, &["--target", &target])).unwrap_err()
    );
    assert!(
        error.contains("table fairbench_crud_read in ")
            && error.contains("exists but was not created by fairbench"),
        "{error}"
    );
    let left: i64 = theirs
        .query_row("SELECT precious FROM fairbench_crud_read", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 7, "the foreign table keeps its data");
}

#[test]
fn bad_input_is_one_clear_error_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let closed_port = common::testing::free_port();
    let unreachable = format!("postgres://fairbench:x@127.0.0.1:{closed_port}/postgres");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--workloads".into(), "delete-1c".into()],
            "unknown workload `delete-1c`",
        ),
        (
            vec!["--target".into(), unreachable.clone()],
            "cannot connect to postgres",
        ),
        (
            vec!["--target".into(), "redis://127.0.0.1:1".into()],
            "unknown scheme `redis`",
        ),
        (
            vec!["--target".into(), "postgres://127.0.0.1:notaport/db".into()],
            "is not a usable target",
        ),
        (
            vec!["--target".into(), "mysql://u@127.0.0.1:99999/db".into()],
            "is not a usable target",
        ),
        (
            vec!["--reference".into(), "nobody".into()],
            "--reference nobody names no target",
        ),
        (
            vec![
                "--target".into(),
                "sqlite".into(),
                "--target".into(),
                "sqlite".into(),
            ],
            "two targets are named `sqlite`",
        ),
    ];
    for (extra, expected) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let error = format!("{:#}", run(&args("crud", &out, &extra)).unwrap_err());
        assert!(error.contains(expected), "{extra:?}: {error}");
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(!out.exists(), "{extra:?} left {out:?} behind");
    }
    let error = format!(
        "{:#}",
        run(&args("crud", &out, &["--target", &unreachable])).unwrap_err()
    );
    assert!(error.contains("is the server running"), "{error}");
    // Values clap refuses before anything runs.
    for extra in [
        ["--connections", "0"],
        ["--duration", "0s"],
        ["--rate", "0"],
        ["--rounds", "-1"],
    ] {
        assert!(run(&args("crud", &out, &extra)).is_err(), "{extra:?}");
    }
    // An output folder that cannot be written.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let blocked = file.join("results");
    let error = format!("{:#}", run(&args("crud", &blocked, &[])).unwrap_err());
    assert!(error.contains("cannot use"), "{error}");
}

#[test]
fn a_wrong_password_is_refused_with_the_server_message() {
    let Some(pg) = server_url(POSTGRES) else {
        return;
    };
    let Some(my) = server_url(MYSQL) else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let error = format!(
        "{:#}",
        run(&args(
            "crud",
            &out,
            &["--target", &with_password(&pg, "wrong")]
        ))
        .unwrap_err()
    );
    assert!(error.contains("password authentication failed"), "{error}");
    assert!(
        !error.contains("wrong"),
        "the password is not printed: {error}"
    );
    let error = format!(
        "{:#}",
        run(&args(
            "crud",
            &out,
            &["--target", &with_password(&my, "wrong")]
        ))
        .unwrap_err()
    );
    assert!(error.contains("Access denied"), "{error}");
    assert!(!out.exists());
}

/// Several workers of a crud or ycsb run need a server they all reach and a connection each,
/// and a ycsb workload that deletes runs on one machine; the suites that do not run as
/// workers say so. Each refusal is one line, and no folder is left.
#[test]
fn worker_mode_refuses_an_embedded_engine_too_few_connections_and_the_other_suites() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let deletes = dir.path().join("deletes.toml");
    std::fs::write(
        &deletes,
        "description = \"reads and deletes\"\n[proportions]\nread = 0.9\ndelete = 0.1\n",
    )
    .unwrap();
    let deletes = deletes.to_str().unwrap();
    let server = ["--target", "postgres://fairbench@127.0.0.1:1/fairbench"];
    let barrier = format!("127.0.0.1:{}", common::testing::free_port());
    let workers = [
        "--worker-count",
        "2",
        "--barrier",
        &barrier,
        "--run-id",
        "r1",
    ];
    let cases: [(&str, Vec<&str>, &str); 6] = [
        (
            "crud",
            [
                &workers[..],
                &["--barrier-timeout", "1s", "--workloads", "read-4c"],
            ]
            .concat(),
            "sqlite: an embedded engine lives inside each worker's process, so 2 workers would measure 2 separate databases",
        ),
        (
            "crud",
            [&workers[..], &["--workloads", "read-4c,write-1c"]].concat(),
            "write 1c: 1 connection(s) cannot be shared by 2 workers",
        ),
        (
            "app",
            workers.to_vec(),
            "sql-bench app times one client's requests, one at a time, over one data set, so 2 client machines would measure nothing one does not",
        ),
        (
            "ycsb",
            [&workers[..], &["--workload", "a"]].concat(),
            "sqlite: an embedded engine lives inside each worker's process, so 2 workers would measure 2 separate databases",
        ),
        (
            "ycsb",
            [&workers[..], &server, &["--workload", deletes]].concat(),
            "and its deletes take the oldest record of one sequence that 2 workers cannot share",
        ),
        (
            "ycsb",
            [
                &workers[..],
                &server,
                &["--workload", "a", "--connections", "1"],
            ]
            .concat(),
            "the load's 1 connection(s) cannot be shared by 2 workers",
        ),
    ];
    for (suite, extra, expected) in cases {
        let error = format!("{:#}", run(&args(suite, &out, &extra)).unwrap_err());
        assert!(error.contains(expected), "{extra:?}: {error}");
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(!out.exists(), "{extra:?} left {out:?} behind");
    }
}
