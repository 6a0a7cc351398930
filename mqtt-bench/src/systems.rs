//! The brokers of a run: each started or reached and described (with its process, when one is
//! given), named, and proven to route a message of the run's payload size before any clock
//! starts.

use anyhow::bail;
use common::options::TargetSpec;
use common::procstat::ServerPid;
use common::progress::Progress;

use crate::opts::Opts;
use crate::session::verify_round_trip;
use crate::targets::{self, Broker};

/// The brokers to measure: those named, or the embedded default.
pub fn specs(targets: &[TargetSpec]) -> anyhow::Result<Vec<TargetSpec>> {
    if targets.is_empty() {
        return Ok(vec![
            TargetSpec::parse(targets::DEFAULT_TARGET).map_err(anyhow::Error::msg)?,
        ]);
    }
    Ok(targets.to_vec())
}

/// Reaches or starts every broker, names them, and verifies a round trip of the run's payload
/// on topics and client ids tagged `run_tag`. Returns the brokers and the reference's name.
pub async fn prepare(
    opts: &Opts,
    specs: &[TargetSpec],
    run_tag: &str,
    progress: &Progress,
) -> anyhow::Result<(Vec<Broker>, String)> {
    let mut brokers = Vec::new();
    for spec in specs {
        let pid = pid_for(&opts.broker_pids, spec, specs.len());
        brokers.push(targets::open(spec, pid).await?);
    }
    let reference = settle_names(&brokers, opts)?;
    for broker in &brokers {
        let endpoint = &broker.link.endpoint;
        let topic = format!("{}/{run_tag}/verify", opts.topic_prefix);
        verify_round_trip(endpoint, &topic, opts.payload_bytes, run_tag)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", broker.info.name))?;
        progress.line(format!(
            "{}: {} at {} — verified a {}-byte QoS 1 round trip",
            broker.info.name, broker.info.version, endpoint.addr, opts.payload_bytes
        ));
    }
    Ok((brokers, reference))
}

/// The `--broker-pid` of a broker, looked up before the broker is reached: by the name the
/// user gave it, or the only unnamed one when there is one broker.
fn pid_for<'a>(pids: &'a [ServerPid], spec: &TargetSpec, brokers: usize) -> Option<&'a ServerPid> {
    match &spec.name {
        Some(name) => ServerPid::find(pids, name, brokers),
        None => pids.iter().find(|p| p.name.is_none() && brokers == 1),
    }
}

/// Checks the brokers' names are distinct and that `--reference` and every named
/// `--broker-pid` name one; returns the reference.
fn settle_names(brokers: &[Broker], opts: &Opts) -> anyhow::Result<String> {
    let names: Vec<String> = brokers.iter().map(|b| b.info.name.clone()).collect();
    let urls: Vec<String> = brokers
        .iter()
        .map(|b| b.info.url_redacted.clone())
        .collect();
    let reference =
        common::run::check_names(&names, &urls, opts.common.reference.as_deref(), "--broker")?;
    for pid in &opts.broker_pids {
        if let Some(name) = &pid.name
            && !names.contains(name)
        {
            bail!(
                "--broker-pid {name}={} names no broker (brokers: {})",
                pid.pid,
                names.join(", ")
            );
        }
    }
    Ok(reference)
}
