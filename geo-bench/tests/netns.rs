//! geo-bench as a Kubernetes Indexed Job runs it, on one machine: two worker processes, each in
//! a network namespace of its own joined to the host by a veth pair, each told its index by
//! `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address, against one Redis
//! the test starts on the host side of the veths; then `geo-bench merge` of their parts, as
//! the merge Job does. A worker killed before the barrier stops the other with the barrier's
//! exit code, and its part is not merged as if complete. Needs root (skipped otherwise).

mod support;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::testing::job::{Job, assert_opened_within_50ms};
use common::testing::netns::Namespaces;
use common::testing::process::{Started, barrier, start};
use common::testing::servers_required;
use common::testing::workers::assert_exact_sum;

const BINARY: &str = env!("CARGO_BIN_EXE_geo-bench");
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

/// The settings of every worker against the Redis at `redis`.
fn settings(redis: SocketAddr) -> String {
    format!(
        "--target redis://{redis} --workloads insert,query --batch-sizes 10 --clients 4 \
         --connections 4 --events 3000 --queries 25 --rounds 1 --warmup 1 --duration 200ms --quiet"
    )
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
    let job = Job::new(&net, BINARY, dir.path(), PROCESS_LIMIT);
    let processes: Vec<Started> = (0..2)
        .map(|i| job.worker((i, 2), &settings(redis), "5s"))
        .collect();
    let reports = job.finish_parts(processes);
    for (i, report) in reports.iter().enumerate() {
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
    }
    assert_eq!(barrier(&reports[1]).address, job.barrier());
    assert_opened_within_50ms(&reports);

    let merged = job.merge_and_read(&[1, 0]);
    assert_eq!(merged.workers.len(), 2);
    assert_eq!(merged.cells.len(), reports[0].cells.len());
    for (i, c) in merged.cells.iter().enumerate() {
        let (a, b) = (&reports[0].cells[i], &reports[1].cells[i]);
        // Worker 0 counted the events after every insert window against both workers'
        // acknowledgements (each key exactly once, or the cell is invalid).
        assert!(a.counts.ok > 0 && b.counts.ok > 0, "{}", c.workload);
        assert_exact_sum(c, &[a, b]);
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
    Job::new(&net, BINARY, dir.path(), PROCESS_LIMIT)
        .assert_a_killed_worker_stops_the_other(&settings(redis), "2s");
    net.remove_and_check();
}
