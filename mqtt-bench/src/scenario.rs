//! The scenarios mqtt-bench runs: the five of seed 000's MQTT section and the broker-benchmark
//! ones beside them (connection storms, idle connections, many-to-many, shared subscriptions,
//! retained messages, persistent sessions), their names, and which QoS each one takes.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    /// QoS 1 acked publish throughput, `--inflight` in flight.
    Qos1,
    /// One publisher, `--subscribers` subscribers on one topic.
    Fanout,
    /// QoS 0 1→1 delivered rate over a publish-rate sweep.
    Qos0,
    /// Delivery latency at a paced rate.
    Latency,
    /// QoS 2 acked publish throughput.
    Qos2,
    /// A connection storm at `--connect-rate` up to `--clients`.
    Connect,
    /// `--clients` connections held idle (keep-alive only) for a window.
    Idle,
    /// P publishers × S subscribers over T topics, wildcard subscriptions.
    ManyToMany,
    /// One publisher, a shared-subscription group of consumers.
    Shared,
    /// R retained messages, then a new subscriber's time to receive them all.
    Retained,
    /// A subscriber away for a while on a persistent session gets everything on return.
    Persistent,
}

impl Scenario {
    /// What runs when `--scenarios` is not given: seed 000's five.
    pub const SEED: [Scenario; 5] = [
        Scenario::Qos1,
        Scenario::Fanout,
        Scenario::Qos0,
        Scenario::Latency,
        Scenario::Qos2,
    ];

    pub const ALL: [Scenario; 11] = [
        Scenario::Qos1,
        Scenario::Fanout,
        Scenario::Qos0,
        Scenario::Latency,
        Scenario::Qos2,
        Scenario::Connect,
        Scenario::Idle,
        Scenario::ManyToMany,
        Scenario::Shared,
        Scenario::Retained,
        Scenario::Persistent,
    ];

    const CHOICES: &str = "qos1, fanout, qos0, latency, qos2, connect, idle, many-to-many, shared, retained, persistent (or all)";

    pub fn parse(text: &str) -> Result<Scenario, String> {
        let word = text.trim().to_ascii_lowercase();
        Scenario::ALL
            .into_iter()
            .find(|s| s.word() == word)
            .or(match word.as_str() {
                "fan-out" => Some(Scenario::Fanout),
                "m2m" | "many" => Some(Scenario::ManyToMany),
                _ => None,
            })
            .ok_or_else(|| {
                format!(
                    "`{word}` is not a scenario; choose from {}",
                    Scenario::CHOICES
                )
            })
    }

    pub fn word(self) -> &'static str {
        match self {
            Scenario::Qos1 => "qos1",
            Scenario::Fanout => "fanout",
            Scenario::Qos0 => "qos0",
            Scenario::Latency => "latency",
            Scenario::Qos2 => "qos2",
            Scenario::Connect => "connect",
            Scenario::Idle => "idle",
            Scenario::ManyToMany => "many-to-many",
            Scenario::Shared => "shared",
            Scenario::Retained => "retained",
            Scenario::Persistent => "persistent",
        }
    }

    /// The QoS levels a scenario runs at: fixed by its name, `--qos` where it means something,
    /// else its default (the seed's fan-out is QoS 0, its latency scenario all three).
    pub fn qos_levels(self, asked: &[u8]) -> Vec<u8> {
        let or = |default: &[u8]| {
            if asked.is_empty() {
                default.to_vec()
            } else {
                asked.to_vec()
            }
        };
        match self {
            Scenario::Qos1 => vec![1],
            Scenario::Qos2 => vec![2],
            Scenario::Qos0 => vec![0],
            Scenario::Connect | Scenario::Idle => vec![0],
            Scenario::Fanout | Scenario::ManyToMany => or(&[0]),
            Scenario::Latency => or(&[0, 1, 2]),
            Scenario::Shared | Scenario::Retained => or(&[1]),
            // QoS 0 messages are not kept for a client that is away (MQTT 3.1.1 §3.1.2.4
            // leaves it to the broker; Mosquitto's queue_qos0_messages is off by default).
            Scenario::Persistent => or(&[1]).into_iter().filter(|q| *q > 0).collect(),
        }
    }

    /// Whether `--qos` changes this scenario (for the note when it is ignored).
    pub fn takes_qos(self) -> bool {
        matches!(
            self,
            Scenario::Fanout
                | Scenario::Latency
                | Scenario::ManyToMany
                | Scenario::Shared
                | Scenario::Retained
                | Scenario::Persistent
        )
    }
}

/// The scenarios `--scenarios` chose (empty: seed 000's five), in the order they run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Scenarios(pub Vec<Scenario>);

impl Scenarios {
    /// Parses `qos1,fanout` or `all`.
    pub fn parse(text: &str) -> Result<Scenarios, String> {
        let mut chosen = Vec::new();
        for word in text.split(',').filter(|w| !w.trim().is_empty()) {
            if word.trim().eq_ignore_ascii_case("all") {
                chosen.extend(Scenario::ALL);
            } else {
                chosen.push(Scenario::parse(word)?);
            }
        }
        if chosen.is_empty() {
            return Err(format!(
                "--scenarios names none; choose from {}",
                Scenario::CHOICES
            ));
        }
        Ok(Scenarios(chosen))
    }

    /// What runs: the chosen scenarios, or the seed's five, each once, in the order above.
    pub fn chosen(&self) -> Vec<Scenario> {
        let mut chosen = if self.0.is_empty() {
            Scenario::SEED.to_vec()
        } else {
            self.0.clone()
        };
        chosen.sort();
        chosen.dedup();
        chosen
    }

    pub fn contains(&self, scenario: Scenario) -> bool {
        self.chosen().contains(&scenario)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_qos_follows_the_scenario() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::parse(s.word()), Ok(s));
        }
        assert_eq!(Scenario::parse("Fan-Out"), Ok(Scenario::Fanout));
        assert_eq!(Scenario::parse("m2m"), Ok(Scenario::ManyToMany));
        assert!(
            Scenario::parse("qos3")
                .unwrap_err()
                .contains("many-to-many")
        );
        assert_eq!(Scenarios::parse("all,qos1").unwrap().chosen().len(), 11);
        assert_eq!(Scenarios::default().chosen(), Scenario::SEED);
        assert!(Scenarios::parse(",").is_err());
        assert_eq!(Scenario::Latency.qos_levels(&[]), [0, 1, 2]);
        assert_eq!(Scenario::Fanout.qos_levels(&[]), [0]);
        assert_eq!(Scenario::Fanout.qos_levels(&[0, 1, 2]), [0, 1, 2]);
        assert_eq!(Scenario::Qos1.qos_levels(&[0, 2]), [1]);
        assert_eq!(Scenario::Persistent.qos_levels(&[0, 1, 2]), [1, 2]);
        assert!(Scenario::Persistent.qos_levels(&[0]).is_empty());
    }
}
