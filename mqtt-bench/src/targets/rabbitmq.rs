//! RabbitMQ's MQTT plugin: named when a `$SYS/broker/version` says RabbitMQ. The plugin
//! publishes none, so a RabbitMQ broker is usually described as a generic MQTT 3.1.1 broker
//! and told apart by the name the user gives it.

use super::BrokerKind;

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
}
