//! NATS Server with its MQTT listener: recognised by its process (`nats-server`), or by the
//! monitoring endpoint the URL names (`?monitor=http://HOST:8222`). Its version and settings
//! come from that endpoint's `GET /varz`; the endpoint is found in the configuration file the
//! process was started with (`http:` / `http_port:`) or its `-m` flag. NATS speaks MQTT 3.1.1
//! only and has no shared subscriptions: mqtt-bench finds both out by asking (an MQTT 5
//! CONNECT is refused; a `$share/…` subscription is granted and then delivers nothing).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use common::pool::BoxFuture;

use super::{BrokerKind, Description, Reached, TargetError};

/// NATS Server.
#[derive(Debug, Clone, Copy)]
pub struct Nats;

const VARZ_TIMEOUT: Duration = Duration::from_secs(3);

impl BrokerKind for Nats {
    fn kind(&self) -> &'static str {
        "nats"
    }

    fn recognises(&self, broker: &Reached) -> bool {
        broker.runs("nats-server") || (broker.monitor.is_some() && broker.sys.is_empty())
    }

    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            if !self.recognises(broker) {
                return Ok(None);
            }
            let Some(monitor) = broker.monitor.clone().or_else(|| monitor_of(broker)) else {
                return Ok(Some(Description {
                    version: "NATS Server (version unknown: no monitoring endpoint found)".into(),
                    verified: BTreeMap::new(),
                }));
            };
            let varz = tokio::task::spawn_blocking(move || varz(&monitor))
                .await
                .map_err(|e| TargetError::Other(format!("reading NATS's /varz failed: {e}")))?;
            match varz {
                Some(varz) => Ok(Some(describe_varz(&varz))),
                // A monitor named in the URL that does not answer as NATS: not this kind.
                None if !broker.runs("nats-server") => Ok(None),
                None => Ok(Some(Description {
                    version: "NATS Server (its monitoring endpoint did not answer)".into(),
                    verified: BTreeMap::new(),
                })),
            }
        })
    }
}

/// The version and the settings that shape its MQTT service, from `/varz`.
fn describe_varz(varz: &serde_json::Value) -> Description {
    let mut verified = BTreeMap::new();
    let mut put = |key: &str, value: &serde_json::Value| {
        if !value.is_null() {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            verified.insert(key.to_owned(), text);
        }
    };
    put("server_name", &varz["server_name"]);
    put("go", &varz["go"]);
    put("max_connections", &varz["max_connections"]);
    put("max_payload", &varz["max_payload"]);
    put("mqtt.port", &varz["mqtt"]["port"]);
    put("mqtt.max_ack_pending", &varz["mqtt"]["max_ack_pending"]);
    put(
        "jetstream.store_dir",
        &varz["jetstream"]["config"]["store_dir"],
    );
    put(
        "jetstream.sync_interval_ns",
        &varz["jetstream"]["config"]["sync_interval"],
    );
    let version = varz["version"].as_str().unwrap_or("unknown");
    Description {
        version: format!("NATS Server {version}"),
        verified,
    }
}

/// The monitoring endpoint of a local NATS process: its `-m PORT` flag, or the `http:` /
/// `http_port:` line of the configuration file it was started with.
fn monitor_of(broker: &Reached) -> Option<String> {
    if let Some(port) = broker.arg_after(&["-m", "--http_port"]) {
        return Some(format!("http://127.0.0.1:{port}"));
    }
    let file = broker.arg_after(&["-c", "--config"])?;
    let text = std::fs::read_to_string(file).ok()?;
    for line in text.lines().map(str::trim) {
        let value = |key: &str| {
            line.strip_prefix(key).map(|v| {
                v.trim_start_matches([':', '=', ' '])
                    .trim()
                    .trim_matches('"')
            })
        };
        if let Some(hostport) = value("http:") {
            return Some(format!("http://{hostport}"));
        }
        if let Some(port) = value("http_port") {
            return Some(format!("http://127.0.0.1:{port}"));
        }
    }
    None
}

/// `GET {root}/varz` as JSON; `None` when it does not answer like NATS.
fn varz(root: &str) -> Option<serde_json::Value> {
    let (auth, url) = split_credentials(root);
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(VARZ_TIMEOUT))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut request = agent.get(&format!("{url}/varz"));
    if let Some(header) = auth {
        request = request.header("authorization", &header);
    }
    let text = request.call().ok()?.body_mut().read_to_string().ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["server_id"].is_string().then_some(json)
}

/// `http://USER:PASSWORD@HOST:PORT` as a basic-auth header and the URL without them.
pub fn split_credentials(url: &str) -> (Option<String>, String) {
    let Some(rest) = url.strip_prefix("http://") else {
        return (None, url.to_owned());
    };
    match rest.split_once('@') {
        Some((userinfo, hostport)) => {
            let token = base64::engine::general_purpose::STANDARD.encode(userinfo);
            (Some(format!("Basic {token}")), format!("http://{hostport}"))
        }
        None => (None, url.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varz_describes_the_server_and_credentials_become_a_header() {
        let varz = serde_json::json!({
            "server_id": "N1", "version": "2.15.2", "server_name": "fb", "go": "go1.26.8",
            "mqtt": {"host": "127.0.0.1", "port": 41893},
            "jetstream": {"config": {"store_dir": "/d"}}
        });
        let d = describe_varz(&varz);
        assert_eq!(d.version, "NATS Server 2.15.2");
        assert_eq!(d.verified["mqtt.port"], "41893");
        assert_eq!(d.verified["jetstream.store_dir"], "/d");
        assert!(!d.verified.contains_key("mqtt.max_ack_pending"));
        let (auth, url) = split_credentials("http://u:p@h:1");
        assert_eq!(auth.as_deref(), Some("Basic dTpw"));
        assert_eq!(url, "http://h:1");
        assert_eq!(split_credentials("http://h:1").0, None);
    }
}
