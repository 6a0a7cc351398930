//! mochi-mqtt: recognised by its `$SYS/broker/version`; it reports nothing else mqtt-bench
//! matches.

use super::BrokerKind;

/// mochi-mqtt, the Go broker.
#[derive(Debug, Clone, Copy)]
pub struct Mochi;

impl BrokerKind for Mochi {
    fn kind(&self) -> &'static str {
        "mochi-mqtt"
    }

    fn names(&self, sys_version_lowercase: &str) -> bool {
        sys_version_lowercase.contains("mochi")
    }
}
