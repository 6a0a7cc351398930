//! The scenarios, one file per family, and what they share: the rows a run makes (a scenario
//! at one QoS), how a window is specified for a broker and measured with its resources, and
//! the round a scenario hands back to be folded into its cell. How a round is judged lives in
//! [`judge`].

pub mod acked;
pub mod fanout;
pub mod judge;
pub mod latency;
pub mod many;
pub mod persistent;
pub mod qos0;
pub mod retained;
pub mod shared;
pub mod storm;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::procstat::Usage;
use common::results::Status;
use common::scale::Segment;
use common::window::WindowOutcome;

use crate::engine::lanes::LaneUsage;
use crate::engine::{Owed, WindowSpec};
use crate::gate::Gate;
use crate::message::Delivery;
use crate::opts::{Opts, Scenario};
use crate::protocol::conn::{ConnError, Session};
use crate::session::{self, Link, Measured};

pub use judge::{delivered_round, detail, judge, outcome};

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
    /// This worker's clients of one window of this row (all of them without workers).
    pub fn clients(&self, opts: &Opts, segment: Segment) -> u32 {
        let share = |n: usize| segment.share(n as u64);
        let n = match self.scenario {
            Scenario::Fanout => opts.subscribers as u64 + 1,
            Scenario::ManyToMany => {
                share(opts.many_to_many.publishers) + share(opts.many_to_many.subscribers)
            }
            Scenario::Shared => opts.group as u64 + 1,
            Scenario::Connect | Scenario::Idle => segment.share(opts.clients),
            _ => 2,
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The row's family name without its QoS: the rows a QoS table sets side by side.
    pub fn family(&self) -> String {
        match self.name.rsplit_once(", qos") {
            Some((family, _)) => family.to_owned(),
            None => self.name.replace(&format!("qos{}", self.qos), "qos*"),
        }
    }
}

/// The rows the chosen scenarios make, in order: one per QoS level each takes.
pub fn rows(opts: &Opts) -> Vec<Row> {
    let rate = common::human::format_rate(opts.latency_rate);
    let m2m = opts.many_to_many;
    let mut rows = Vec::new();
    for scenario in opts.chosen() {
        for qos in scenario.qos_levels(&opts.qos) {
            let (name, unit) = match scenario {
                Scenario::Qos1 | Scenario::Qos2 => (acked::name(qos, opts), "msg/s"),
                Scenario::Fanout => (format!("fan-out 1→{}, qos{qos}", opts.subscribers), "del/s"),
                Scenario::Qos0 => ("qos0 delivered 1→1".into(), "msg/s"),
                Scenario::Latency => (format!("latency @ {rate}/s, qos{qos}"), "msg/s"),
                Scenario::Connect => (
                    format!(
                        "connect {} clients @ {}/s",
                        common::human::format_rate(opts.clients as f64),
                        common::human::format_rate(opts.connect_rate)
                    ),
                    "conn/s",
                ),
                Scenario::Idle => (
                    format!(
                        "idle {} clients",
                        common::human::format_rate(opts.clients as f64)
                    ),
                    "conns",
                ),
                Scenario::ManyToMany => (
                    format!(
                        "many-to-many {}×{} over {} topics, qos{qos}",
                        m2m.publishers, m2m.subscribers, opts.topics
                    ),
                    "del/s",
                ),
                Scenario::Shared => (format!("shared group of {}, qos{qos}", opts.group), "msg/s"),
                Scenario::Retained => (
                    format!(
                        "retained {} to a new subscriber, qos{qos}",
                        common::human::format_rate(opts.retained as f64)
                    ),
                    "msg/s",
                ),
                Scenario::Persistent => (
                    format!(
                        "persistent session, away {}, qos{qos}",
                        common::human::format_duration(opts.away)
                    ),
                    "msg/s",
                ),
            };
            rows.push(Row {
                scenario,
                qos,
                name,
                unit,
            });
        }
    }
    rows
}

/// Each system's resident memory before its first connection storm, so memory per connection
/// is measured against the same floor in every round (a broker's allocator keeps what an
/// earlier storm freed, so a round's own before-and-after reads near zero from round 2 on).
#[derive(Debug, Default)]
pub struct Baselines {
    pub broker_rss: BTreeMap<String, u64>,
    pub client_rss: Option<u64>,
}

/// What a round needs besides the row: the options, the broker, and unique window numbers.
pub struct Ctx<'a> {
    pub opts: &'a Opts,
    pub link: &'a Link,
    /// The system's name, for its baselines.
    pub system: &'a str,
    /// The run's own topic level (`{prefix}/{run tag}/…`).
    pub run_tag: &'a str,
    pub epoch: Instant,
    pub payload: Bytes,
    /// Numbers every window of the run, so topics and client ids never repeat.
    pub next_window: &'a mut u32,
    pub baselines: &'a mut Baselines,
    /// This worker at the start barrier: its share of every quantity, and where each window
    /// opens.
    pub gate: &'a mut Gate,
}

impl Ctx<'_> {
    /// This worker's part of the run (the whole of it without workers).
    pub fn segment(&self) -> Segment {
        self.gate.segment()
    }

    /// The next window's number.
    pub fn window(&mut self) -> u32 {
        let window = *self.next_window;
        *self.next_window += 1;
        window
    }

    /// The topic level of window `window` of `row`.
    pub fn topic_base(&self, row: &Row, window: u32) -> String {
        format!(
            "{}/{}/{}/{window}",
            self.opts.topic_prefix,
            self.run_tag,
            row.scenario.word()
        )
    }

    pub fn client_prefix(&self, window: u32) -> String {
        format!("fairbench-{}-{window}", self.run_tag)
    }

    /// A window's spec with the run's settings: one publisher on the window's topic and
    /// `subscribers` subscribers on it; each scenario changes what it needs.
    pub fn spec(&mut self, row: &Row, subscribers: usize, rate_per_s: Option<f64>) -> WindowSpec {
        let window = self.window();
        let opts = self.opts;
        let topic = self.topic_base(row, window);
        WindowSpec {
            endpoint: self.link.endpoint.clone(),
            pub_topics: vec![topic.clone()],
            sub_filters: vec![topic; subscribers],
            owed: Owed::Each,
            pub_qos: row.qos,
            sub_qos: row.qos,
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
            read_coalesce: opts.read_coalesce,
            topic_alias: true,
            session: Session::CLEAN,
            away: None,
            window_id: window,
            client_prefix: self.client_prefix(window),
            epoch: self.epoch,
        }
    }

    /// Runs one window with the broker's CPU and memory sampled through it, opened at the
    /// start barrier.
    pub async fn measure(&mut self, spec: WindowSpec) -> Result<Measured, RoundError> {
        session::measure(self.link, spec, self.gate)
            .await
            .map_err(RoundError::from)
    }
}

/// A round that could not be measured: a refusal (the broker declined what the scenario
/// needs, with its reason) or an error.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundError {
    pub status: Status,
    pub message: String,
}

impl From<ConnError> for RoundError {
    fn from(e: ConnError) -> RoundError {
        RoundError {
            status: if e.is_refusal() {
                Status::Refused
            } else {
                Status::Error
            },
            message: e.to_string(),
        }
    }
}

impl From<String> for RoundError {
    fn from(message: String) -> RoundError {
        RoundError {
            status: Status::Error,
            message,
        }
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
    /// The client's lanes over the round.
    pub lanes: LaneUsage,
    /// Named figures of the round a scenario reports beside its headline (memory per
    /// connection, CONNACK p99, balance …); the cell keeps their median over the rounds.
    pub figures: BTreeMap<&'static str, f64>,
}

/// Runs one round of `row`.
pub async fn run_round(
    row: &Row,
    ctx: &mut Ctx<'_>,
    label: &str,
) -> Result<RoundOutcome, RoundError> {
    match row.scenario {
        Scenario::Qos1 | Scenario::Qos2 => acked::round(row, ctx, label).await,
        Scenario::Fanout => fanout::round(row, ctx, label).await,
        Scenario::Qos0 => qos0::round(row, ctx, label).await,
        Scenario::Latency => latency::round(row, ctx, label).await,
        Scenario::Connect | Scenario::Idle => storm::round(row, ctx, label).await,
        Scenario::ManyToMany => many::round(row, ctx, label).await,
        Scenario::Shared => shared::round(row, ctx, label).await,
        Scenario::Retained => retained::round(row, ctx, label).await,
        Scenario::Persistent => persistent::round(row, ctx, label).await,
    }
}
