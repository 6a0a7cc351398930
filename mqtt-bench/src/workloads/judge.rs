//! How a window is judged and folded into a round: a QoS 1/2 message lost or a QoS 2 message
//! delivered twice is an error, a message never sent is an invalid result, a publish the broker
//! refused is counted with its reason; a paced publisher that fell short is `client-limited`
//! only when its lane was busy for 90% of the window, else the broker did not take the target
//! (said, with the achieved rate, as a result of the broker). Every window, closed loop too,
//! hands its busiest lane to `common`'s judgement, which names the client as the limit at 90%.

use std::collections::BTreeMap;
use std::time::Duration;

use common::human::format_rate;
use common::results::Status;
use common::window::WindowOutcome;
use serde_json::json;

use super::{RoundOutcome, Row};
use crate::engine::WindowResult;
use crate::session::Measured;

/// A lane busy (on a CPU) at least this share of the window was the limit: `common`'s limit.
pub const CLIENT_BUSY: f64 = common::protocol::CLIENT_LIMIT;
/// A paced publisher fell short when it published less than this share of its rate.
const SHORT: f64 = 0.95;

/// The statuses a window earns from its ledgers.
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
    let p = &result.publisher;
    if p.refused > 0 {
        marks.push((
            Status::Error,
            format!(
                "{label}: the broker refused {} of {} publishes ({})",
                p.refused,
                p.sent,
                p.refused_reason.as_deref().unwrap_or("no reason given")
            ),
        ));
    }
    if qos > 0 && d.lost > 0 {
        marks.push((
            Status::Error,
            format!(
                "{label}: {} QoS {qos} messages lost ({} owed, {} delivered)",
                d.lost, d.sent, d.distinct
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
        client_busy: (!m.result.lanes.busy_share.is_empty()).then(|| m.result.lanes.busiest()),
        client_busy_least: m.result.lanes.least_busy(),
        busy_is_the_clients: true,
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
        "refused": r.publisher.refused,
        "accepted_per_s": r.accepted_per_s(),
        "delivered_per_s": r.delivered_per_s(),
        "waited_on_broker_s": r.publisher.waited_on_broker.as_secs_f64(),
        "missed_ticks": r.publisher.missed_ticks,
        "delivery": r.delivery,
        "client_cpu_ns_per_msg": m.client_cpu_ns as f64 / messages,
        "client_busy_share": r.lanes.busy_share,
        "client_waiting_share": r.lanes.waiting_share,
        "broker_cpu_ns_per_msg": m.usage.cpu_ns.map(|ns| ns as f64 / messages),
        "broker_peak_rss_bytes": m.usage.peak_rss_bytes,
        "client_peak_rss_bytes": m.usage.client_peak_rss_bytes,
        "ack_latency_ns": r.publisher.ack_latency.as_ref().and_then(common::recorder::percentiles),
        "inflight": r.inflight,
        "topic_alias": r.topic_alias,
    })
}

/// What limited a paced round that published less than asked: the client's lane when it was
/// busy nearly all the window (`client-limited`), else the broker (the target was not reached:
/// a result, reported with the achieved rate).
pub fn limit(
    m: &Measured,
    target: Option<f64>,
    label: &str,
) -> (Vec<(Status, String)>, Option<String>) {
    let r = &m.result;
    let Some(rate) = target else {
        return (Vec::new(), None);
    };
    let accepted = r.accepted_per_s();
    if accepted >= SHORT * rate {
        return (Vec::new(), None);
    }
    let busy = r.lanes.busy_of(0);
    let said = format!(
        "published {}/s of the {}/s asked",
        format_rate(accepted),
        format_rate(rate)
    );
    if busy >= CLIENT_BUSY {
        let mark = format!(
            "{label}: {said}; the publisher's lane was busy {:.0}% of the window",
            busy * 100.0
        );
        return (vec![(Status::ClientLimited, mark)], None);
    }
    let waited = r.publisher.waited_on_broker.as_secs_f64()
        / r.publisher.send_elapsed.as_secs_f64().max(1e-9);
    (
        Vec::new(),
        Some(format!(
            "target not reached: {said} with the publisher's lane busy {:.0}% of the window and waiting on the broker {:.0}% of it",
            busy * 100.0,
            waited * 100.0
        )),
    )
}

/// A round whose figure is the delivered rate (fan-out, latency, many-to-many, shared).
pub fn delivered_round(m: Measured, row: &Row, label: &str, target: Option<f64>) -> RoundOutcome {
    let r = &m.result;
    let elapsed = r.last_delivery.max(r.publisher.send_elapsed);
    let mut marks = judge(r, row.qos, label);
    let (limited, not_reached) = limit(&m, target, label);
    marks.extend(limited);
    let mut detail = detail(&m, r.delivered_per_s());
    if let Some(note) = &not_reached {
        detail["limit"] = json!(note);
    }
    let mut figures = BTreeMap::new();
    figures.insert("client_busy_share", r.lanes.busiest());
    RoundOutcome {
        outcome: outcome(&m, r.delivery.distinct, elapsed),
        marks,
        detail,
        delivery: r.delivery,
        messages: r.delivery.distinct,
        usage: m.usage,
        target_rate: target,
        accepted_rate: target.map(|_| r.accepted_per_s()),
        lanes: r.lanes.clone(),
        figures,
    }
}
