//! mqtt-bench's own MQTT 3.1.1 client: the wire codec and one connection over tokio.

pub mod codec;
pub mod conn;
