//! Any MQTT broker: described by what it publishes as `$SYS/broker/version`, or said to publish
//! none. It is the last kind asked, so every broker reached has a description.

use common::pool::BoxFuture;

use super::{BrokerKind, Description, Reached, TargetError};

/// A broker no other kind recognises.
#[derive(Debug, Clone, Copy)]
pub struct Mqtt;

impl BrokerKind for Mqtt {
    fn kind(&self) -> &'static str {
        "mqtt"
    }

    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            let version = broker.sys_version().map_or_else(
                || "unknown (the broker publishes no $SYS/broker/version)".to_owned(),
                str::to_owned,
            );
            Ok(Some(Description {
                version,
                verified: Default::default(),
            }))
        })
    }
}
