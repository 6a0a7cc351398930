//! RabbitMQ's MQTT plugin: named when a `$SYS/broker/version` says RabbitMQ, or when its
//! process (the Erlang VM started as a RabbitMQ node) is given. The plugin publishes no
//! `$SYS`; its version comes from its management API when the URL names it
//! (`?monitor=http://USER:PASSWORD@HOST:15672`, `GET /api/overview`), else it is said to be
//! unknown. The management plugin is not enabled on the test command's RabbitMQ, so that path
//! is exercised only where a user enables it.

use std::collections::BTreeMap;

use common::pool::BoxFuture;

use super::{BrokerKind, Description, Reached, TargetError};

/// RabbitMQ with its MQTT plugin.
#[derive(Debug, Clone, Copy)]
pub struct RabbitMq;

impl BrokerKind for RabbitMq {
    fn kind(&self) -> &'static str {
        "rabbitmq"
    }

    fn names(&self, sys_version_lowercase: &str) -> bool {
        sys_version_lowercase.contains("rabbitmq")
    }

    fn recognises(&self, broker: &Reached) -> bool {
        let named = broker
            .sys_version()
            .is_some_and(|v| self.names(&v.to_ascii_lowercase()));
        named || (broker.runs("beam") && broker.cmdline.iter().any(|a| a == "rabbit"))
    }

    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            if !self.recognises(broker) {
                return Ok(None);
            }
            let monitor = broker.monitor.clone();
            let overview = match monitor {
                Some(root) => tokio::task::spawn_blocking(move || overview(&root))
                    .await
                    .unwrap_or(None),
                None => None,
            };
            let mut verified = BTreeMap::new();
            let version = match overview {
                Some((version, erlang)) => {
                    verified.insert("erlang_version".into(), erlang);
                    format!("RabbitMQ {version}")
                }
                None => broker.sys_version().map_or_else(
                    || "RabbitMQ (version unknown: its MQTT plugin publishes no $SYS; name its management API with ?monitor=http://…)".to_owned(),
                    str::to_owned,
                ),
            };
            Ok(Some(Description { version, verified }))
        })
    }
}

/// `rabbitmq_version` and `erlang_version` from the management API's `/api/overview`.
fn overview(root: &str) -> Option<(String, String)> {
    let (auth, url) = super::nats::split_credentials(root);
    let mut request = ureq::get(&format!("{url}/api/overview"));
    if let Some(header) = auth {
        request = request.header("authorization", &header);
    }
    let text = request.call().ok()?.body_mut().read_to_string().ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some((
        json["rabbitmq_version"].as_str()?.to_owned(),
        json["erlang_version"].as_str().unwrap_or("").to_owned(),
    ))
}
