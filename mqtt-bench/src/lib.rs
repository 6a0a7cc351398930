//! mqtt-bench: broker throughput, fan-out, delivered QoS 0 rate, delivery latency, connection
//! storms, many-to-many, shared subscriptions, retained messages, persistent sessions and broker
//! resources, in MQTT 3.1.1 and 5, against an embedded broker or real ones, with every message
//! accounted for.

pub mod engine;
pub mod gate;
pub mod measure;
pub mod message;
pub mod opts;
pub mod os;
pub mod protocol;
pub mod report;
pub mod run;
pub mod scenario;
pub mod session;
pub mod systems;
pub mod targets;
pub mod workers;
pub mod workloads;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use common::run::Summary;
pub use opts::Opts;

/// What ends `mqtt-bench --help`, before the `compare` example every tool's help ends with.
pub const EXAMPLES: &str = "Examples:
  mqtt-bench
      every scenario (QoS 1/2 publish, fan-out, QoS 0 delivered rate, latency) on the embedded broker
  mqtt-bench --broker mosquitto=mqtt://127.0.0.1:1883 --broker embedded --scenarios qos1,qos0
      Mosquitto beside the embedded broker, interleaved in one measurement round";

/// What the tooling subcommands render with, and `k8s-manifest`'s check of a worker's
/// arguments: the run's own checks of worker mode, before anything is sent.
pub const TOOLING: common::export::WithWorkerCheck<'static> = common::export::WithWorkerCheck {
    report: &report::MqttReport,
    check: refuse_workers,
};

fn refuse_workers(args: &[String]) -> Result<(), String> {
    common::export::check_worker_args("mqtt-bench", args, run::check)
}

/// Runs the scenarios on a runtime of its own. Ctrl-C stops it cleanly, or `interrupt` when the caller
/// supplies one.
pub fn run(opts: Opts, interrupt: Option<Arc<AtomicBool>>) -> anyhow::Result<Summary> {
    common::run::block_on("mqtt-bench", interrupt, move |i| run::run(opts, i))
}
