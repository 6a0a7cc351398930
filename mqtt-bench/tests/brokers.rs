//! `mqtt-bench` end to end, in-process, against the embedded broker and the real brokers the
//! test command starts on loopback: every scenario, every message accounted for.

mod support;

use common::exit::Exit;
use common::results::{Cell, Report, Status};
use support::*;

fn cells<'a>(report: &'a Report, system: &str) -> Vec<&'a Cell> {
    report.cells.iter().filter(|c| c.system == system).collect()
}

fn delivery(cell: &Cell) -> (u64, u64, u64, u64) {
    let d = &cell.extra["delivery"];
    let n = |k: &str| d[k].as_u64().unwrap();
    (n("sent"), n("distinct"), n("lost"), n("duplicates"))
}

/// Every owed message is either delivered or lost, and QoS 1/2 lose nothing.
fn assert_accounted(cell: &Cell) {
    let (sent, distinct, lost, duplicates) = delivery(cell);
    assert!(
        sent > 0,
        "{} · {}: nothing sent",
        cell.workload,
        cell.system
    );
    assert_eq!(sent, distinct + lost, "{cell:?}");
    let qos1_or_2 = cell.workload.contains("qos1") || cell.workload.contains("qos2");
    if qos1_or_2 {
        assert_eq!(
            lost, 0,
            "{} · {} lost QoS 1/2 messages",
            cell.workload, cell.system
        );
    }
    if cell.workload.contains("qos2") {
        assert_eq!(duplicates, 0, "{cell:?}");
    }
}

#[test]
fn every_scenario_runs_against_mosquitto_and_the_embedded_broker_interleaved() {
    let Some(([url, pid], dir)) = on_servers([
        "FAIRBENCH_TEST_MOSQUITTO_URL",
        "FAIRBENCH_TEST_MOSQUITTO_PID",
    ]) else {
        return;
    };
    let out = dir.path().join("run");
    let mosquitto = format!("mosquitto={url}");
    let pid = format!("mosquitto={pid}");
    let summary = run(&args(
        &out,
        &[
            "--broker",
            &mosquitto,
            "--broker",
            "embedded",
            "--broker-pid",
            &pid,
        ],
    ))
    .unwrap();
    let report = &summary.report;
    let rows: Vec<&str> = cells(report, "mosquitto")
        .iter()
        .map(|c| c.workload.as_str())
        .collect();
    assert_eq!(
        rows,
        [
            "qos1 acked publish, 64 in flight",
            "fan-out 1→20, qos0",
            "qos0 delivered 1→1",
            "latency @ 2,000/s, qos0",
            "latency @ 2,000/s, qos1",
            "latency @ 2,000/s, qos2",
            "qos2 acked publish, 64 in flight"
        ]
    );
    for cell in &report.cells {
        // A busy machine may leave a paced publisher short of its rate (client-limited);
        // anything else is a defect.
        assert!(
            matches!(cell.status, Status::Ok | Status::ClientLimited),
            "{} · {}: {:?} {:?}",
            cell.workload,
            cell.system,
            cell.status,
            cell.reason
        );
        assert_accounted(cell);
        let rounds = cell.extra["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 2, "the warm-up is discarded, two rounds kept");
        assert!(cell.latency_ns.unwrap().p99 >= cell.latency_ns.unwrap().p50);
        assert!(cell.client_cpu_ns_per_op.unwrap() > 0.0);
    }
    // The fan-out owes every message to each of its 20 subscribers.
    let fanout = cells(report, "mosquitto")[1];
    let rounds = fanout.extra["rounds"].as_array().unwrap();
    let owed: u64 = rounds
        .iter()
        .map(|r| r["sent"].as_u64().unwrap() * 20)
        .sum();
    assert_eq!(delivery(fanout).0, owed);
    // Mosquitto's own CPU and memory were sampled; the embedded broker's CPU from its threads.
    for cell in cells(report, "mosquitto") {
        assert!(
            cell.extra["broker_cpu_ns_per_msg"].as_f64().is_some(),
            "{cell:?}"
        );
        assert!(cell.extra["broker_peak_rss_bytes"].as_u64().unwrap() > 0);
    }
    assert!(
        cells(report, "embedded")[0].extra["broker_cpu_ns_per_msg"]
            .as_f64()
            .is_some()
    );
    // The QoS 0 sweep reports offered, accepted and delivered rates for each step.
    let sweep = &cells(report, "mosquitto")[2].extra["rounds"][0]["steps"];
    let first = &sweep[0];
    assert_eq!(first["offered_per_s"], 5_000.0);
    for key in ["accepted_per_s", "delivered_per_s"] {
        assert!(first[key].as_f64().unwrap() > 0.0, "{first}");
    }
    // The systems describe themselves.
    let mosq = &report.systems[0];
    assert!(
        mosq.version.starts_with("mosquitto version"),
        "{}",
        mosq.version
    );
    assert_eq!(mosq.verified["config:max_inflight_messages"], "64");
    assert_eq!(mosq.verified["config:persistence"], "false");
    let embedded = &report.systems[1];
    assert_eq!(embedded.labels, ["embedded", "colocated"]);
    assert_matches_schema(&out);
    let json = read_json(&out);
    assert_eq!(json["tool"], "mqtt-bench");
    assert_eq!(json["systems"][0]["location"], "local");
    assert_eq!(json["systems"][1]["location"], "embedded");
    assert!(
        json["environment"]["durable_write_floor_ns"]
            .as_u64()
            .is_some()
    );
    assert_eq!(json["options"]["payload_bytes"], 64);
    assert_eq!(json["options"]["targets"][0], mosquitto.as_str());
    assert_eq!(json["extra"]["client"]["inflight"], 64);
    assert!(
        json["extra"]["brokers"]["mosquitto"]["rss_after_run_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("| scenario | mosquitto (ref) | embedded [embedded] [colocated] | embedded / mosquitto |"), "{markdown}");
    assert!(markdown.contains("QoS 0 1→1 sweep"), "{markdown}");
}

#[test]
fn rabbitmq_and_mochi_are_measured_and_rabbitmq_downgrading_qos2_is_refused() {
    let (Some(rabbit), Some(mochi)) = (
        server_env("FAIRBENCH_TEST_RABBITMQ_URL"),
        std::env::var("FAIRBENCH_TEST_MOCHI_URL").ok().or_else(|| {
            eprintln!("note: mochi-mqtt is not running (it needs a Go toolchain); measuring RabbitMQ only");
            None
        }).or(Some(String::new())),
    ) else {
        return;
    };
    let _servers = lock_servers();
    let dir = tempfile::tempdir().unwrap();
    let rabbit = format!("rabbitmq={rabbit}");
    let mochi = format!("mochi={mochi}");
    let mut extra = vec![
        "--broker",
        rabbit.as_str(),
        "--scenarios",
        "qos1,qos2",
        "--rounds",
        "1",
    ];
    if mochi != "mochi=" {
        extra.extend(["--broker", mochi.as_str()]);
    }
    let summary = run(&args(dir.path(), &extra)).unwrap();
    assert_eq!(
        summary.exit,
        Exit::NotAllOk,
        "RabbitMQ's QoS 2 cell is not ok"
    );
    assert_matches_schema(dir.path());
    let report = &summary.report;
    let find = |w: &str, s: &str| {
        report
            .cells
            .iter()
            .find(|c| c.workload.starts_with(w) && c.system == s)
            .unwrap()
    };
    let qos1 = find("qos1", "rabbitmq");
    assert_eq!(qos1.status, Status::Ok, "{:?}", qos1.reason);
    assert_accounted(qos1);
    // A broker that grants QoS 1 for a QoS 2 subscription does not offer QoS 2: refused, with
    // what it granted, like any mode a broker declines.
    let qos2 = find("qos2", "rabbitmq");
    assert_eq!(qos2.status, Status::Refused, "{:?}", qos2.reason);
    assert!(
        qos2.reason.as_deref().unwrap().contains("granted QoS 1"),
        "{:?}",
        qos2.reason
    );
    if mochi != "mochi=" {
        for w in ["qos1", "qos2"] {
            let cell = find(w, "mochi");
            assert_eq!(cell.status, Status::Ok, "{:?}", cell.reason);
            assert_accounted(cell);
        }
    }
}

#[test]
fn a_broker_that_drops_qos1_messages_gets_an_error_cell_with_the_count() {
    // One message in flight and five queued per subscriber: at speed, Mosquitto drops QoS 1
    // messages for a subscriber that is behind, which must be reported as loss, not a figure.
    let Some(broker) = OwnMosquitto::start("max_inflight_messages 1\nmax_queued_messages 5") else {
        return;
    };
    let _servers = lock_servers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("dropping={}", broker.url);
    let summary = run(&args(
        dir.path(),
        &[
            "--broker",
            &url,
            "--scenarios",
            "fanout",
            "--qos",
            "1",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--backlog",
            "100000",
        ],
    ))
    .unwrap();
    let cell = &summary.report.cells[0];
    let (sent, distinct, lost, _) = delivery(cell);
    assert!(
        lost > 0,
        "the broker was expected to drop messages: {cell:?}"
    );
    assert_eq!(sent, distinct + lost);
    assert_eq!(cell.status, Status::Error);
    let reason = cell.reason.as_deref().unwrap();
    assert!(reason.contains("QoS 1 messages lost"), "{reason}");
    assert!(cell.usable_throughput().is_none());
    assert_eq!(summary.exit, Exit::NotAllOk);
    assert_matches_schema(dir.path());
}

#[test]
fn a_paced_cell_keeps_its_missed_ticks_and_lost_messages_beside_its_latency() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // A publish rate no client here keeps (two million a second) for the latency row, and a
    // QoS 0 sweep of one step, on the embedded broker.
    let summary = run(&args(
        &out,
        &[
            "--scenarios",
            "latency,qos0",
            "--qos",
            "0",
            "--latency-rate",
            "2M",
            "--sweep",
            "5k",
            "--duration",
            "500ms",
            "--rounds",
            "1",
        ],
    ))
    .unwrap();
    assert_matches_schema(&out);
    let report = &summary.report;
    let row = |name: &str| {
        *cells(report, "embedded")
            .iter()
            .find(|c| c.workload == name)
            .unwrap_or_else(|| panic!("no cell {name}"))
    };
    let latency = row("latency @ 2,000,000/s, qos0");
    assert_eq!(latency.target_rate, Some(2e6));
    let missed = latency.missed_ticks.unwrap();
    assert!(
        missed > 0,
        "a rate the publisher cannot keep misses ticks: {latency:?}"
    );
    assert!(latency.latency_ns.is_some(), "{latency:?}");
    let of_sent = &latency.extra["latency_of_sent_ns"];
    assert_eq!(
        of_sent["lost"], latency.extra["delivery"]["lost"],
        "{of_sent}"
    );
    // The QoS 0 sweep's cell keeps the pace of the step its figure comes from.
    let qos0 = row("qos0 delivered 1→1");
    assert_eq!(qos0.target_rate, Some(5e3), "{qos0:?}");
    assert!(
        qos0.missed_ticks.is_some() && qos0.achieved_rate.is_some(),
        "{qos0:?}"
    );
    assert!(qos0.extra["delivery"]["lost"].is_u64());
    // The report's row says how late the sends started, as a distribution, beside how many
    // were late by more than one interval, whatever the cell's status.
    let lag = latency
        .schedule_lag_ns
        .expect("a paced cell keeps its lateness");
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    let row = markdown
        .lines()
        .find(|l| l.starts_with("| latency @ 2,000,000/s, qos0"))
        .unwrap_or_else(|| panic!("{markdown}"));
    let late = format!(
        "sent late p50 {} / p99 {}, {}",
        common::human::format_latency_ns(lag.p50),
        common::human::format_latency_ns(lag.p99),
        common::human::format_thousands(missed as f64)
    );
    assert!(row.contains(&late), "{late} not in {row}");
    assert!(row.contains("by more than their interval"), "{row}");
}

/// HiveMQ CE as `scripts/service/hivemq.sh` runs it: every scenario in its smoke form over MQTT
/// 3.1.1 and 5, then QoS 1 and the retained messages over `mqtts://`. QoS 1 and the retained
/// messages come through whole; any other QoS 1/2 loss (a subscriber behind by HiveMQ's queue
/// of 1,000 on a loaded machine) must be HiveMQ's own, which its dropped-message metric, read
/// around every window, counts exactly.
#[test]
fn every_scenario_runs_against_hivemq_over_both_protocols_and_tls() {
    let Some(([url, pid, tls], dir)) = on_servers([
        "FAIRBENCH_TEST_HIVEMQ_URL",
        "FAIRBENCH_TEST_HIVEMQ_PID",
        "FAIRBENCH_TEST_HIVEMQ_TLS_URL",
    ]) else {
        return;
    };
    let out = dir.path().join("plain");
    let hivemq = format!("hivemq={url}");
    let pid = format!("hivemq={pid}");
    let summary = run(&args(
        &out,
        &[
            "--broker",
            &hivemq,
            "--broker-pid",
            &pid,
            "--protocol",
            "3.1.1,5",
            "--scenarios",
            "all",
            "--duration",
            "500ms",
            "--away",
            "150ms",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--sweep",
            "5k",
            "--clients",
            "200",
            "--retained",
            "200",
            "--subscribers",
            "10",
        ],
    ))
    .unwrap();
    assert_matches_schema(&out);
    let report = &summary.report;
    for system in &report.systems {
        assert_eq!(system.kind, "hivemq", "{system:?}");
        assert_eq!(system.version, "HiveMQ Community Edition 2025.5");
        assert_eq!(system.verified["hivemq:max-queued-messages"], "1000");
        assert_eq!(
            system.verified["hivemq:queued-messages-strategy"],
            "discard"
        );
        assert_eq!(system.verified["hivemq:persistence-mode"], "in_memory");
        assert!(system.verified.contains_key("hivemq:overload-protection"));
    }
    for protocol in ["3.1.1", "5"] {
        let system = format!("hivemq-mqtt{protocol}");
        let rows = cells(report, &system);
        assert_eq!(rows.len(), 13, "{system}: every scenario");
        for cell in rows {
            let what = format!("{} · {}", cell.workload, cell.system);
            let must_pass =
                cell.workload.starts_with("qos1") || cell.workload.starts_with("retained");
            let lost_by_broker = cell.status == Status::Error
                && cell
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains("the broker counted"));
            assert!(
                matches!(cell.status, Status::Ok | Status::ClientLimited)
                    || (!must_pass && lost_by_broker),
                "{what}: {:?} {:?}",
                cell.status,
                cell.reason
            );
            let Some(d) = cell.extra.get("delivery") else {
                continue;
            };
            let (sent, distinct, lost) = (
                d["sent"].as_u64().unwrap(),
                d["distinct"].as_u64().unwrap(),
                d["lost"].as_u64().unwrap(),
            );
            assert_eq!(sent, distinct + lost, "{what}");
            // HiveMQ's own count, read around the window, beside the ledger.
            let dropped = cell.extra["broker_dropped"].as_u64();
            assert!(dropped.is_some(), "{what}: {:?}", cell.extra);
            let qos0 = cell.workload.contains("qos0")
                || cell.workload.starts_with("connect")
                || cell.workload.starts_with("idle");
            if !qos0 {
                assert_eq!(
                    Some(lost),
                    dropped,
                    "{what}: the ledger's loss is HiveMQ's drop count"
                );
            }
        }
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("dropped by the broker's own count"),
        "{markdown}"
    );

    // The same broker over TLS, in MQTT 5.
    let out = dir.path().join("tls");
    let hivemq = format!("hivemq={tls}");
    let summary = run(&args(
        &out,
        &[
            "--broker",
            &hivemq,
            "--broker-pid",
            &pid,
            "--protocol",
            "5",
            "--scenarios",
            "qos1,retained",
            "--duration",
            "500ms",
            "--rate",
            "5k",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--retained",
            "200",
        ],
    ))
    .unwrap();
    let report = &summary.report;
    let system = &report.systems[0];
    assert_eq!(system.version, "HiveMQ Community Edition 2025.5");
    assert!(
        system.verified["tls_version"].starts_with("TLSv1."),
        "{system:?}"
    );
    assert_eq!(system.verified["tls_verification"], "verify-full");
    assert_eq!(report.cells.len(), 2);
    for cell in &report.cells {
        assert_eq!(
            cell.status,
            Status::Ok,
            "{} over TLS: {:?}",
            cell.workload,
            cell.reason
        );
        assert_accounted(cell);
    }
}
