//! EMQX: recognised by the `$SYS/brokers/<node>/version` it publishes for each node (EMQX has
//! no `$SYS/broker/version`); the version and the node are read from it. No EMQX runs here:
//! this kind is tested on what EMQX documents it publishes, not against a server.

use common::pool::BoxFuture;

use super::{BrokerKind, Description, Reached, TargetError, settings};

/// EMQX (and brokers that publish `$SYS/brokers/<node>/version` the same way).
#[derive(Debug, Clone, Copy)]
pub struct Emqx;

/// The node and version of the first `$SYS/brokers/<node>/version` topic.
fn node_version(broker: &Reached) -> Option<(&str, &str)> {
    broker.sys.iter().find_map(|(topic, value)| {
        let node = topic
            .strip_prefix("$SYS/brokers/")?
            .strip_suffix("/version")?;
        Some((node, value.as_str()))
    })
}

impl BrokerKind for Emqx {
    fn kind(&self) -> &'static str {
        "emqx"
    }

    fn recognises(&self, broker: &Reached) -> bool {
        node_version(broker).is_some()
    }

    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            let Some((node, version)) = node_version(broker) else {
                return Ok(None);
            };
            Ok(Some(Description {
                version: format!("EMQX {version}"),
                verified: settings([("node", node.to_owned())]),
            }))
        })
    }
}
