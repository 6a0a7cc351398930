//! The scenarios of seed 000's MQTT section, one file per family, and what they share: how a
//! window is specified for a broker, measured with its resources, judged (a QoS 1/2 message
//! lost is an error, a message never sent is an invalid result), and folded into a round.

pub mod acked;
pub mod fanout;
pub mod latency;
pub mod qos0;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::procstat::Usage;
use common::results::Status;
use common::window::WindowOutcome;
use serde_json::json;

use crate::engine::{WindowResult, WindowSpec};
use crate::message::Delivery;
use crate::opts::{Opts, Scenario};
use crate::session::{self, Link, Measured};

/// QoS 0: subscribers stop waiting for missing messages after this long with none arriving.
const DRAIN_QUIET_QOS0: Duration = Duration::from_millis(500);
/// QoS 1/2 messages are owed: wait longer before calling one lost.
const DRAIN_QUIET_ACKED: Duration = Duration::from_secs(3);

/// One row of the report: a scenario at one QoS.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub scenario: Scenario,
    pub qos: u8,
    /// The cell's workload name, as the report prints it.
    pub name: String,
    pub unit: &'static str,
}

impl Row {
    /// Clients of one window of this row: the publisher and its subscribers.
    pub fn clients(&self, opts: &Opts) -> u32 {
        let subscribers = match self.scenario {
            Scenario::Fanout => opts.subscribers,
            _ => 1,
        };
        (subscribers + 1) as u32
    }
}

/// The rows the chosen scenarios make, in the seed's order.
pub fn rows(opts: &Opts) -> Vec<Row> {
    let mut chosen = if opts.scenarios.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        opts.scenarios.clone()
    };
    chosen.sort();
    chosen.dedup();
    let rate = common::human::format_rate(opts.latency_rate);
    let mut rows = Vec::new();
    for scenario in chosen {
        let row = |qos, name: String, unit| Row {
            scenario,
            qos,
            name,
            unit,
        };
        match scenario {
            Scenario::Qos1 => rows.push(row(1, acked::name(1, opts), "msg/s")),
            Scenario::Fanout => rows.push(row(opts.fanout_qos, fanout::name(opts), "del/s")),
            Scenario::Qos0 => rows.push(row(0, "qos0 delivered 1→1".into(), "msg/s")),
            Scenario::Latency => {
                for qos in 0..=2 {
                    rows.push(row(qos, format!("latency qos{qos} @ {rate}/s"), "msg/s"));
                }
            }
            Scenario::Qos2 => rows.push(row(2, acked::name(2, opts), "msg/s")),
        }
    }
    rows
}

/// What a round needs besides the row: the options, the broker, and unique window numbers.
pub struct Ctx<'a> {
    pub opts: &'a Opts,
    pub link: &'a Link,
    /// The run's own topic level (`{prefix}/{run tag}/…`).
    pub run_tag: &'a str,
    pub epoch: Instant,
    pub payload: Arc<[u8]>,
    /// Numbers every window of the run, so topics and client ids never repeat.
    pub next_window: &'a mut u32,
}

impl Ctx<'_> {
    /// A window's spec with the run's settings; each scenario changes what it needs.
    pub fn spec(&mut self, row: &Row, subscribers: usize, rate_per_s: Option<f64>) -> WindowSpec {
        let window = *self.next_window;
        *self.next_window += 1;
        let opts = self.opts;
        WindowSpec {
            endpoint: self.link.endpoint.clone(),
            topic: format!(
                "{}/{}/{}/{window}",
                opts.topic_prefix,
                self.run_tag,
                row.scenario.word()
            ),
            pub_qos: row.qos,
            sub_qos: row.qos,
            subscribers,
            inflight: opts.inflight,
            payload: self.payload.clone(),
            duration: opts.common.duration,
            rate_per_s,
            precise_pacing: false,
            ceiling: opts.common.ceiling,
            drain_quiet: if row.qos == 0 {
                DRAIN_QUIET_QOS0
            } else {
                DRAIN_QUIET_ACKED
            },
            backlog: rate_per_s.is_none().then_some(opts.backlog),
            window_id: window,
            client_prefix: format!("fairbench-{}-{window}", self.run_tag),
            epoch: self.epoch,
        }
    }

    /// Runs one window with the broker's CPU and memory sampled through it.
    pub async fn measure(&self, spec: WindowSpec) -> Result<Measured, String> {
        session::measure(self.link, spec).await
    }
}

/// One round of one row on one broker, ready for the cell.
pub struct RoundOutcome {
    /// What the common cell builder folds in (throughput, latency, counts, client CPU).
    pub outcome: WindowOutcome,
    /// Statuses this round earned beyond what the outcome shows.
    pub marks: Vec<(Status, String)>,
    /// The round's figures for the cell's `rounds` detail.
    pub detail: serde_json::Value,
    pub delivery: Delivery,
    /// Messages the broker handled (deliveries, or acknowledgements), for CPU per message.
    pub messages: u64,
    pub usage: Usage,
    /// Open loop: the publish rate asked for and achieved.
    pub target_rate: Option<f64>,
    pub accepted_rate: Option<f64>,
}

/// Runs one round of `row`.
pub async fn run_round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, String> {
    match row.scenario {
        Scenario::Qos1 | Scenario::Qos2 => acked::round(row, ctx, label).await,
        Scenario::Fanout => fanout::round(row, ctx, label).await,
        Scenario::Qos0 => qos0::round(row, ctx, label).await,
        Scenario::Latency => latency::round(row, ctx, label).await,
    }
}

/// The statuses a window earns from its ledgers: a QoS 1/2 message lost or a QoS 2 message
/// delivered twice is an error; a message that was never sent is an invalid result.
pub fn judge(result: &WindowResult, qos: u8, label: &str) -> Vec<(Status, String)> {
    let mut marks = Vec::new();
    let d = &result.delivery;
    if let Some(error) = &result.error {
        marks.push((Status::Error, format!("{label}: {error}")));
    }
    if d.strays > 0 {
        marks.push((
            Status::Invalid,
            format!(
                "{label}: {} deliveries of messages that were never sent on this topic",
                d.strays
            ),
        ));
    }
    if qos > 0 && d.lost > 0 {
        marks.push((
            Status::Error,
            format!(
                "{label}: {} QoS {qos} messages lost ({} sent to each of {} subscribers, {} delivered)",
                d.lost,
                result.publisher.sent,
                result.clients - 1,
                d.distinct
            ),
        ));
    }
    if qos == 2 && d.duplicates > 0 {
        marks.push((
            Status::Error,
            format!(
                "{label}: {} QoS 2 messages delivered twice (exactly once was broken)",
                d.duplicates
            ),
        ));
    }
    marks
}

/// The common outcome of a window whose figure is `count` messages over `elapsed`.
pub fn outcome(m: &Measured, count: u64, elapsed: Duration) -> WindowOutcome {
    let mut recorder = m.result.recorder.clone();
    recorder.counts.ok = count;
    recorder.lag = m.result.publisher.lag.clone();
    recorder.missed_ticks = m.result.publisher.missed_ticks;
    WindowOutcome {
        recorder,
        workers: m.result.clients,
        elapsed: elapsed.max(Duration::from_nanos(1)),
        stuck_workers: m.result.stuck,
        client_cpu_ns: m.client_cpu_ns,
        client_busy: None,
        busy_is_the_clients: false,
        target_rate: None,
    }
}

/// The per-round figures every scenario reports.
pub fn detail(m: &Measured, figure_per_s: f64) -> serde_json::Value {
    let r = &m.result;
    let messages = r.delivery.distinct.max(r.publisher.acked).max(1) as f64;
    json!({
        "figure_per_s": figure_per_s,
        "sent": r.publisher.sent,
        "acked": r.publisher.acked,
        "accepted_per_s": r.accepted_per_s(),
        "delivered_per_s": r.delivered_per_s(),
        "waited_on_broker_s": r.publisher.waited_on_broker.as_secs_f64(),
        "delivery": r.delivery,
        "client_cpu_ns_per_msg": m.client_cpu_ns as f64 / messages,
        "broker_cpu_ns_per_msg": m.usage.cpu_ns.map(|ns| ns as f64 / messages),
        "broker_peak_rss_bytes": m.usage.peak_rss_bytes,
        "client_peak_rss_bytes": m.usage.client_peak_rss_bytes,
        "ack_latency_ns": r.publisher.ack_latency.as_ref().and_then(common::recorder::percentiles),
    })
}

/// A round whose figure is the delivered rate (fan-out, latency).
pub fn delivered_round(m: Measured, row: &Row, label: &str, target: Option<f64>) -> RoundOutcome {
    let r = &m.result;
    let elapsed = r.last_delivery.max(r.publisher.send_elapsed);
    let mut marks = judge(r, row.qos, label);
    if let Some(rate) = target
        && r.accepted_per_s() < 0.95 * rate
        && r.publisher.waited_on_broker < r.publisher.send_elapsed / 20
    {
        marks.push((
            Status::ClientLimited,
            format!(
                "{label}: published {}/s of the {}/s asked, without waiting on the broker",
                common::human::format_rate(r.accepted_per_s()),
                common::human::format_rate(rate)
            ),
        ));
    }
    RoundOutcome {
        outcome: outcome(&m, r.delivery.distinct, elapsed),
        marks,
        detail: detail(&m, r.delivered_per_s()),
        delivery: r.delivery,
        messages: r.delivery.distinct,
        usage: m.usage,
        target_rate: target,
        accepted_rate: target.map(|_| r.accepted_per_s()),
    }
}
