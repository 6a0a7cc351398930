//! mqtt-bench: broker throughput, fan-out, delivered QoS 0 rate, delivery latency and broker
//! resources, against an embedded broker or real ones, with every message accounted for.

pub mod engine;
pub mod message;
pub mod protocol;
pub mod resources;
