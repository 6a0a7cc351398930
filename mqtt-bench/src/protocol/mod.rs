//! mqtt-bench's MQTT client below the engine: rumqttc's packet codecs (3.1.1 and 5) behind one
//! interface, the reason codes brokers answer with, and one connection driven by its own task
//! over a stream that could as well be TLS.

pub mod codec;
pub mod conn;
pub mod reason;
mod tls;
pub mod transport;
