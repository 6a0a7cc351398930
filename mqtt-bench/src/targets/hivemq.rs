//! HiveMQ Community Edition, as `scripts/service/hivemq.sh` runs it: HiveMQ's embedded jar in
//! a JVM started by fairbench's launcher (`scripts/hivemq-launcher`). HiveMQ publishes no `$SYS`
//! topics, so it is recognised by its process (the launcher's class, or a HiveMQ jar, on its
//! command line) or by the monitor the URL names (`?monitor=http://HOST:PORT`), and described
//! by that monitor's `GET /hivemq`: its version, the settings HiveMQ's configuration services
//! hold once it has started (max-queued-messages and what happens when that queue is full,
//! persistence mode, the in-flight window, overload protection) and its metric registry, whose
//! `com.hivemq.messages.dropped.count` is read before and after every window as the broker's
//! own drop count ([`super::DropCounter`]). The monitor of a local broker is found through its
//! PID: the launcher's fourth argument is its port.

use std::collections::BTreeMap;
use std::time::Duration;

use common::pool::BoxFuture;

use super::{BrokerKind, Description, DropCounter, Reached, TargetError};

/// HiveMQ CE.
#[derive(Debug, Clone, Copy)]
pub struct HiveMq;

/// The launcher's main class, on the JVM's command line.
const LAUNCHER: &str = "org.fairbench.hivemq.Launcher";

const MONITOR_TIMEOUT: Duration = Duration::from_secs(3);

impl BrokerKind for HiveMq {
    fn kind(&self) -> &'static str {
        "hivemq"
    }

    fn names(&self, sys_version_lowercase: &str) -> bool {
        sys_version_lowercase.contains("hivemq")
    }

    fn recognises(&self, broker: &Reached) -> bool {
        runs_hivemq(broker)
            || broker
                .sys_version()
                .is_some_and(|v| self.names(&v.to_ascii_lowercase()))
    }

    fn drop_counter(&self, broker: &Reached) -> Option<DropCounter> {
        let monitor = broker.monitor.clone().or_else(|| monitor_of(broker))?;
        Some(DropCounter::HiveMq { monitor })
    }

    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            let by_process = self.recognises(broker);
            let monitor = broker.monitor.clone().or_else(|| monitor_of(broker));
            if !by_process && monitor.is_none() {
                return Ok(None);
            }
            let document = match monitor.clone() {
                Some(root) => tokio::task::spawn_blocking(move || document(&root))
                    .await
                    .unwrap_or(None),
                None => None,
            };
            match (document, monitor) {
                (Some(document), Some(root)) => Ok(Some(describe_document(&document, &root))),
                // A monitor named in the URL that does not answer as HiveMQ's: not this kind.
                _ if !by_process => Ok(None),
                _ => Ok(Some(Description {
                    version: "HiveMQ (version unknown: it publishes no $SYS, and no fairbench launcher monitor answered)".into(),
                    verified: BTreeMap::new(),
                })),
            }
        })
    }
}

/// Whether the broker's process is a HiveMQ JVM: fairbench's launcher, or HiveMQ's own jar.
fn runs_hivemq(broker: &Reached) -> bool {
    broker.runs("java")
        && broker
            .cmdline
            .iter()
            .any(|a| a == LAUNCHER || a.contains("hivemq.jar") || a == "com.hivemq.HiveMQServer")
}

/// The launcher's monitor, from its command line (`Launcher HOME MQTT_PORT TLS_PORT MONITOR_PORT`).
fn monitor_of(broker: &Reached) -> Option<String> {
    let at = broker.cmdline.iter().position(|a| a == LAUNCHER)?;
    let port: u16 = broker.cmdline.get(at + 4)?.parse().ok()?;
    Some(format!("http://127.0.0.1:{port}"))
}

/// `GET {root}/hivemq` as JSON; `None` when it does not answer as the launcher's monitor.
pub fn document(root: &str) -> Option<serde_json::Value> {
    let (auth, url) = super::nats::split_credentials(root);
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(MONITOR_TIMEOUT))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut request = agent.get(&format!("{url}/hivemq"));
    if let Some(header) = auth {
        request = request.header("authorization", &header);
    }
    let text = request.call().ok()?.body_mut().read_to_string().ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["broker"]
        .as_str()
        .is_some_and(|b| b.contains("HiveMQ"))
        .then_some(json)
}

/// HiveMQ's dropped-message counter in a monitor document.
pub const DROPPED_METRIC: &str = "com.hivemq.messages.dropped.count";

/// The version, the settings (`hivemq:NAME`) and the monitor, from the launcher's document.
fn describe_document(document: &serde_json::Value, root: &str) -> Description {
    let mut verified = BTreeMap::new();
    if let Some(settings) = document["settings"].as_object() {
        for (name, value) in settings {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            verified.insert(format!("hivemq:{name}"), text);
        }
    }
    verified.insert("monitor".into(), common::redact::redact_url(root));
    let broker = document["broker"].as_str().unwrap_or("HiveMQ");
    let version = document["version"].as_str().unwrap_or("unknown");
    Description {
        version: format!("{broker} {version}"),
        verified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::tests::reached;

    #[test]
    fn the_launchers_document_describes_the_broker_and_its_drop_counter() {
        let document = serde_json::json!({
            "broker": "HiveMQ Community Edition", "version": "2025.5",
            "settings": {"max-queued-messages": "1000", "queued-messages-strategy": "discard",
                         "persistence-mode": "in_memory"},
            "metrics": {DROPPED_METRIC: 0},
        });
        let d = describe_document(&document, "http://127.0.0.1:9");
        assert_eq!(d.version, "HiveMQ Community Edition 2025.5");
        assert_eq!(d.verified["hivemq:max-queued-messages"], "1000");
        assert_eq!(d.verified["hivemq:persistence-mode"], "in_memory");
        let launcher = [
            "/usr/bin/java",
            "-Xmx1g",
            "-cp",
            "lib/*",
            LAUNCHER,
            "/tmp/x/hivemq",
            "1883",
            "8883",
            "9100",
        ];
        let broker = reached(&[], &launcher);
        assert!(HiveMq.recognises(&broker));
        assert_eq!(
            monitor_of(&broker).as_deref(),
            Some("http://127.0.0.1:9100")
        );
        assert_eq!(
            HiveMq.drop_counter(&broker),
            Some(DropCounter::HiveMq {
                monitor: "http://127.0.0.1:9100".into()
            })
        );
        assert!(!HiveMq.recognises(&reached(&[], &["/usr/sbin/mosquitto", "-c", "x"])));
    }
}
