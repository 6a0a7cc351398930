//! mqtt-bench as a Kubernetes Indexed Job runs it, on one machine: two worker processes, each
//! in a network namespace of its own joined to the host by a veth pair, each told its index by
//! `JOB_COMPLETION_INDEX` and worker 0's barrier by its namespace address, against one
//! Mosquitto the test starts on the host side of the veths; then `mqtt-bench merge` of their
//! parts, as the merge Job does. A worker killed before the barrier stops the other with the
//! barrier's exit code, and its part is not merged as if complete. Needs root (skipped
//! otherwise).

mod support;

use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use common::results::Status;
use common::testing::job::{Job, assert_opened_within_50ms};
use common::testing::netns::Namespaces;
use common::testing::process::{Started, barrier};
use support::{OwnMosquitto, mosquitto_installed};

const BINARY: &str = env!("CARGO_BIN_EXE_mqtt-bench");
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

/// The settings of every worker against the broker at `broker`.
fn settings(broker: &str) -> String {
    format!(
        "--broker mosquitto={broker} --scenarios connect,idle,many-to-many --clients 20 \
         --connect-rate 2k --many-to-many 4x4 --topics 4 --backlog 100 --rounds 1 --warmup 1 \
         --duration 200ms --ceiling 30s --quiet"
    )
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
    let job = Job::new(&net, BINARY, dir.path(), PROCESS_LIMIT);
    let processes: Vec<Started> = (0..2)
        .map(|i| job.worker((i, 2), &settings(&broker.url), "10s"))
        .collect();
    let reports = job.finish_parts(processes);
    for (i, report) in reports.iter().enumerate() {
        // The workers reached the broker through their veth, not a loopback of theirs.
        assert_eq!(report.systems[0].url_redacted, broker.url, "worker {i}");
    }
    // 3 rows × (1 warm-up + 1 round), and the closing meeting.
    assert_eq!(barrier(&reports[0]).windows, 7);
    assert_opened_within_50ms(&reports);
    let merged = job.merge_and_read(&[1, 0]);
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
    Job::new(&net, BINARY, dir.path(), PROCESS_LIMIT)
        .assert_a_killed_worker_stops_the_other(&settings(&broker.url), "2s");
}
