//! mqtt-bench's options: the common flags, the brokers and their processes, the scenarios and
//! their settings, and the checks clap cannot make on sizes, rates and combinations.

use std::fmt;

use anyhow::bail;
use clap::Parser;
use common::options::{CommonOpts, TargetSpec};
use common::procstat::ServerPid;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::STAMP_BYTES;

/// The largest payload mqtt-bench sends: what MQTT's remaining length can carry, less room
/// for the topic.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024 * 1024;

#[derive(Parser, Serialize, Deserialize, Debug, Clone)]
#[command(
    name = "mqtt-bench",
    version,
    about = "MQTT broker throughput, fan-out, delivered QoS 0 rate and delivery latency, every message accounted for",
    after_help = "Without --broker (or --target) an embedded broker is started in this process and \
                  measured, labelled embedded and colocated. --connections is not used: each \
                  scenario fixes its connections (one publisher; one subscriber, or --subscribers)."
)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// A broker to measure, as `[NAME=]mqtt://[USER:PASSWORD@]HOST:PORT` (the same as --target).
    #[arg(long = "broker", value_name = "[NAME=]URL", value_parser = TargetSpec::parse)]
    #[serde(skip)]
    pub brokers: Vec<TargetSpec>,

    /// A local broker's process, as `[NAME=]PID`, whose CPU time and resident memory are
    /// sampled from /proc during every window.
    #[arg(long = "broker-pid", value_name = "[NAME=]PID", value_parser = ServerPid::parse)]
    pub broker_pids: Vec<ServerPid>,

    /// Scenarios to run, comma-separated: qos1, fanout, qos0, latency, qos2 [default: all].
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = Scenario::parse)]
    pub scenarios: Vec<Scenario>,

    /// Bytes in every message's payload (at least 20: the sequence number, send time and
    /// window are stamped into its first 20 bytes).
    #[arg(long = "payload", default_value = "64", value_parser = payload_bytes)]
    pub payload_bytes: usize,

    /// QoS 1/2 messages the publisher leaves unacknowledged (seed 000: 64).
    #[arg(long, default_value = "64", value_parser = inflight)]
    pub inflight: usize,

    /// Subscribers on the fan-out topic.
    #[arg(long, default_value = "50", value_parser = subscribers)]
    pub subscribers: usize,

    /// QoS of the fan-out publisher and subscribers.
    #[arg(long, default_value = "0", value_parser = qos)]
    pub fanout_qos: u8,

    /// Publish rates of the QoS 0 1→1 sweep, ascending; it stops after the first rate the
    /// broker cannot take in full or delivers with more loss than --max-loss.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "RATES",
        default_value = "10k,20k,40k,80k,160k,320k,640k,1.28M",
        value_parser = common::human::parse_rate
    )]
    #[serde(rename = "sweep_rates_per_s")]
    pub sweep: Vec<f64>,

    /// The most QoS 0 loss a sweep step may have and still count (0.001 = 0.1%).
    #[arg(long, default_value = "0.001", value_parser = fraction)]
    pub max_loss: f64,

    /// The paced publish rate of the delivery-latency scenario (open loop).
    #[arg(long, default_value = "10k", value_parser = common::human::parse_rate)]
    #[serde(rename = "latency_rate_per_s")]
    pub latency_rate: f64,

    /// Closed loop: most messages the publisher may run ahead of its slowest subscriber, so
    /// the broker's queues stay bounded.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub backlog: u64,

    /// Every topic starts with this; each window publishes on a topic of its own below it.
    #[arg(long, default_value = "fairbench")]
    pub topic_prefix: String,
}

impl Opts {
    /// `--broker` is `--target` by another name: both end up in `common.targets`, as the
    /// report stores them.
    pub fn with_brokers_as_targets(mut self) -> Opts {
        self.common.targets.append(&mut self.brokers);
        self
    }

    /// What clap cannot check: values that only make sense together.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.common.validate().map_err(anyhow::Error::msg)?;
        if self.sweep.is_empty() {
            bail!("--sweep needs at least one publish rate");
        }
        if self.sweep.windows(2).any(|w| w[1] <= w[0]) {
            bail!("--sweep rates must ascend (each step offers more than the one before)");
        }
        if self.topic_prefix.is_empty() || self.topic_prefix.contains(['+', '#']) {
            bail!("--topic-prefix must be a plain topic level (no wildcards)");
        }
        let unnamed = self.broker_pids.iter().filter(|p| p.name.is_none()).count();
        if unnamed > 0 && (self.common.targets.len() > 1 || self.broker_pids.len() > 1) {
            bail!("with several brokers, give each --broker-pid a name: --broker-pid NAME=PID");
        }
        Ok(())
    }
}

/// The five scenarios of the MQTT section of seed 000.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// QoS 1 acked publish throughput, `--inflight` in flight.
    Qos1,
    /// One publisher, `--subscribers` subscribers on one topic.
    Fanout,
    /// QoS 0 1→1 delivered rate over a publish-rate sweep.
    Qos0,
    /// Delivery latency at a paced rate, QoS 0, 1 and 2.
    Latency,
    /// QoS 2 acked publish throughput.
    Qos2,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::Qos1,
        Scenario::Fanout,
        Scenario::Qos0,
        Scenario::Latency,
        Scenario::Qos2,
    ];

    pub fn parse(text: &str) -> Result<Scenario, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "qos1" => Ok(Scenario::Qos1),
            "fanout" | "fan-out" => Ok(Scenario::Fanout),
            "qos0" => Ok(Scenario::Qos0),
            "latency" => Ok(Scenario::Latency),
            "qos2" => Ok(Scenario::Qos2),
            other => Err(format!(
                "`{other}` is not a scenario; choose from qos1, fanout, qos0, latency, qos2"
            )),
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Scenario::Qos1 => "qos1",
            Scenario::Fanout => "fanout",
            Scenario::Qos0 => "qos0",
            Scenario::Latency => "latency",
            Scenario::Qos2 => "qos2",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

impl Serialize for Scenario {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.word())
    }
}

impl<'de> Deserialize<'de> for Scenario {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Scenario, D::Error> {
        let word = String::deserialize(deserializer)?;
        Scenario::parse(&word).map_err(serde::de::Error::custom)
    }
}

pub fn payload_bytes(text: &str) -> Result<usize, String> {
    let bytes = common::human::parse_count(text)? as usize;
    if bytes < STAMP_BYTES {
        return Err(format!(
            "--payload {bytes} is too small: every message carries a {STAMP_BYTES}-byte stamp (sequence number, send time, window)"
        ));
    }
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "--payload {bytes} is larger than MQTT can carry ({MAX_PAYLOAD_BYTES} bytes)"
        ));
    }
    Ok(bytes)
}

pub fn inflight(text: &str) -> Result<usize, String> {
    let n = common::human::parse_count(text)?;
    if n > u64::from(u16::MAX) {
        return Err(format!(
            "--inflight {n} is more than MQTT's 65,535 packet identifiers"
        ));
    }
    Ok(n as usize)
}

pub fn subscribers(text: &str) -> Result<usize, String> {
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of subscribers"))?;
    if n == 0 {
        return Err("--subscribers 0: fan-out needs at least one subscriber".into());
    }
    if n > 10_000 {
        return Err(format!("--subscribers {n} is more than 10,000"));
    }
    Ok(n as usize)
}

pub fn qos(text: &str) -> Result<u8, String> {
    match text.trim() {
        "0" => Ok(0),
        "1" => Ok(1),
        "2" => Ok(2),
        other => Err(format!("`{other}` is not a QoS (0, 1 or 2)")),
    }
}

pub fn fraction(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("`{text}` is not a fraction (0.001 or 0.1%)"))?;
    if !(0.0..1.0).contains(&value) {
        return Err(format!("`{text}` must be at least 0 and below 1"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_their_range_are_refused() {
        assert!(payload_bytes("19").unwrap_err().contains("stamp"));
        assert_eq!(payload_bytes("1k"), Ok(1_000));
        assert!(payload_bytes("1G").is_err());
        assert!(inflight("70000").is_err());
        assert!(subscribers("0").unwrap_err().contains("at least one"));
        assert!(qos("3").is_err());
        assert_eq!(fraction("0.1%"), Ok(0.001));
        assert!(fraction("1").is_err());
        assert_eq!(Scenario::parse("Fan-Out"), Ok(Scenario::Fanout));
        assert!(Scenario::parse("qos3").is_err());
    }

    #[test]
    fn the_options_a_report_stores_read_back() {
        let opts = Opts::parse_from([
            "mqtt-bench",
            "--broker",
            "m=mqtt://u:secret@127.0.0.1:1883",
            "--broker-pid",
            "m=42",
            "--scenarios",
            "qos1,fanout",
            "--sweep",
            "5k,20k",
            "--duration",
            "2s",
        ])
        .with_brokers_as_targets();
        let stored = serde_json::to_value(&opts).unwrap();
        assert_eq!(stored["targets"][0], "m=mqtt://u:***@127.0.0.1:1883");
        assert_eq!(stored["scenarios"], serde_json::json!(["qos1", "fanout"]));
        let back: Opts = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), stored);
        assert_eq!(back.broker_pids[0].pid, 42);
        assert_eq!(back.scenarios, [Scenario::Qos1, Scenario::Fanout]);
        assert_eq!(back.common.duration, std::time::Duration::from_secs(2));
    }
}
