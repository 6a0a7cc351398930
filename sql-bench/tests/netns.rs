//! `sql-bench crud` as a Kubernetes Indexed Job runs it, on one machine: three worker
//! processes, each in a network namespace of its own joined to the host by a veth pair, each
//! told its index by `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address,
//! against one PostgreSQL the test starts on the host side of the veths; then
//! `sql-bench merge` of their parts, as the merge Job does. A worker killed before the barrier
//! stops the others with the barrier's exit code, and nothing is merged as if complete. Needs
//! root (skipped otherwise).

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use common::results::Cell;
use common::testing::job::{Job, barrier_skew_ns, not_ok};
use common::testing::netns::Namespaces;
use common::testing::process::{Started, barrier};
use common::testing::read_report;
use common::testing::workers::assert_exact_sum;
use support::{DoomedPostgres, assert_matches_schema};

/// Worker 0 listens in its own namespace, where every port is free.
const BARRIER_PORT: u16 = 7521;
/// No worker process runs longer than this (the load loops are bounded by their windows).
const PROCESS_LIMIT: Duration = Duration::from_secs(120);

/// The Job of sql-bench's workers in `net`, writing under `root`.
fn job<'a>(net: &'a Namespaces, root: &'a Path) -> Job<'a> {
    Job {
        net,
        binary: env!("CARGO_BIN_EXE_sql-bench"),
        barrier_port: BARRIER_PORT,
        run_id: "crud-netns-1",
        limit: PROCESS_LIMIT,
        root,
    }
}

/// The settings of every worker of the crud suite against `postgres`.
fn settings(postgres: &str) -> String {
    format!(
        "crud --target {postgres} --workloads write-3c,read-6c,mixed-6c --rounds 2 --warmup 1 \
         --duration 300ms --quiet"
    )
}

/// A PostgreSQL of the test's own on the host's bridge address (the shared one listens on
/// 127.0.0.1, which a namespace cannot reach).
fn postgres_for(net: &Namespaces) -> Option<DoomedPostgres> {
    let port = TcpListener::bind((net.host_address(), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    DoomedPostgres::start_on(Some(net.host_address()), port)
}

#[test]
fn three_workers_in_three_namespaces_make_one_crud_run_whose_figures_are_the_exact_sum() {
    let started = Instant::now();
    let Some(net) = Namespaces::create(3) else {
        return;
    };
    let Some(postgres) = postgres_for(&net) else {
        return;
    };
    let root = postgres.run_dir();
    std::fs::create_dir_all(&root).unwrap();
    let job = job(&net, &root);
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
    let skew_ns = barrier_skew_ns(&reports);
    assert!(skew_ns < 50_000_000, "windows started {skew_ns} ns apart");
    eprintln!("barrier skew across three namespaces: at most {skew_ns} ns");
    // 3 connections over 3 workers, 6 over 3: one and two each.
    let connections: Vec<u32> = reports.iter().map(|r| r.cells[0].connections).collect();
    assert_eq!(connections, [1, 1, 1]);
    let connections: Vec<u32> = reports.iter().map(|r| r.cells[1].connections).collect();
    assert_eq!(connections, [2, 2, 2]);

    let (status, stderr) = job.merge(&[job.part(2), job.part(0), job.part(1)], 3);
    assert!(status.success(), "merge: {status}: {stderr}");
    let merged_dir = job.merged();
    assert_matches_schema(&merged_dir);
    assert!(merged_dir.join("report.md").is_file() && merged_dir.join("report.html").is_file());
    let merged = read_report(&merged_dir);
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
    let Some(net) = Namespaces::create(2) else {
        return;
    };
    let Some(postgres) = postgres_for(&net) else {
        return;
    };
    let root = postgres.run_dir();
    std::fs::create_dir_all(&root).unwrap();
    let job = job(&net, &root);
    let report = job.assert_a_killed_worker_stops_the_other(&settings(&postgres.url), "2s");
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
