//! A broker on another host, as mqtt-bench sees one: a Mosquitto of the test's own listening
//! only on the host side of a network namespace's bridge (a non-loopback address the test
//! made; load goes nowhere else), beside one on loopback whose process is given. In one run
//! the far broker is measured, labelled remote, and its results and report say what could not
//! be measured from afar (its process's CPU and memory, its configuration file); the near one
//! gets its broker CPU per message. Needs root for the namespace (skipped otherwise).

mod support;

use common::exit::Exit;
use common::results::Location;
use common::target::FromAfar;
use common::testing::netns::Namespaces;
use support::*;

/// A Mosquitto listening on `host` only, anonymous, persistence off.
fn mosquitto_on(host: &str) -> OwnMosquitto {
    let port = std::net::TcpListener::bind((host, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "listener {port} {host}\nallow_anonymous true\npersistence false\nlog_dest stderr\n"
    );
    OwnMosquitto::launch(&config, (host, port), "mqtt", tempfile::tempdir().unwrap())
}

#[test]
fn a_broker_on_another_host_says_what_was_not_measured_and_loopback_gets_broker_cpu() {
    if !mosquitto_installed() {
        return;
    }
    let Some(net) = Namespaces::create(1) else {
        return;
    };
    let host = net.host_address().to_string();
    let far = mosquitto_on(&host);
    let near = mosquitto_on("127.0.0.1");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (far_url, near_url) = (format!("far={}", far.url), format!("near={}", near.url));
    let near_pid = format!("near={}", near.pid());
    let summary = run(&args(
        &out,
        &[
            "--broker",
            &far_url,
            "--broker",
            &near_url,
            "--broker-pid",
            &near_pid,
            "--scenarios",
            "qos1",
            "--duration",
            "300ms",
            "--rounds",
            "1",
            "--warmup",
            "0",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:?}", summary.report.cells);
    assert_matches_schema(&out);
    let report = &summary.report;
    let system = |name: &str| report.systems.iter().find(|s| s.name == name).unwrap();
    let cell = |name: &str| report.cells.iter().find(|c| c.system == name).unwrap();
    let afar = [FromAfar::ServerUsage.line(), FromAfar::ConfigFile.line()];

    let far_system = system("far");
    assert_eq!(far_system.location, Location::Remote);
    assert!(far_system.labels.iter().any(|l| l == "remote"));
    for line in afar {
        assert!(
            far_system.not_measured.iter().any(|l| l == line),
            "{:?}",
            far_system.not_measured
        );
    }
    assert!(cell("far").extra["broker_cpu_ns_per_msg"].is_null());
    assert!(cell("far").extra["delivery"]["sent"].as_u64().unwrap() > 0);

    let near_system = system("near");
    assert_eq!(near_system.location, Location::Local);
    assert!(
        near_system.not_measured.is_empty(),
        "{:?}",
        near_system.not_measured
    );
    assert!(
        cell("near").extra["broker_cpu_ns_per_msg"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{:?}",
        cell("near").extra
    );

    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("Not measured of far (on another host): CPU time and resident memory"),
        "{markdown}"
    );
    assert!(!markdown.contains("Not measured of near"), "{markdown}");
    drop((far, near));
    drop(net);
}
