//! mqtt-bench: broker throughput, fan-out, delivered QoS 0 rate, delivery latency and broker
//! resources, against an embedded broker or real ones, with every message accounted for.

pub mod engine;
pub mod message;
pub mod options;
pub mod protocol;
pub mod report;
pub mod resources;
pub mod suite;
pub mod targets;
pub mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use common::options::{CommonOpts, TargetSpec};
use common::results::Report;
use serde::Serialize;

use crate::options::{BrokerPid, Scenario};

#[derive(Parser, Serialize, Debug, Clone)]
#[command(
    name = "mqtt-bench",
    version,
    about = "MQTT broker throughput, fan-out, delivered QoS 0 rate and delivery latency, every message accounted for",
    after_help = "Without --broker (or --target) an embedded broker is started in this process and \
                  measured, labelled embedded and colocated. --connections is not used: each \
                  scenario fixes its connections (one publisher; one subscriber, or --subscribers)."
)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// A broker to measure, as `[NAME=]mqtt://[USER:PASSWORD@]HOST:PORT` (the same as --target).
    #[arg(long = "broker", value_name = "[NAME=]URL", value_parser = TargetSpec::parse)]
    #[serde(skip)]
    pub brokers: Vec<TargetSpec>,

    /// A local broker's process, as `[NAME=]PID`, whose CPU time and resident memory are
    /// sampled from /proc during every window.
    #[arg(long = "broker-pid", value_name = "[NAME=]PID", value_parser = BrokerPid::parse)]
    pub broker_pids: Vec<BrokerPid>,

    /// Scenarios to run, comma-separated: qos1, fanout, qos0, latency, qos2 [default: all].
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = Scenario::parse)]
    pub scenarios: Vec<Scenario>,

    /// Bytes in every message's payload (at least 20: the sequence number, send time and
    /// window are stamped into its first 20 bytes).
    #[arg(long = "payload", default_value = "64", value_parser = options::payload_bytes)]
    pub payload_bytes: usize,

    /// QoS 1/2 messages the publisher leaves unacknowledged (seed 000: 64).
    #[arg(long, default_value = "64", value_parser = options::inflight)]
    pub inflight: usize,

    /// Subscribers on the fan-out topic.
    #[arg(long, default_value = "50", value_parser = options::subscribers)]
    pub subscribers: usize,

    /// QoS of the fan-out publisher and subscribers.
    #[arg(long, default_value = "0", value_parser = options::qos)]
    pub fanout_qos: u8,

    /// Publish rates of the QoS 0 1→1 sweep, ascending; it stops after the first rate the
    /// broker cannot take in full or delivers with more loss than --max-loss.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "RATES",
        default_value = "10k,20k,40k,80k,160k,320k,640k,1.28M",
        value_parser = common::human::parse_rate
    )]
    #[serde(rename = "sweep_rates_per_s")]
    pub sweep: Vec<f64>,

    /// The most QoS 0 loss a sweep step may have and still count (0.001 = 0.1%).
    #[arg(long, default_value = "0.001", value_parser = options::fraction)]
    pub max_loss: f64,

    /// The paced publish rate of the delivery-latency scenario (open loop).
    #[arg(long, default_value = "10k", value_parser = common::human::parse_rate)]
    #[serde(rename = "latency_rate_per_s")]
    pub latency_rate: f64,

    /// Closed loop: most messages the publisher may run ahead of its slowest subscriber, so
    /// the broker's queues stay bounded.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub backlog: u64,

    /// Every topic starts with this; each window publishes on a topic of its own below it.
    #[arg(long, default_value = "fairbench")]
    pub topic_prefix: String,
}

/// What a finished run leaves: the report (also written to `results_dir`) and the exit code
/// (0: every cell ok; 1: the run finished but some cell is not).
#[derive(Debug)]
pub struct Summary {
    pub report: Report,
    pub results_dir: PathBuf,
    pub exit_code: u8,
}

/// Runs the scenarios on a runtime of its own; Ctrl-C stops it cleanly.
pub fn run(opts: Opts) -> anyhow::Result<Summary> {
    runtime()?.block_on(async {
        let interrupt = common::interrupt::install();
        suite::run(opts, interrupt).await
    })
}

/// As [`run`], with the interrupt flag supplied by the caller instead of Ctrl-C.
pub fn run_with_interrupt(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    runtime()?.block_on(suite::run(opts, interrupt))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    // The control path only; clients run on common's per-core lanes.
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("mqtt-bench")
        .build()?)
}
