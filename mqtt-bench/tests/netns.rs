//! mqtt-bench as a Kubernetes Indexed Job runs it, on one machine: two worker processes, each
//! in a network namespace of its own joined to the host by a veth pair, each told its index by
//! `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address, against one
//! Mosquitto the test starts on the host side of the veths; then `mqtt-bench merge` of their
//! parts, as the merge Job does. A worker killed before the barrier stops the other with the
//! barrier's exit code, and its part is not merged as if complete. Needs root (skipped
//! otherwise).

mod support;

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use common::results::Status;
use common::testing::netns::Namespaces;
use common::testing::process::{self, Started, barrier, start};
use common::testing::read_report;
use support::{OwnMosquitto, assert_matches_schema, mosquitto_installed};

const MQTT_BENCH: &str = env!("CARGO_BIN_EXE_mqtt-bench");
/// Worker 0 listens in its own namespace, where every port is free.
const BARRIER_PORT: u16 = 7519;
/// No worker process runs longer than this (the load loops are bounded by their windows).
const PROCESS_LIMIT: Duration = Duration::from_secs(90);

/// A Mosquitto of the test's own on the host's bridge address, the only address it listens
/// on (the shared one listens on 127.0.0.1, which a namespace cannot reach).
fn mosquitto_on(address: Ipv4Addr) -> Option<OwnMosquitto> {
    if !mosquitto_installed() {
        return None;
    }
    let host = address.to_string();
    let port = TcpListener::bind((address, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!("listener {port} {host}\nallow_anonymous true\npersistence false\n");
    let dir = tempfile::tempdir().unwrap();
    Some(OwnMosquitto::launch(&config, (&host, port), "mqtt", dir))
}

/// Worker `index` of `count`, in namespace `index`, writing to `root/worker-INDEX`.
fn worker(
    net: &Namespaces,
    (index, count): (usize, usize),
    broker: &str,
    barrier_timeout: &str,
    root: &Path,
) -> Started {
    let barrier = format!("{}:{BARRIER_PORT}", net.address(0));
    let mut command = net.command(index, MQTT_BENCH);
    command
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .args(["--broker", &format!("mosquitto={broker}")])
        .args(["--scenarios", "connect,idle,many-to-many"])
        .args(["--clients", "20", "--connect-rate", "2k"])
        .args(["--many-to-many", "4x4", "--topics", "4", "--backlog", "100"])
        .args(["--rounds", "1", "--warmup", "1", "--duration", "200ms"])
        .args(["--ceiling", "30s", "--quiet"])
        .args(["--worker-count", &count.to_string(), "--run-id", "netns-1"])
        .args(["--barrier", &barrier, "--barrier-timeout", barrier_timeout])
        .arg("--output")
        .arg(root.join(format!("worker-{index}")));
    start(&mut command, root.join(format!("worker-{index}.stderr")))
}

fn finish(process: Started) -> (ExitStatus, String) {
    process::finish(process, PROCESS_LIMIT)
}

/// `mqtt-bench merge` of `parts` on the host, as the merge Job runs it.
fn merge(parts: &[PathBuf], expect: usize, output: &Path) -> (ExitStatus, String) {
    process::merge(MQTT_BENCH, parts, expect, output, PROCESS_LIMIT)
}

#[test]
fn two_workers_in_two_namespaces_make_one_run_whose_figures_are_the_exact_sum() {
    let started = Instant::now();
    let Some(net) = Namespaces::create(2) else {
        return;
    };
    let Some(broker) = mosquitto_on(net.host_address()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let processes: Vec<Started> = (0..2)
        .map(|i| worker(&net, (i, 2), &broker.url, "10s", dir.path()))
        .collect();
    let parts: Vec<PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("worker-{i}")))
        .collect();
    let mut reports = Vec::new();
    for (i, process) in processes.into_iter().enumerate() {
        let (status, stderr) = finish(process);
        assert!(status.success(), "worker {i}: {status}: {stderr}");
        assert_matches_schema(&parts[i]);
        let report = read_report(&parts[i]);
        let info = report.worker.as_ref().expect("a worker block");
        assert_eq!(
            (info.index, info.count),
            (i as u32, 2),
            "JOB_COMPLETION_INDEX"
        );
        // The workers reached the broker through their veth, not a loopback of theirs.
        assert_eq!(report.systems[0].url_redacted, broker.url, "worker {i}");
        reports.push(report);
    }
    let (b0, b1) = (barrier(&reports[0]), barrier(&reports[1]));
    assert!(
        b1.rtt_ns > 0,
        "worker 1 measured its round trip to worker 0"
    );
    // 3 rows × (1 warm-up + 1 round), and the closing meeting.
    assert_eq!((b0.windows, b1.windows), (7, 7));
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
    for (i, c) in merged.cells.iter().enumerate() {
        let (a, b) = (&reports[0].cells[i], &reports[1].cells[i]);
        assert_eq!(c.status, Status::Ok, "{}: {:?}", c.workload, c.reason);
        assert!(a.counts.ok > 0 && b.counts.ok > 0, "{}", c.workload);
        assert_eq!(c.counts.ok, a.counts.ok + b.counts.ok, "{}", c.workload);
        assert_eq!(c.connections, a.connections + b.connections);
        let sent = |c: &common::results::Cell| c.extra["delivery"]["sent"].as_u64().unwrap();
        assert_eq!(sent(c), sent(a) + sent(b), "{}", c.workload);
    }
    drop(net);
    eprintln!("two workers in namespaces: {:?}", started.elapsed());
}

#[test]
fn a_worker_killed_before_the_barrier_stops_the_other_and_nothing_is_merged() {
    let Some(net) = Namespaces::create(2) else {
        return;
    };
    let Some(broker) = mosquitto_on(net.host_address()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let first = worker(&net, (0, 2), &broker.url, "2s", dir.path());
    let mut second = worker(&net, (1, 2), &broker.url, "2s", dir.path());
    // The pod of worker 1 dies at once: worker 0 is left alone at a barrier of two.
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
    assert!(report.cells.iter().all(|c| c.status == Status::Error));
    let (status, stderr) = merge(
        &[part, dir.path().join("worker-1")],
        2,
        &dir.path().join("merged"),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(!dir.path().join("merged").exists(), "nothing merged");
}
