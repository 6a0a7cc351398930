//! `sql-bench crud` as a Kubernetes Indexed Job runs it, on one machine: three worker
//! processes, each in a network namespace of its own joined to the host by a veth pair, each
//! told its index by `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address,
//! against one PostgreSQL the test starts on the host side of the veths; then
//! `sql-bench merge` of their parts, as the merge Job does. A worker killed before the barrier
//! stops the others with the barrier's exit code, and nothing is merged as if complete. Needs
//! root (skipped otherwise).

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::results::Cell;
use common::testing::job::{Job, assert_opened_within_50ms, not_ok};
use common::testing::netns::Namespaces;
use common::testing::process::{Started, barrier};
use common::testing::workers::assert_exact_sum;
use support::DoomedPostgres;

const BINARY: &str = env!("CARGO_BIN_EXE_sql-bench");
/// No worker process runs longer than this (the load loops are bounded by their windows).
const PROCESS_LIMIT: Duration = Duration::from_secs(120);

/// The settings of every worker of the crud suite against `postgres`.
fn settings(postgres: &str) -> String {
    format!(
        "crud --target {postgres} --workloads write-3c,read-6c,mixed-6c --rounds 2 --warmup 1 \
         --duration 300ms --quiet"
    )
}

/// `count` namespaces and a PostgreSQL of the test's own on the host's bridge address (the
/// shared one listens on 127.0.0.1, which a namespace cannot reach), with the folder for the
/// workers' parts made in its run folder.
fn postgres_in_namespaces(count: usize) -> Option<(Namespaces, DoomedPostgres)> {
    let net = Namespaces::create(count)?;
    let port = TcpListener::bind((net.host_address(), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let postgres = DoomedPostgres::start_on(Some(net.host_address()), port)?;
    std::fs::create_dir_all(postgres.run_dir()).unwrap();
    Some((net, postgres))
}

#[test]
fn three_workers_in_three_namespaces_make_one_crud_run_whose_figures_are_the_exact_sum() {
    let started = Instant::now();
    let Some((net, postgres)) = postgres_in_namespaces(3) else {
        return;
    };
    let root = postgres.run_dir();
    let job = Job::new(&net, BINARY, &root, PROCESS_LIMIT);
    let processes: Vec<Started> = (0..3)
        .map(|i| job.worker((i, 3), &settings(&postgres.url), "20s"))
        .collect();
    let reports = job.finish_parts(processes);
    for (i, report) in reports.iter().enumerate() {
        // Every worker read the tables' keys back from the catalog, worker 0 having made them.
        assert_eq!(
            report.systems[0].verified["crud_read.primary_key"], "k (btree, pg_index)",
            "worker {i}"
        );
    }
    // The tables' meeting, (1 warm-up + 2 rounds) × 3 workloads, a second meeting after each
    // of the 6 windows that write, and the closing one.
    assert_eq!(barrier(&reports[0]).windows, 1 + 9 + 6 + 1);
    assert_opened_within_50ms(&reports);
    // 3 connections over 3 workers, 6 over 3: one and two each.
    let connections: Vec<u32> = reports.iter().map(|r| r.cells[0].connections).collect();
    assert_eq!(connections, [1, 1, 1]);
    let connections: Vec<u32> = reports.iter().map(|r| r.cells[1].connections).collect();
    assert_eq!(connections, [2, 2, 2]);

    let merged = job.merge_and_read(&[2, 0, 1]);
    assert!(job.merged().join("report.html").is_file());
    assert_eq!(merged.workers.len(), 3);
    for (i, cell) in merged.cells.iter().enumerate() {
        let of_parts: Vec<&Cell> = reports.iter().map(|r| &r.cells[i]).collect();
        assert!(of_parts.iter().all(|c| c.counts.ok > 0), "every worker ran");
        assert_exact_sum(cell, &of_parts);
    }
    drop(postgres);
    net.remove_and_check();
    eprintln!("three workers in namespaces: {:?}", started.elapsed());
}

#[test]
fn a_crud_worker_killed_before_the_barrier_stops_the_others_and_nothing_is_merged() {
    let Some((net, postgres)) = postgres_in_namespaces(2) else {
        return;
    };
    let root = postgres.run_dir();
    let report = Job::new(&net, BINARY, &root, PROCESS_LIMIT)
        .assert_a_killed_worker_stops_the_other(&settings(&postgres.url), "2s");
    assert!(
        report.cells.iter().all(|c| c
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("stopped: "))),
        "every cell says the run stopped: {:#?}",
        not_ok(&report)
    );
    drop(postgres);
    net.remove_and_check();
}
