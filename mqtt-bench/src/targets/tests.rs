//! The registry's unit tests: which kind names which broker, and what is refused before any
//! connection is made.

use std::sync::Arc;

use super::*;
use common::testing::refusal;

pub fn client() -> Client {
    Client {
        username: None,
        password: None,
        protocol: Protocol::V311,
        keep_alive_s: 60,
        source_addrs: Arc::from(Vec::new()),
        tls: None,
        tag: Arc::from("test"),
    }
}

pub fn reached(sys: &[(&str, &str)], cmdline: &[&str]) -> Reached {
    Reached {
        endpoint: session::endpoint("127.0.0.1:1".into(), &client()).unwrap(),
        pid: None,
        cmdline: cmdline.iter().map(|a| (*a).to_owned()).collect(),
        sys: sys
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        connack: ConnAckInfo::default(),
        monitor: None,
    }
}

#[tokio::test]
async fn what_a_broker_publishes_or_runs_as_names_its_kind() {
    let version = "$SYS/broker/version";
    for (sys, cmdline, kind) in [
        (
            vec![(version, "mosquitto version 2.0.11")],
            vec![],
            "mosquitto",
        ),
        (vec![(version, "mochi-mqtt v2.7.9")], vec![], "mochi-mqtt"),
        (vec![(version, "RabbitMQ 4.0")], vec![], "rabbitmq"),
        (
            vec![("$SYS/brokers/emqx@127.0.0.1/version", "5.8.1")],
            vec![],
            "emqx",
        ),
        (
            vec![],
            vec!["node", "/x/node_modules/aedes-cli/bin/aedes", "start"],
            "aedes",
        ),
        (
            vec![],
            vec![
                "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
                "-cp",
                "lib/*",
                "org.fairbench.hivemq.Launcher",
                "/tmp/x",
                "1883",
                "0",
                "1",
            ],
            "hivemq",
        ),
        (vec![(version, "something else 1.0")], vec![], "mqtt"),
        (vec![], vec![], "mqtt"),
    ] {
        let broker = reached(&sys, &cmdline);
        let (found, description) = describe(&broker).await.unwrap();
        assert_eq!(found, kind, "{sys:?} {cmdline:?}");
        assert!(!description.version.is_empty());
    }
    let emqx = reached(&[("$SYS/brokers/emqx@127.0.0.1/version", "5.8.1")], &[]);
    let (_, description) = describe(&emqx).await.unwrap();
    assert_eq!(description.version, "EMQX 5.8.1");
    assert_eq!(description.verified["node"], "emqx@127.0.0.1");
}

#[tokio::test]
async fn unknown_schemes_and_remote_processes_are_refused_before_any_connection() {
    let spec = TargetSpec::parse("redis://127.0.0.1:6379").unwrap();
    let error = refusal(open(&spec, None, &client(), &Reach::default()).await);
    assert!(error.contains("unknown scheme `redis`"), "{error}");
    assert!(error.contains("mqtt://"), "{error}");
    // A broker on another host is reached (no connection is tried here: its PID cannot be
    // read from this machine, which is refused first).
    let spec = TargetSpec::parse("mqtt://10.1.2.3:1883").unwrap();
    let pid = ServerPid::parse("1").unwrap();
    let error = refusal(open(&spec, Some(&pid), &client(), &Reach::default()).await);
    assert!(error.contains("is on another host"), "{error}");
}
