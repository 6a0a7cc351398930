//! The systems of a run: each broker started or reached and described once (with its process,
//! when one is given), then one system per protocol it is spoken to in (`NAME-mqtt3.1.1`,
//! `NAME-mqtt5` when both are asked), each proven to route a message of the run's payload size
//! before any clock starts. A broker that refuses a protocol keeps its system, refused, with
//! the broker's own answer as the reason.

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::bail;
use common::options::TargetSpec;
use common::procstat::ServerPid;
use common::progress::Progress;

use crate::opts::Opts;
use crate::protocol::codec::Protocol;
use crate::session::{Client, verify_round_trip};
use crate::targets::{self, Broker};

/// One broker spoken to in one protocol: a column of the report.
pub struct System {
    pub broker: Broker,
    pub protocol: Protocol,
    /// Why it is not measured (it refused the protocol), when it is not.
    pub refusal: Option<String>,
}

/// The brokers to measure: those named, or the embedded default.
pub fn specs(targets: &[TargetSpec]) -> anyhow::Result<Vec<TargetSpec>> {
    if targets.is_empty() {
        return Ok(vec![
            TargetSpec::parse(targets::DEFAULT_TARGET).map_err(anyhow::Error::msg)?,
        ]);
    }
    Ok(targets.to_vec())
}

/// The client every connection of the run is made as (the URL adds its credentials).
pub fn client(opts: &Opts, run_tag: &str) -> Client {
    Client {
        username: None,
        password: None,
        protocol: Protocol::V311,
        keep_alive_s: opts.keep_alive_s(),
        source_addrs: Arc::from(opts.source_addrs.clone()),
        tls: None,
        tag: Arc::from(run_tag),
    }
}

/// Reaches or starts every broker, names its systems, and verifies a round trip of the run's
/// payload in each protocol on topics and client ids tagged `run_tag`. Returns the systems and
/// the reference's name.
pub async fn prepare(
    opts: &Opts,
    specs: &[TargetSpec],
    run_tag: &str,
    progress: &Progress,
    access: &targets::Reach,
) -> anyhow::Result<(Vec<System>, String)> {
    let client = client(opts, run_tag);
    let mut brokers = Vec::new();
    for spec in specs {
        let pid = pid_for(&opts.broker_pids, spec, specs.len());
        brokers.push(targets::open(spec, pid, &client, access).await?);
    }
    check_pids(&brokers, opts)?;
    let mut systems = Vec::new();
    for broker in brokers {
        for &protocol in &opts.protocols {
            let mut system = speak(&broker, protocol, opts.protocols.len() > 1);
            let topic = format!("{}/{run_tag}/verify", opts.topic_prefix);
            let endpoint = &system.broker.link.endpoint;
            let name = system.broker.info.name.clone();
            match verify_round_trip(endpoint, &topic, opts.payload_bytes, run_tag).await {
                Ok(connack) => {
                    progress.line(format!(
                        "{name}: {} at {} — verified a {}-byte QoS 1 round trip in {protocol}",
                        system.broker.info.version, endpoint.addr, opts.payload_bytes
                    ));
                    system.broker.link.connack = connack;
                }
                // A broker that does not speak MQTT 5 is a system of refused cells, not a
                // failed run: the table says so beside the protocols it does speak.
                Err(e) if protocol == Protocol::V5 && e.refuses_protocol() => {
                    progress.line(format!("{name}: refused: {e}"));
                    system.refusal = Some(e.to_string());
                }
                Err(e) => bail!("{name}: {e}"),
            }
            systems.push(system);
        }
    }
    let reference = settle_names(&systems, opts)?;
    Ok((systems, reference))
}

/// `broker` as spoken to in `protocol`: its endpoint for that protocol, and its name suffixed
/// with the protocol when several are measured.
fn speak(broker: &Broker, protocol: Protocol, several: bool) -> System {
    let mut link = broker.link.clone();
    link.endpoint.protocol = protocol;
    if let (Protocol::V5, Some(addr)) = (protocol, &broker.v5_addr) {
        let resolved: Vec<std::net::SocketAddr> = addr.parse().into_iter().collect();
        link.endpoint.addr = addr.as_str().into();
        link.endpoint.socket_addrs = resolved.into();
    }
    let mut info = broker.info.clone();
    if several {
        info.name = format!("{}-mqtt{}", info.name, protocol.word());
    }
    info.verified
        .insert("protocol".into(), format!("MQTT {}", protocol.word()));
    System {
        broker: Broker {
            link,
            info,
            v5_addr: broker.v5_addr.clone(),
            guard: broker.guard.clone(),
            dropped: broker.dropped.clone(),
        },
        protocol,
        refusal: None,
    }
}

/// The `--broker-pid` of a broker, looked up before the broker is reached: by the name the
/// user gave it, or the only unnamed one when there is one broker.
fn pid_for<'a>(pids: &'a [ServerPid], spec: &TargetSpec, brokers: usize) -> Option<&'a ServerPid> {
    match &spec.name {
        Some(name) => ServerPid::find(pids, name, brokers),
        None => pids.iter().find(|p| p.name.is_none() && brokers == 1),
    }
}

/// Every named `--broker-pid` names a broker.
fn check_pids(brokers: &[Broker], opts: &Opts) -> anyhow::Result<()> {
    let names: Vec<&str> = brokers.iter().map(|b| b.info.name.as_str()).collect();
    for pid in &opts.broker_pids {
        if let Some(name) = &pid.name
            && !names.contains(&name.as_str())
        {
            bail!(
                "--broker-pid {name}={} names no broker (brokers: {})",
                pid.pid,
                names.join(", ")
            );
        }
    }
    Ok(())
}

/// Checks the systems' names are distinct and that `--reference` names a system (or a broker,
/// meaning its first protocol); returns the reference.
fn settle_names(systems: &[System], opts: &Opts) -> anyhow::Result<String> {
    let names: Vec<String> = systems.iter().map(|s| s.broker.info.name.clone()).collect();
    let urls: Vec<String> = systems
        .iter()
        .map(|s| format!("{} {}", s.broker.info.url_redacted, s.protocol))
        .collect();
    let asked = opts.common.reference.as_deref().map(|r| {
        let suffixed = format!("{r}-mqtt{}", opts.protocols[0].word());
        if names.iter().any(|n| n == r) || !names.contains(&suffixed) {
            r.to_owned()
        } else {
            suffixed
        }
    });
    common::run::check_names(&names, &urls, asked.as_deref(), "--broker")
}

/// The source addresses, each checked to be bindable here (a source address must be local).
pub fn check_source_addrs(addrs: &[IpAddr]) -> anyhow::Result<()> {
    for ip in addrs {
        crate::os::bindable(*ip).map_err(anyhow::Error::msg)?;
    }
    Ok(())
}
