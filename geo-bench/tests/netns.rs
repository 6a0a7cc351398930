//! geo-bench as a Kubernetes Indexed Job runs it, on one machine: two worker processes, each in
//! a network namespace of its own joined to the host by a veth pair, each told its index by
//! `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address, against one Redis
//! the test starts on the host side of the veths; then `geo-bench merge` of their parts, as
//! the merge Job does. A worker killed before the barrier stops the other with the barrier's
//! exit code, and its part is not merged as if complete. Needs root (skipped otherwise).

mod support;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use common::histogram::decode_histogram;
use common::results::Status;
use common::testing::netns::Namespaces;
use common::testing::process::{self, Started, barrier, start};
use common::testing::{read_report, servers_required};
use support::assert_matches_schema;

const GEO_BENCH: &str = env!("CARGO_BIN_EXE_geo-bench");
/// Worker 0 listens in its own namespace, where every port is free.
const BARRIER_PORT: u16 = 7519;
/// No worker process runs longer than this (the load loops are bounded by their windows).
const PROCESS_LIMIT: Duration = Duration::from_secs(90);

/// A Redis of the test's own on the host's bridge address, the only address it listens on
/// (the shared one listens on 127.0.0.1, which a namespace cannot reach). Protected mode off:
/// it would refuse every client not on loopback, and only the test's namespaces reach the
/// bridge.
fn redis_on(address: Ipv4Addr, dir: &Path) -> Option<(Started, SocketAddr)> {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            !servers_required(),
            "redis-server is not installed: scripts/install-servers installs it"
        );
        eprintln!("skipped: redis-server is not installed (scripts/install-servers)");
        return None;
    }
    let port = TcpListener::bind((address, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = start(
        Command::new("redis-server")
            .args(["--bind", &address.to_string(), "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log")),
        dir.join("redis.stderr"),
    );
    let socket = SocketAddr::from((address, port));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&socket, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "Redis on {socket} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((server, socket))
}

/// Worker `index` of `count`, in namespace `index`, writing to `root/worker-INDEX`.
fn worker(
    net: &Namespaces,
    (index, count): (usize, usize),
    redis: SocketAddr,
    barrier_timeout: &str,
    root: &Path,
) -> Started {
    let barrier = format!("{}:{BARRIER_PORT}", net.address(0));
    let mut command = net.command(index, GEO_BENCH);
    command
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .arg("--target")
        .arg(format!("redis://{redis}"))
        .args(["--workloads", "insert,query", "--batch-sizes", "10"])
        .args(["--clients", "4", "--connections", "4", "--events", "3000"])
        .args(["--queries", "25", "--rounds", "1", "--warmup", "1"])
        .args(["--duration", "200ms", "--quiet"])
        .args(["--worker-count", &count.to_string(), "--run-id", "netns-1"])
        .args(["--barrier", &barrier, "--barrier-timeout", barrier_timeout])
        .arg("--output")
        .arg(root.join(format!("worker-{index}")));
    start(&mut command, root.join(format!("worker-{index}.stderr")))
}

/// Waits for a process of the test, bounded: its exit status and what it printed on stderr.
fn finish(process: Started) -> (ExitStatus, String) {
    process::finish(process, PROCESS_LIMIT)
}

/// `geo-bench merge` of `parts` on the host, as the merge Job runs it.
fn merge(parts: &[PathBuf], expect: usize, output: &Path) -> (ExitStatus, String) {
    process::merge(GEO_BENCH, parts, expect, output, PROCESS_LIMIT)
}

#[test]
fn two_workers_in_two_namespaces_make_one_run_whose_figures_are_the_exact_sum() {
    let started = Instant::now();
    let Some(net) = Namespaces::create(2) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some((_redis, redis)) = redis_on(net.host_address(), dir.path()) else {
        return;
    };
    let processes: Vec<Started> = (0..2)
        .map(|i| worker(&net, (i, 2), redis, "5s", dir.path()))
        .collect();
    let parts: Vec<PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("worker-{i}")))
        .collect();
    let mut reports = Vec::new();
    for (i, process) in processes.into_iter().enumerate() {
        let (status, stderr) = finish(process);
        let report = read_report(&parts[i]);
        let not_ok: Vec<_> = report
            .cells
            .iter()
            .filter(|c| c.status != Status::Ok)
            .map(|c| format!("{}: {:?} {:?}", c.workload, c.status, c.reason))
            .collect();
        assert!(
            status.success(),
            "worker {i}: {status}: {stderr}{not_ok:#?}"
        );
        assert_matches_schema(&parts[i]);
        let info = report.worker.as_ref().expect("a worker block");
        assert_eq!(
            (info.index, info.count),
            (i as u32, 2),
            "JOB_COMPLETION_INDEX"
        );
        // The workers reached Redis through their veth, not a loopback of theirs.
        assert_eq!(
            report.systems[0].url_redacted,
            format!("redis://{redis}"),
            "worker {i}"
        );
        eprintln!(
            "worker {i}: {} to {:?}",
            report.started_at, report.finished_at
        );
        reports.push(report);
    }
    let (b0, b1) = (barrier(&reports[0]), barrier(&reports[1]));
    assert_eq!(b1.address, format!("{}:{BARRIER_PORT}", net.address(0)));
    assert!(
        b1.rtt_ns > 0,
        "worker 1 measured its round trip to worker 0"
    );
    assert_eq!(b0.windows, b1.windows);
    assert_eq!(b0.start_unix_ns.len(), b1.start_unix_ns.len());
    // One clock for both namespaces: every window's starts are comparable.
    let skew_ns = b0
        .start_unix_ns
        .iter()
        .zip(&b1.start_unix_ns)
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap();
    assert!(skew_ns < 50_000_000, "windows started {skew_ns} ns apart");
    eprintln!("barrier skew across the namespaces: at most {skew_ns} ns");

    let merged_dir = dir.path().join("merged");
    let (status, stderr) = merge(&[parts[1].clone(), parts[0].clone()], 2, &merged_dir);
    assert!(status.success(), "merge: {status}: {stderr}");
    assert_matches_schema(&merged_dir);
    assert!(merged_dir.join("report.md").is_file());
    let merged = read_report(&merged_dir);
    assert_eq!(merged.workers.len(), 2);
    assert_eq!(merged.cells.len(), reports[0].cells.len());
    for (i, c) in merged.cells.iter().enumerate() {
        let (a, b) = (&reports[0].cells[i], &reports[1].cells[i]);
        // Worker 0 counted the events after every insert window against both workers'
        // acknowledgements (each key exactly once, or the cell is invalid).
        assert_eq!(c.status, Status::Ok, "{}: {:?}", c.workload, c.reason);
        assert_eq!(c.counts.ok, a.counts.ok + b.counts.ok, "{}", c.workload);
        assert!(a.counts.ok > 0 && b.counts.ok > 0, "{}", c.workload);
        assert_eq!(c.connections, a.connections + b.connections);
        let mut expected = decode_histogram(a.histogram_b64.as_ref().unwrap()).unwrap();
        expected.auto(true);
        expected
            .add(decode_histogram(b.histogram_b64.as_ref().unwrap()).unwrap())
            .unwrap();
        let merged_h = decode_histogram(c.histogram_b64.as_ref().unwrap()).unwrap();
        assert_eq!(merged_h, expected, "{}: the exact sum", c.workload);
        assert_eq!(c.latency_ns.unwrap().p99, expected.value_at_quantile(0.99));
        let rounds = |x: &common::results::Cell| x.throughput.as_ref().unwrap().rounds.clone();
        for ((m, x), y) in rounds(c).iter().zip(rounds(a)).zip(rounds(b)) {
            assert!((m - (x + y)).abs() <= 1e-9 * (x + y), "{}", c.workload);
        }
    }
    net.remove_and_check();
    eprintln!("two workers in namespaces: {:?}", started.elapsed());
}

#[test]
fn a_worker_killed_before_the_barrier_stops_the_other_and_nothing_is_merged() {
    let Some(net) = Namespaces::create(2) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some((_redis, redis)) = redis_on(net.host_address(), dir.path()) else {
        return;
    };
    let first = worker(&net, (0, 2), redis, "2s", dir.path());
    let mut second = worker(&net, (1, 2), redis, "2s", dir.path());
    // The pod of worker 1 dies at once (whether before or just after its hello, worker 0
    // is left alone at a barrier of two).
    second.0.kill().unwrap();
    second.0.wait().unwrap();
    let (status, stderr) = finish(first);
    assert_eq!(
        status.code(),
        Some(i32::from(common::scale::BARRIER_EXIT)),
        "{stderr}"
    );
    let part = dir.path().join("worker-0");
    let report = read_report(&part);
    assert!(
        report.cells.iter().all(|c| c.status == Status::Error),
        "every cell says the run stopped"
    );
    let (status, stderr) = merge(
        &[part, dir.path().join("worker-1")],
        2,
        &dir.path().join("merged"),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(!dir.path().join("merged").exists(), "nothing merged");
    net.remove_and_check();
}
