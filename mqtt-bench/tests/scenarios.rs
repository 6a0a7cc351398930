//! The broker-benchmark scenarios beyond seed 000's five, where they can go wrong: a persistent
//! session whose broker drops queued messages (the ledger's loss equals the broker's own drop
//! count), a shared-subscription group's balance, a broker killed in the middle of a connection
//! storm (the measured part is kept), and 2,000 clients over two source addresses (counted from
//! the kernel's socket table as well as by mqtt-bench).

mod support;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::exit::Exit;
use common::results::{Cell, Status};
use support::*;

fn delivery(cell: &Cell) -> (u64, u64, u64) {
    let d = &cell.extra["delivery"];
    let n = |k: &str| d[k].as_u64().unwrap();
    (n("sent"), n("distinct"), n("lost"))
}

/// One of the cell's scenario figures (the median of its rounds; these tests run one).
fn figure(cell: &Cell, key: &str) -> f64 {
    cell.extra["figures"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no figure {key}: {:?}", cell.extra))
}

/// A retained `$SYS` value of a Mosquitto, read with Mosquitto's own client.
fn sys_value(url: &str, topic: &str) -> String {
    let port = url.rsplit(':').next().unwrap();
    let out = Command::new("mosquitto_sub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            port,
            "-t",
            topic,
            "-C",
            "1",
            "-W",
            "5",
        ])
        .output()
        .expect("mosquitto_sub runs (scripts/install-servers mosquitto)");
    assert!(out.status.success(), "mosquitto_sub {topic}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_persistent_session_the_broker_drops_from_is_an_error_with_the_brokers_own_count() {
    // Ten messages queued at most for a client that is away: of the ~250 published while the
    // subscriber is gone, Mosquitto drops the rest and counts them in $SYS.
    let Some(broker) = OwnMosquitto::start("max_queued_messages 10\nsys_interval 1") else {
        return;
    };
    let _servers = lock_servers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("small-queue={}", broker.url);
    let summary = run(&args(
        dir.path(),
        &[
            "--broker",
            &url,
            "--scenarios",
            "persistent",
            "--duration",
            "3s",
            "--away",
            "1s",
            "--rounds",
            "1",
            "--warmup",
            "0",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::NotAllOk);
    let cell = &summary.report.cells[0];
    let (sent, distinct, lost) = delivery(cell);
    assert_eq!(cell.status, Status::Error, "{cell:?}");
    let reason = cell.reason.as_deref().unwrap();
    assert!(reason.contains("QoS 1 messages lost"), "{reason}");
    assert!(cell.usable_throughput().is_none());
    assert_eq!(sent, distinct + lost);
    let resumed = &cell.extra["rounds"][0]["resumed"];
    assert_eq!(resumed["session_present"], true, "{resumed}");
    // The broker counted what it dropped; the ledger found exactly as many missing. Its
    // counter is published every second.
    std::thread::sleep(Duration::from_millis(1500));
    let dropped: u64 = sys_value(&broker.url, "$SYS/broker/publish/messages/dropped")
        .parse()
        .unwrap();
    assert!(dropped > 100, "Mosquitto dropped only {dropped}");
    assert_eq!(
        lost, dropped,
        "the ledger's loss is the broker's drop count"
    );
    assert_matches_schema(dir.path());
}

#[test]
fn a_shared_subscription_group_shares_every_message_once_and_evenly() {
    let Some((url, dir)) = on_server("FAIRBENCH_TEST_MOSQUITTO_URL") else {
        return;
    };
    let broker = format!("mosquitto={url}");
    let summary = run(&args(
        dir.path(),
        &[
            "--broker",
            &broker,
            "--scenarios",
            "shared",
            "--protocol",
            "3.1.1,5",
            "--group",
            "4",
            "--qos",
            "1",
            "--rounds",
            "1",
            "--warmup",
            "0",
        ],
    ))
    .unwrap();
    let systems: Vec<&str> = summary
        .report
        .cells
        .iter()
        .map(|c| c.system.as_str())
        .collect();
    assert_eq!(systems, ["mosquitto-mqtt3.1.1", "mosquitto-mqtt5"]);
    for cell in &summary.report.cells {
        assert_eq!(
            cell.status,
            Status::Ok,
            "{}: {:?}",
            cell.system,
            cell.reason
        );
        let (sent, distinct, lost) = delivery(cell);
        assert!(sent > 1000, "{}: only {sent} sent", cell.system);
        assert_eq!((distinct, lost), (sent, 0), "{}", cell.system);
        assert_eq!(cell.extra["delivery"]["duplicates"], 0, "{}", cell.system);
        // Each message went to one member of the group: the members' counts add up to it.
        let round = &cell.extra["rounds"][0];
        let per_consumer: Vec<u64> = round["per_consumer"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        assert_eq!(per_consumer.len(), 4, "{}", cell.system);
        assert_eq!(
            per_consumer.iter().sum::<u64>(),
            distinct,
            "{}",
            cell.system
        );
        let (min, max) = (figure(cell, "min_share"), figure(cell, "max_share"));
        let expect = |n: u64| n as f64 / distinct as f64;
        assert_eq!(min, expect(*per_consumer.iter().min().unwrap()));
        assert_eq!(max, expect(*per_consumer.iter().max().unwrap()));
        // Mosquitto hands a shared subscription's messages round-robin.
        assert!(
            min > 0.15 && max < 0.35,
            "{}: shares {per_consumer:?}",
            cell.system
        );
    }
    assert_matches_schema(dir.path());
}

#[test]
fn a_broker_killed_mid_storm_leaves_an_error_cell_with_what_was_measured() {
    let _servers = lock_servers();
    let dir = tempfile::tempdir().unwrap();
    let Some((mut broker, runner)) = run_against_doomed_broker(
        dir.path(),
        "--scenarios connect --clients 3000 --connect-rate 1k --rounds 1 --warmup 0",
    ) else {
        return;
    };
    // Kill it once a few hundred clients are connected (a third of the storm's three seconds).
    let port: u16 = broker.url.rsplit(':').next().unwrap().parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while connections_to(port).values().sum::<u64>() < 300 {
        assert!(Instant::now() < deadline, "the storm never reached 300");
        std::thread::sleep(Duration::from_millis(10));
    }
    broker.child.kill().unwrap();
    broker.child.wait().unwrap();
    let summary = runner
        .join()
        .unwrap()
        .expect("the run finishes and reports");
    assert_eq!(summary.exit, Exit::NotAllOk);
    let cell = &summary.report.cells[0];
    assert_eq!(cell.status, Status::Error, "{cell:?}");
    let reason = cell.reason.as_deref().unwrap();
    assert!(reason.contains("of 3000 connects refused"), "{reason}");
    // What was measured before the kill is kept: the connections made, their CONNACK latency.
    let connected = figure(cell, "connected");
    assert!((300.0..3000.0).contains(&connected), "{connected}");
    assert_eq!(
        connected + figure(cell, "refused") + figure(cell, "failed") + figure(cell, "timed_out"),
        3000.0
    );
    assert!(figure(cell, "connack_p99_ns") > 0.0);
    assert!(cell.latency_ns.is_some(), "{cell:?}");
    assert_eq!(cell.extra["rounds"].as_array().unwrap().len(), 1);
    assert_matches_schema(dir.path());
    assert!(read_json(dir.path())["finished_at"].is_string());
    assert!(dir.path().join("report.md").exists());
}

#[test]
fn two_thousand_clients_connect_from_two_source_addresses() {
    let Some(([url, pid], dir)) = on_servers([
        "FAIRBENCH_TEST_MOSQUITTO_URL",
        "FAIRBENCH_TEST_MOSQUITTO_PID",
    ]) else {
        return;
    };
    let out = dir.path().to_owned();
    let broker = format!("mosquitto={url}");
    let pid = format!("mosquitto={pid}");
    let runner = std::thread::spawn(move || {
        run(&args(
            &out,
            &[
                "--broker",
                &broker,
                "--broker-pid",
                &pid,
                "--scenarios",
                "connect,idle",
                "--clients",
                "2000",
                "--connect-rate",
                "2k",
                "--source-addrs",
                "127.0.0.1,127.0.0.2",
                "--duration",
                "2s",
                "--rounds",
                "1",
                "--warmup",
                "0",
            ],
        ))
    });
    // The kernel's own count of the clients' sockets, at its highest while the run holds them.
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let mut most: BTreeMap<Ipv4Addr, u64> = BTreeMap::new();
    while !runner.is_finished() {
        for (ip, n) in connections_to(port) {
            let m = most.entry(ip).or_default();
            *m = (*m).max(n);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let summary = runner.join().unwrap().unwrap();
    for cell in &summary.report.cells {
        assert_eq!(
            cell.status,
            Status::Ok,
            "{}: {:?}",
            cell.workload,
            cell.reason
        );
        let round = &cell.extra["rounds"][0];
        assert_eq!(
            round["per_source"],
            serde_json::json!({"127.0.0.1": 1000, "127.0.0.2": 1000}),
            "{}",
            cell.workload
        );
        assert_eq!(figure(cell, "connected"), 2000.0);
        assert_eq!(figure(cell, "alive"), 2000.0);
        assert!(figure(cell, "broker_rss_per_conn_bytes") >= 0.0);
        assert!(figure(cell, "client_rss_per_conn_bytes") >= 0.0);
    }
    let connect = &summary.report.cells[0];
    assert!(figure(connect, "connects_per_s") > 0.0);
    assert!(figure(connect, "connack_p99_ns") >= figure(connect, "connack_p50_ns"));
    // Held idle, all 2,000 were open at once, half from each address (127.0.0.1 may also have
    // the run's own control connection).
    let two = Ipv4Addr::new(127, 0, 0, 2);
    assert_eq!(most.get(&two), Some(&1000), "{most:?}");
    assert!(most[&Ipv4Addr::LOCALHOST] >= 1000, "{most:?}");
    assert_matches_schema(dir.path());
}

/// Established IPv4 client sockets to `port` on this machine, by local address
/// (/proc/net/tcp: `local rem st …`, addresses as little-endian hex).
fn connections_to(port: u16) -> BTreeMap<Ipv4Addr, u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let mut by_source = BTreeMap::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(remote), Some(&"01")) =
            (fields.get(1), fields.get(2), fields.get(3))
        else {
            continue;
        };
        let endpoint = |text: &str| {
            let (ip, p) = text.split_once(':')?;
            let ip = u32::from_str_radix(ip, 16).ok()?;
            Some((
                Ipv4Addr::from(ip.swap_bytes()),
                u16::from_str_radix(p, 16).ok()?,
            ))
        };
        if let (Some((ip, _)), Some((_, rport))) = (endpoint(local), endpoint(remote))
            && rport == port
        {
            *by_source.entry(ip).or_default() += 1;
        }
    }
    by_source
}
