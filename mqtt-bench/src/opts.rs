//! mqtt-bench's options: the common flags, the brokers, their processes and the protocols they
//! are spoken in, the scenarios and their settings, the client's connections (source
//! addresses, keep-alive), and the checks clap cannot make on sizes, rates and combinations.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::bail;
use clap::Parser;
use common::human::parse_count_at_most;
use common::options::{CommonOpts, TargetSpec};
use common::procstat::ServerPid;
use serde::{Deserialize, Serialize};

use crate::message::STAMP_BYTES;
use crate::protocol::codec::Protocol;
pub use crate::scenario::{Scenario, Scenarios};

/// The largest payload mqtt-bench sends: what MQTT's remaining length can carry, less room
/// for the topic.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024 * 1024;

#[derive(Parser, Serialize, Deserialize, Debug, Clone)]
#[command(
    name = "mqtt-bench",
    version,
    // `-V` is the MQTT version, as in emqtt-bench (`-V 5`); the tool's own is `--version`.
    disable_version_flag = true,
    about = "MQTT broker throughput, fan-out, delivered QoS 0 rate and delivery latency, every message accounted for",
    after_help = "Without --broker (or --target) an embedded broker is started in this process and \
                  measured, labelled embedded and colocated. --connections is not used: each \
                  scenario fixes its connections (one publisher; one subscriber, or --subscribers; \
                  --clients for connect and idle; --many-to-many; --group)."
)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// A broker to measure, as `[NAME=]mqtt://[USER:PASSWORD@]HOST:PORT` (the same as --target),
    /// or `mqtts://…[:PORT]?cacert=CA.pem` for TLS (port 8883, certificate verified; the
    /// password also from FAIRBENCH_PASSWORD_<NAME> or --password-file); any host: the CPU and
    /// memory of a broker on another machine cannot be measured.
    #[arg(long = "broker", value_name = "[NAME=]URL", value_parser = TargetSpec::parse)]
    #[serde(skip)]
    pub brokers: Vec<TargetSpec>,

    /// A local broker's process, as `[NAME=]PID`, whose CPU time and resident memory are
    /// sampled from /proc during every window.
    #[arg(long = "broker-pid", value_name = "[NAME=]PID", value_parser = ServerPid::parse)]
    pub broker_pids: Vec<ServerPid>,

    /// Print mqtt-bench's version.
    #[arg(long, action = clap::ArgAction::Version)]
    #[serde(skip)]
    pub version: (),

    /// MQTT versions to speak, comma-separated: 3.1.1 (or 4, its protocol level), 5. Each
    /// broker spoken to in each is a system of its own (NAME-mqtt3.1.1, NAME-mqtt5) in the same
    /// tables. `-V 5` is emqtt-bench's spelling.
    #[arg(short = 'V', long = "protocol", value_delimiter = ',', value_name = "LIST", default_value = "3.1.1", value_parser = Protocol::parse)]
    pub protocols: Vec<Protocol>,

    /// Scenarios to run, comma-separated: qos1, fanout, qos0, latency, qos2 (seed 000's five,
    /// the default), connect, idle, many-to-many, shared, retained, persistent, or all.
    #[arg(long, value_name = "LIST", value_parser = Scenarios::parse)]
    #[serde(default)]
    pub scenarios: Option<Scenarios>,

    /// QoS levels, comma-separated, for every scenario where QoS is a choice (fanout, latency,
    /// many-to-many, shared, retained, persistent): one row per level, side by side
    /// [default: fanout and many-to-many 0, latency 0,1,2, shared, retained and persistent 1].
    #[arg(long = "qos", value_delimiter = ',', value_name = "LIST", value_parser = qos)]
    pub qos: Vec<u8>,

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

    /// many-to-many: PUBLISHERSxSUBSCRIBERS; every subscriber takes every topic through one
    /// wildcard filter (`…/sensors/+/temp`).
    #[arg(long, default_value = "10x10", value_name = "PxS", value_parser = ManyToMany::parse)]
    pub many_to_many: ManyToMany,

    /// many-to-many: topics the publishers spread over (`…/sensors/N/temp`).
    #[arg(long, default_value = "10", value_parser = topics)]
    pub topics: usize,

    /// shared: consumers in the shared-subscription group (`$share/GROUP/TOPIC`).
    #[arg(long, default_value = "5", value_parser = subscribers)]
    pub group: usize,

    /// retained: retained messages published (one per topic) before the new subscriber comes.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub retained: u64,

    /// persistent: how long the subscriber stays away before it resumes its session.
    #[arg(long, default_value = "2s", value_parser = common::human::parse_duration)]
    #[serde(rename = "away_s", with = "seconds")]
    pub away: Duration,

    /// persistent: the paced publish rate while the subscriber comes and goes (the broker must
    /// queue `rate × away` messages for it: Mosquitto's max_queued_messages is 1000 by default).
    #[arg(long, default_value = "250", value_parser = common::human::parse_rate)]
    #[serde(rename = "session_rate_per_s")]
    pub session_rate: f64,

    /// persistent, MQTT 5: the session expiry interval the subscriber asks for.
    #[arg(long, default_value = "300s", value_parser = common::human::parse_duration)]
    #[serde(rename = "session_expiry_s", with = "seconds")]
    pub session_expiry: Duration,

    /// connect and idle: clients connected in each window.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub clients: u64,

    /// connect and idle: connections started per second (paced; CONNACK latency is measured
    /// from each connection's intended start).
    #[arg(long, default_value = "1k", value_parser = common::human::parse_rate)]
    #[serde(rename = "connect_rate_per_s")]
    pub connect_rate: f64,

    /// Local addresses client sockets bind to in turn, comma-separated (127.0.0.2,127.0.0.3):
    /// each gives about 28,000 ephemeral ports toward one broker address.
    #[arg(long, value_delimiter = ',', value_name = "ADDRS", value_parser = source_addr)]
    pub source_addrs: Vec<IpAddr>,

    /// Keep-alive every client announces; a quiet client pings after it (idle clients) or
    /// half of it (the others).
    #[arg(long, default_value = "60s", value_parser = keep_alive)]
    #[serde(rename = "keep_alive_s", with = "seconds")]
    pub keep_alive: Duration,

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
    /// the broker's queues stay bounded: half of Mosquitto's default queue per client
    /// (`max_queued_messages 1000`), which drops QoS 1/2 messages beyond it. At 1000, with the
    /// subscriber short of CPU, Mosquitto dropped messages in every run.
    #[arg(long, default_value = "500", value_parser = common::human::parse_count)]
    pub backlog: u64,

    /// Closed-loop windows where every message goes to several subscribers (fan-out,
    /// many-to-many): how long an idle client lane waits before it sleeps on its sockets, so
    /// one message the broker writes to every subscriber wakes the client once, not once per
    /// subscriber (0: read at once). Deliveries in those windows are stamped up to this late.
    /// At most 10ms.
    #[arg(long, default_value = "500us", value_parser = read_coalesce)]
    // Reports from before the option read at once: absent, it reads back as 0.
    #[serde(rename = "read_coalesce_s", with = "seconds", default)]
    pub read_coalesce: Duration,

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
        if self.protocols.is_empty() {
            bail!("--protocol needs at least one of 3.1.1, 5");
        }
        let chosen = self.chosen();
        if chosen.contains(&Scenario::Persistent)
            && Scenario::Persistent.qos_levels(&self.qos).is_empty()
        {
            bail!(
                "--qos 0 leaves the persistent scenario nothing to run: a session keeps QoS 1 and 2 messages for a client that is away; add 1 or 2"
            );
        }
        if chosen.contains(&Scenario::Persistent) && self.away >= self.common.duration {
            bail!(
                "--away {} must be shorter than --duration {}: the subscriber leaves a third of the way into the window and must be back before it ends",
                common::human::format_duration(self.away),
                common::human::format_duration(self.common.duration)
            );
        }
        Ok(())
    }

    /// The scenarios that run, in order.
    pub fn chosen(&self) -> Vec<Scenario> {
        self.scenarios.clone().unwrap_or_default().chosen()
    }

    /// Keep-alive in whole seconds, as CONNECT carries it.
    pub fn keep_alive_s(&self) -> u16 {
        self.keep_alive.as_secs() as u16
    }
}

/// many-to-many's shape: publishers × subscribers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManyToMany {
    pub publishers: usize,
    pub subscribers: usize,
}

impl ManyToMany {
    pub fn parse(text: &str) -> Result<ManyToMany, String> {
        let bad = || format!("`{text}` is not PUBLISHERSxSUBSCRIBERS (like 10x10)");
        let (p, s) = text.trim().split_once(['x', 'X', '×']).ok_or_else(bad)?;
        let publishers: usize = p.trim().parse().map_err(|_| bad())?;
        let subscribers: usize = s.trim().parse().map_err(|_| bad())?;
        if publishers == 0 || subscribers == 0 {
            return Err(format!(
                "--many-to-many {text}: needs at least one publisher and one subscriber"
            ));
        }
        if publishers * subscribers > 100_000 || publishers + subscribers > 10_000 {
            return Err(format!(
                "--many-to-many {text} is more than 10,000 clients or 100,000 routes"
            ));
        }
        Ok(ManyToMany {
            publishers,
            subscribers,
        })
    }
}

impl std::fmt::Display for ManyToMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.publishers, self.subscribers)
    }
}

impl Serialize for ManyToMany {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ManyToMany {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ManyToMany, D::Error> {
        let text = String::deserialize(deserializer)?;
        ManyToMany::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Durations stored as fractional seconds, as every report stores them.
mod seconds {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        common::options::seconds(d, s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        common::options::from_seconds(d)
    }
}

fn read_coalesce(text: &str) -> Result<Duration, String> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let delay = common::human::parse_duration(text)?;
    if delay > Duration::from_millis(10) {
        return Err(format!("--read-coalesce {text} is longer than 10ms"));
    }
    Ok(delay)
}

pub fn topics(text: &str) -> Result<usize, String> {
    parse_count_at_most(text, 100_000, |n| {
        format!("--topics {n} is more than 100,000")
    })
}

pub fn keep_alive(text: &str) -> Result<Duration, String> {
    let d = common::human::parse_duration(text)?;
    if d.subsec_nanos() != 0 || d.as_secs() > u64::from(u16::MAX) {
        return Err(format!(
            "--keep-alive {text} must be whole seconds, at most 65,535"
        ));
    }
    Ok(d)
}

pub fn source_addr(text: &str) -> Result<IpAddr, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{text}` is not an IP address (--source-addrs 127.0.0.2,127.0.0.3)"))
}

pub fn payload_bytes(text: &str) -> Result<usize, String> {
    let bytes = common::human::parse_count(text)? as usize;
    if bytes < STAMP_BYTES {
        return Err(format!(
            "--payload {bytes} is too small: every message carries a {STAMP_BYTES}-byte stamp (sequence number, send time, window, publisher)"
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
    parse_count_at_most(text, u64::from(u16::MAX), |n| {
        format!("--inflight {n} is more than MQTT's 65,535 packet identifiers")
    })
}

pub fn subscribers(text: &str) -> Result<usize, String> {
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of subscribers"))?;
    if n == 0 {
        return Err("0 subscribers: fan-out and shared need at least one".into());
    }
    if n > 10_000 {
        return Err(format!("{n} subscribers is more than 10,000"));
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
        assert!(payload_bytes("23").unwrap_err().contains("stamp"));
        assert_eq!(payload_bytes("1k"), Ok(1_000));
        assert!(payload_bytes("1G").is_err());
        assert!(inflight("70000").is_err());
        assert!(subscribers("0").unwrap_err().contains("at least one"));
        assert!(qos("3").is_err());
        assert_eq!(fraction("0.1%"), Ok(0.001));
        assert!(fraction("1").is_err());
        assert_eq!(
            ManyToMany::parse("4x25"),
            Ok(ManyToMany {
                publishers: 4,
                subscribers: 25
            })
        );
        assert!(ManyToMany::parse("0x3").is_err());
        assert!(ManyToMany::parse("ten").is_err());
        assert!(keep_alive("1.5s").is_err());
        assert!(source_addr("127.0.0.2").is_ok() && source_addr("nowhere").is_err());
    }

    #[test]
    fn dash_capital_v_is_the_mqtt_version_as_in_emqtt_bench() {
        let parse = |args: &[&str]| Opts::try_parse_from([&["mqtt-bench"], args].concat());
        assert_eq!(parse(&["-V", "5"]).unwrap().protocols, [Protocol::V5]);
        assert_eq!(
            parse(&["-V", "4,5"]).unwrap().protocols,
            [Protocol::V311, Protocol::V5]
        );
        let three = parse(&["-V", "3"]).unwrap_err().to_string();
        assert!(
            three.contains("MQTT 3.1 (protocol level 3) is not spoken"),
            "{three}"
        );
        let version = parse(&["--version"]).unwrap_err();
        assert_eq!(version.kind(), clap::error::ErrorKind::DisplayVersion);
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
            "--protocol",
            "3.1.1,5",
            "--qos",
            "0,1",
            "--source-addrs",
            "127.0.0.2,127.0.0.3",
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
        assert_eq!(back.chosen(), [Scenario::Qos1, Scenario::Fanout]);
        assert_eq!(back.protocols, [Protocol::V311, Protocol::V5]);
        assert_eq!(stored["protocols"], serde_json::json!(["3.1.1", "5"]));
        assert_eq!(stored["many_to_many"], "10x10");
        assert_eq!(stored["keep_alive_s"], 60.0);
        assert_eq!(back.source_addrs.len(), 2);
        assert_eq!(back.common.duration, std::time::Duration::from_secs(2));
        assert_eq!(stored["read_coalesce_s"], 0.0005);
        // A report from before --read-coalesce read at once, and reads back so.
        let mut older = stored.clone();
        older.as_object_mut().unwrap().remove("read_coalesce_s");
        let older: Opts = serde_json::from_value(older).unwrap();
        assert_eq!(older.read_coalesce, std::time::Duration::ZERO);
    }
}
