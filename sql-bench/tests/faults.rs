//! A real PostgreSQL that misbehaves: it loses writes, returns other data than it was given,
//! hangs, or dies in the middle of a run. Each must show as a recorded cell, never as a number.

mod support;

use std::time::{Duration, Instant};

use common::results::Status;
use common::testing::cell;
use common::testing::scratch::{Scratch, on_create};
use support::*;

/// Makes the function `write_fault()` run as a row trigger on crud's write table and
/// `read_fault()` on its read table when crud creates them.
fn attach_on_create(fault_functions: &str) -> String {
    let attach = on_create(
        "CREATE TABLE",
        "IF obj = 'fairbench.crud_write' THEN
           EXECUTE 'CREATE TRIGGER fault BEFORE INSERT ON fairbench.crud_write FOR EACH ROW EXECUTE FUNCTION public.write_fault()';
         ELSIF obj = 'fairbench.crud_read' THEN
           EXECUTE 'CREATE TRIGGER fault BEFORE INSERT ON fairbench.crud_read FOR EACH ROW EXECUTE FUNCTION public.read_fault()';
         END IF;",
    );
    format!("{fault_functions}\n{attach}")
}

#[test]
fn a_server_that_loses_writes_or_changes_data_gets_invalid_cells_not_figures() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let lying = Scratch::new(
        &pg,
        "fairbench_lying",
        &attach_on_create(
            "CREATE FUNCTION write_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
             CREATE FUNCTION read_fault() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF NEW.k = 500 THEN NEW.v := upper(NEW.v); END IF; RETURN NEW; END $$;",
        ),
    );
    let target = format!("liar={}", lying.url);
    let summary = run(&args("crud", dir.path(), &["--target", &target])).unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    for cell in &summary.report.cells {
        assert_eq!(cell.status, Status::Invalid, "{cell:?}");
        assert!(cell.usable_throughput().is_none());
    }
    let reason = |workload: &str| {
        cell(&summary.report, workload, "liar")
            .reason
            .clone()
            .unwrap()
    };
    assert!(
        reason("write 1c").contains("0 rows found after"),
        "{}",
        reason("write 1c")
    );
    assert!(
        reason("read 4c").contains("first: key 500"),
        "{}",
        reason("read 4c")
    );
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(markdown.contains("| write 1c | invalid |"), "{markdown}");
}

#[test]
fn a_window_that_hangs_past_the_ceiling_is_a_timeout_and_the_run_goes_on() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let slow = Scratch::new(
        &pg,
        "fairbench_slow",
        &attach_on_create(
            "CREATE FUNCTION write_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(4); RETURN NEW; END $$;
             CREATE FUNCTION read_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;",
        ),
    );
    let target = format!("slow={}", slow.url);
    let started = Instant::now();
    let summary = run(&args(
        "crud",
        dir.path(),
        &[
            "--target",
            &target,
            "--workloads",
            "write-1c,read-4c",
            "--ceiling",
            "1s",
        ],
    ))
    .unwrap();
    let write = &summary.report.cells[0];
    assert_eq!(write.status, Status::Timeout, "{write:?}");
    // The warm-up window's insert hangs past the ceiling: it is cancelled on the server, and
    // the cell is not retried in the measured rounds.
    let reason = write.reason.as_deref().unwrap();
    assert!(
        reason
            .contains("warm-up 1: 1 operations still running 1s after they started were cancelled"),
        "{reason}"
    );
    // The cancel request reached the server: no insert of this run is still sleeping there.
    let sleeping = common::testing::psql(
        &pg,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'fairbench_slow' AND state = 'active' AND query LIKE 'INSERT%'",
    );
    assert_eq!(sleeping.trim(), "0", "a cancelled insert is still running");
    assert!(write.throughput.is_none());
    assert_eq!(
        summary.report.cells[1].status,
        Status::Ok,
        "{:?}",
        summary.report.cells[1]
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "a timed-out cell is not retried round after round"
    );
}

#[test]
fn a_server_killed_mid_run_records_the_error_and_keeps_everything_measured() {
    let Some(server) = DoomedPostgres::start(56432) else {
        return;
    };
    let out = server.run_dir();
    // Crash the server once the first of its cells has a measured round on disk.
    let watcher = server.crash_when(Duration::from_secs(60), |results| {
        any_cell(results, "doomed", None, |c| {
            c["throughput"]["rounds"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        })
    });
    let target = format!("doomed={}", server.url);
    let summary = run(&args(
        "crud",
        &out,
        &[
            "--target",
            &target,
            "--target",
            "sqlite",
            "--duration",
            "500ms",
            "--rounds",
            "3",
        ],
    ));
    assert!(
        watcher.join().unwrap(),
        "the server was crashed during the run"
    );
    server.stop();
    let summary = summary.expect("a server dying is a recorded cell, not a failed run");
    assert_eq!(summary.exit, Exit::NotAllOk);
    let report = &summary.report;
    let doomed: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.system == "doomed")
        .collect();
    let sqlite: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.system == "sqlite")
        .collect();
    assert!(sqlite.iter().all(|c| c.status == Status::Ok), "{sqlite:#?}");
    assert!(
        doomed.iter().all(|c| c.status == Status::Error),
        "{doomed:#?}"
    );
    assert!(
        doomed[0]
            .throughput
            .as_ref()
            .is_some_and(|t| !t.rounds.is_empty()),
        "rounds measured before the crash are kept: {:?}",
        doomed[0]
    );
    let json = read_json(&out);
    assert_eq!(json["cells"].as_array().unwrap().len(), 8);
    assert!(out.join("report.md").exists());
}
