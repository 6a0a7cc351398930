//! Mosquitto: recognised by its `$SYS/broker/version`; when its PID is given, the settings the
//! seed matches (persistence, max_inflight_messages, max_queued_messages, max_packet_size) and
//! those that shape latency and connection storms (set_tcp_nodelay, max_connections) are read
//! from the configuration file that process was started with (`-c FILE`).

use std::collections::BTreeMap;
use std::fs;

use super::{BrokerKind, Reached};

/// Eclipse Mosquitto.
#[derive(Debug, Clone, Copy)]
pub struct Mosquitto;

impl BrokerKind for Mosquitto {
    fn kind(&self) -> &'static str {
        "mosquitto"
    }

    fn names(&self, sys_version_lowercase: &str) -> bool {
        sys_version_lowercase.starts_with("mosquitto")
    }

    fn settings(&self, broker: &Reached) -> BTreeMap<String, String> {
        broker.pid.map(settings_of).unwrap_or_default()
    }
}

/// The settings seed 000 holds equal, with Mosquitto's defaults when the file does not set them.
const SETTINGS: [(&str, &str); 8] = [
    ("persistence", "false"),
    ("max_inflight_messages", "20"),
    ("max_queued_messages", "1000"),
    ("max_packet_size", "0"),
    ("message_size_limit", "0"),
    // Nagle's algorithm on the broker's sockets: off only when this is true. With it on, a
    // QoS 0 subscriber (which sends nothing back) has deliveries held until its delayed ACK.
    ("set_tcp_nodelay", "false"),
    ("max_connections", "-1"),
    ("queue_qos0_messages", "false"),
];

/// The seed's settings as the process `pid` runs them: `config:NAME → value` (the default,
/// marked so, when its file does not set one). Empty when the file cannot be read.
pub fn settings_of(pid: u32) -> BTreeMap<String, String> {
    let Some(path) = config_path(pid) else {
        return BTreeMap::new();
    };
    let Ok(text) = fs::read_to_string(&path) else {
        return BTreeMap::new();
    };
    let mut out = parse(&text);
    out.insert("config:file".into(), path);
    out
}

/// The `-c FILE` of a process's command line.
fn config_path(pid: u32) -> Option<String> {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let at = args
        .iter()
        .position(|a| a == "-c" || a == "--config-file")?;
    args.get(at + 1).cloned()
}

fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, default) in SETTINGS {
        let set = text.lines().rev().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(name)).then(|| words.next().unwrap_or("").to_owned())
        });
        let value = set.unwrap_or_else(|| format!("{default} (default)"));
        out.insert(format!("config:{name}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_settings_are_read_from_a_config_file() {
        let text = "listener 1883 127.0.0.1\npersistence false\nmax_inflight_messages 64\n# max_queued_messages 5\nmax_queued_messages 1000\n";
        let settings = parse(text);
        assert_eq!(settings["config:persistence"], "false");
        assert_eq!(settings["config:max_inflight_messages"], "64");
        assert_eq!(settings["config:max_queued_messages"], "1000");
        assert_eq!(settings["config:max_packet_size"], "0 (default)");
        assert_eq!(settings["config:set_tcp_nodelay"], "false (default)");
        assert!(Mosquitto.names("mosquitto version 2.0.11"));
        assert!(settings_of(u32::MAX).is_empty());
    }
}
