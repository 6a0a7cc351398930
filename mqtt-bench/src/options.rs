//! mqtt-bench's own option values: scenarios, broker PIDs, broker URLs, and the checks clap
//! cannot make on sizes and rates.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::message::STAMP_BYTES;

/// The largest payload mqtt-bench sends: what MQTT's remaining length can carry, less room
/// for the topic.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024 * 1024;

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

/// `--broker-pid [NAME=]PID`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BrokerPid {
    pub name: Option<String>,
    pub pid: u32,
}

impl BrokerPid {
    pub fn parse(text: &str) -> Result<BrokerPid, String> {
        let (name, pid) = match text.split_once('=') {
            Some((name, pid)) => (Some(name.trim().to_owned()), pid),
            None => (None, text),
        };
        let pid: u32 = pid
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not [NAME=]PID (a process id is a number)"))?;
        if pid == 0 {
            return Err("a process id is never 0".into());
        }
        Ok(BrokerPid { name, pid })
    }
}

/// A broker address from `mqtt://[USER[:PASSWORD]@]HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerUrl {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl BrokerUrl {
    pub fn parse(url: &str) -> Result<BrokerUrl, String> {
        let rest = url
            .strip_prefix("mqtt://")
            .or_else(|| url.strip_prefix("tcp://"))
            .ok_or_else(|| {
                "a broker URL looks like mqtt://HOST:PORT or mqtt://USER:PASSWORD@HOST:PORT"
                    .to_owned()
            })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err("a broker URL has no path or query: mqtt://HOST:PORT".into());
        }
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((user, hostport)) => (Some(user), hostport),
            None => (None, rest),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (Some(user.to_owned()), Some(password.to_owned())),
                None => (Some(info.to_owned()), None),
            },
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| "the broker URL needs a port: mqtt://HOST:PORT".to_owned())?;
        let host = host.trim_matches(['[', ']']);
        if host.is_empty() {
            return Err("the broker URL has no host".into());
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("`{port}` is not a TCP port (1–65535)"))?;
        Ok(BrokerUrl {
            host: host.to_owned(),
            port,
            username,
            password,
        })
    }

    /// `host:port`, with brackets around an IPv6 host.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
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
    fn broker_urls_parse_with_and_without_credentials() {
        let url = BrokerUrl::parse("mqtt://u:p@127.0.0.1:1883").unwrap();
        assert_eq!(url.addr(), "127.0.0.1:1883");
        assert_eq!(url.username.as_deref(), Some("u"));
        assert_eq!(url.password.as_deref(), Some("p"));
        let bare = BrokerUrl::parse("tcp://localhost:1883/").unwrap();
        assert_eq!((bare.host.as_str(), bare.port), ("localhost", 1883));
        assert_eq!(
            BrokerUrl::parse("mqtt://[::1]:1883").unwrap().addr(),
            "[::1]:1883"
        );
        for bad in [
            "http://127.0.0.1:1883",
            "mqtt://127.0.0.1",
            "mqtt://127.0.0.1:0",
            "mqtt://127.0.0.1:99999",
            "mqtt://:1883",
            "mqtt://127.0.0.1:1883/topic",
            "127.0.0.1:1883",
        ] {
            assert!(BrokerUrl::parse(bad).is_err(), "{bad} was accepted");
        }
    }

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
        assert_eq!(
            BrokerPid::parse("m=42"),
            Ok(BrokerPid {
                name: Some("m".into()),
                pid: 42
            })
        );
        assert!(BrokerPid::parse("m=x").is_err());
        assert_eq!(Scenario::parse("Fan-Out"), Ok(Scenario::Fanout));
        assert!(Scenario::parse("qos3").is_err());
    }
}
