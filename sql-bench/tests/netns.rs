//! `sql-bench crud` as a Kubernetes Indexed Job runs it, on one machine: three worker
//! processes, each in a network namespace of its own joined to the host by a veth pair, each
//! told its index by `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address,
//! against one PostgreSQL the test starts on the host side of the veths; then
//! `sql-bench merge` of their parts, as the merge Job does. A worker killed before the barrier
//! stops the others with the barrier's exit code, and nothing is merged as if complete. Needs
//! root (skipped otherwise).

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use common::results::{Cell, Report, Status};
use common::testing::netns::Namespaces;
use common::testing::process::{self, Started, barrier, start};
use common::testing::read_report;
use common::testing::workers::assert_exact_sum;
use support::{DoomedPostgres, assert_matches_schema};

const SQL_BENCH: &str = env!("CARGO_BIN_EXE_sql-bench");
/// Worker 0 listens in its own namespace, where every port is free.
const BARRIER_PORT: u16 = 7521;
/// No worker process runs longer than this (the load loops are bounded by their windows).
const PROCESS_LIMIT: Duration = Duration::from_secs(120);

/// Worker `index` of `count`, in namespace `index`, writing to `root/worker-INDEX`.
fn worker(
    net: &Namespaces,
    (index, count): (usize, usize),
    postgres: &str,
    barrier_timeout: &str,
    root: &Path,
) -> Started {
    let barrier = format!("{}:{BARRIER_PORT}", net.address(0));
    let mut command = net.command(index, SQL_BENCH);
    command
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .args(["crud", "--target", postgres])
        .args(["--workloads", "write-3c,read-6c,mixed-6c"])
        .args(["--rounds", "2", "--warmup", "1", "--duration", "300ms"])
        .args(["--quiet", "--worker-count", &count.to_string()])
        .args(["--run-id", "crud-netns-1"])
        .args(["--barrier", &barrier, "--barrier-timeout", barrier_timeout])
        .arg("--output")
        .arg(root.join(format!("worker-{index}")));
    start(&mut command, root.join(format!("worker-{index}.stderr")))
}

fn finish(process: Started) -> (ExitStatus, String) {
    process::finish(process, PROCESS_LIMIT)
}

/// `sql-bench merge` of `parts` on the host, as the merge Job runs it.
fn merge(parts: &[PathBuf], expect: usize, output: &Path) -> (ExitStatus, String) {
    process::merge(SQL_BENCH, parts, expect, output, PROCESS_LIMIT)
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

fn not_ok(report: &Report) -> Vec<String> {
    report
        .cells
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| format!("{}: {:?} {:?}", c.workload, c.status, c.reason))
        .collect()
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
    let processes: Vec<Started> = (0..3)
        .map(|i| worker(&net, (i, 3), &postgres.url, "20s", &root))
        .collect();
    let parts: Vec<PathBuf> = (0..3).map(|i| root.join(format!("worker-{i}"))).collect();
    let mut reports = Vec::new();
    for (i, process) in processes.into_iter().enumerate() {
        let (status, stderr) = finish(process);
        let report = read_report(&parts[i]);
        assert!(
            status.success(),
            "worker {i}: {status}: {stderr}{:#?}",
            not_ok(&report)
        );
        assert_matches_schema(&parts[i]);
        let info = report.worker.as_ref().expect("a worker block");
        assert_eq!(
            (info.index, info.count),
            (i as u32, 3),
            "JOB_COMPLETION_INDEX"
        );
        // Every worker read the tables' keys back from the catalog, worker 0 having made them.
        assert_eq!(
            report.systems[0].verified["crud_read.primary_key"], "k (btree, pg_index)",
            "worker {i}"
        );
        reports.push(report);
    }
    let records: Vec<_> = reports.iter().map(barrier).collect();
    assert!(records[1..].iter().all(|b| b.rtt_ns > 0));
    // The tables' meeting, (1 warm-up + 2 rounds) × 3 workloads, a second meeting after each
    // of the 6 windows that write, and the closing one.
    assert!(
        records.iter().all(|b| b.windows == 1 + 9 + 6 + 1),
        "{records:?}"
    );
    let skew_ns = (0..records[0].start_unix_ns.len())
        .map(|w| {
            let starts: Vec<u64> = records.iter().map(|b| b.start_unix_ns[w]).collect();
            starts.iter().max().unwrap() - starts.iter().min().unwrap()
        })
        .max()
        .unwrap();
    assert!(skew_ns < 50_000_000, "windows started {skew_ns} ns apart");
    eprintln!("barrier skew across three namespaces: at most {skew_ns} ns");
    // 3 connections over 3 workers, 6 over 3: one and two each.
    let connections: Vec<u32> = reports.iter().map(|r| r.cells[0].connections).collect();
    assert_eq!(connections, [1, 1, 1]);
    let connections: Vec<u32> = reports.iter().map(|r| r.cells[1].connections).collect();
    assert_eq!(connections, [2, 2, 2]);

    let merged_dir = root.join("merged");
    let shuffled = [parts[2].clone(), parts[0].clone(), parts[1].clone()];
    let (status, stderr) = merge(&shuffled, 3, &merged_dir);
    assert!(status.success(), "merge: {status}: {stderr}");
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
    let first = worker(&net, (0, 2), &postgres.url, "2s", &root);
    let mut second = worker(&net, (1, 2), &postgres.url, "2s", &root);
    // The pod of worker 1 dies at once: worker 0 is left alone at a barrier of two.
    second.0.kill().unwrap();
    second.0.wait().unwrap();
    let (status, stderr) = finish(first);
    assert_eq!(
        status.code(),
        Some(i32::from(common::scale::BARRIER_EXIT)),
        "{stderr}"
    );
    let part = root.join("worker-0");
    let report = read_report(&part);
    assert!(
        report.cells.iter().all(|c| c.status == Status::Error
            && c.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("stopped: "))),
        "every cell says the run stopped: {:#?}",
        not_ok(&report)
    );
    let (status, stderr) = merge(&[part, root.join("worker-1")], 2, &root.join("merged"));
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(!root.join("merged").exists(), "nothing merged");
    drop(postgres);
    net.remove_and_check();
}
