//! QoS 0 delivered throughput, 1 publisher → 1 subscriber (scenario 3): the publish rate is
//! swept upwards, each step reporting offered, accepted and delivered rates and loss. A round's
//! figure is the highest delivered rate with loss within `--max-loss` at a step the client did
//! not limit — a broker that slows its publisher through TCP sets its own pace and counts; a
//! broker that sheds messages does not. Never a delivered rate against an accepted one.

use std::time::Duration;

use common::human::format_rate;
use common::results::Status;
use serde_json::json;

use std::collections::BTreeMap;

use super::judge::CLIENT_BUSY;
use super::{Ctx, RoundError, RoundOutcome, Row, detail, judge, outcome};
use crate::session::Measured;

/// A step fell short of its rate when it published less than this share of it.
const SHORT: f64 = 0.95;
/// A short step waited on the broker when it spent at least this share of the window waiting.
const WAITED: f64 = 0.05;

/// What one step of the sweep was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Published at the offered rate, delivered within the loss bound.
    Ok,
    /// The broker took less than offered (it slowed the publisher), delivered within the bound.
    BrokerLimited,
    /// More loss than the bound.
    Lossy,
    /// The client did not publish at the offered rate: its lane was busy all the window.
    ClientLimited,
    /// Short of the offered rate, neither waiting on the broker nor busy: the target was not
    /// reached for a reason the client cannot see (a stalled machine); it gives no figure.
    NotReached,
}

impl Step {
    pub fn word(self) -> &'static str {
        match self {
            Step::Ok => "ok",
            Step::BrokerLimited => "broker-limited",
            Step::Lossy => "lossy",
            Step::ClientLimited => "client-limited",
            Step::NotReached => "target not reached",
        }
    }

    /// Whether the step's delivered rate may be the round's figure.
    pub fn counts(self) -> bool {
        matches!(self, Step::Ok | Step::BrokerLimited)
    }
}

/// What the publisher and the subscriber saw in one step.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub offered: f64,
    pub accepted: f64,
    pub loss: f64,
    pub waited: Duration,
    pub window: Duration,
    /// The publisher's lane: on a CPU or waiting for one, as a share of the window.
    pub busy: f64,
}

/// Classifies a step from what the publisher and the subscriber saw.
pub fn classify(seen: Seen, max_loss: f64) -> Step {
    if seen.loss > max_loss {
        Step::Lossy
    } else if seen.accepted >= SHORT * seen.offered {
        Step::Ok
    } else if seen.waited.as_secs_f64() >= WAITED * seen.window.as_secs_f64() {
        Step::BrokerLimited
    } else if seen.busy >= CLIENT_BUSY {
        Step::ClientLimited
    } else {
        Step::NotReached
    }
}

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    let mut steps = Vec::new();
    // The delivered rate, the offered rate and what was measured at that step.
    let mut best: Option<(f64, f64, Measured)> = None;
    let mut first: Option<(f64, Measured)> = None;
    let mut marks = Vec::new();
    for &offered in &opts.sweep {
        let spec = ctx.spec(row, 1, Some(offered));
        let m = ctx.measure(spec).await?;
        let r = &m.result;
        let step_label = format!("{label} at {}/s", format_rate(offered));
        let failed = judge(r, 0, &step_label);
        let step = classify(
            Seen {
                offered,
                accepted: r.accepted_per_s(),
                loss: r.delivery.loss_fraction(),
                waited: r.publisher.waited_on_broker,
                window: opts.common.duration,
                busy: r.lanes.busy_of(0),
            },
            opts.max_loss,
        );
        let delivered = r.delivered_per_s();
        let mut figures = detail(&m, delivered);
        figures["offered_per_s"] = json!(offered);
        figures["step"] = json!(step.word());
        steps.push(figures);
        let stop = !failed.is_empty() || !matches!(step, Step::Ok);
        marks.extend(failed);
        if step.counts() && marks.is_empty() && best.as_ref().is_none_or(|(b, ..)| delivered > *b) {
            best = Some((delivered, offered, m));
        } else if first.is_none() {
            first = Some((offered, m));
        }
        if stop {
            break;
        }
    }
    let (offered, chosen) = match best {
        Some((_, offered, m)) => (offered, m),
        None => {
            marks.push((Status::Error, no_figure(label, &steps, opts.max_loss)));
            first.ok_or_else(|| RoundError::from("the sweep has no rates".to_owned()))?
        }
    };
    let r = &chosen.result;
    let elapsed = r.last_delivery.max(r.publisher.send_elapsed);
    Ok(RoundOutcome {
        outcome: outcome(&chosen, r.delivery.distinct, elapsed),
        marks,
        detail: json!({ "steps": steps, "figure_per_s": r.delivered_per_s() }),
        delivery: r.delivery,
        messages: r.delivery.distinct,
        usage: chosen.usage,
        // The chosen step's pace: its missed ticks and lost messages stand beside its figure.
        target_rate: Some(offered),
        accepted_rate: Some(r.accepted_per_s()),
        lanes: r.lanes.clone(),
        figures: BTreeMap::from([("client_busy_share", r.lanes.busiest())]),
    })
}

fn no_figure(label: &str, steps: &[serde_json::Value], max_loss: f64) -> String {
    let last = steps.last();
    let word = last.and_then(|s| s["step"].as_str()).unwrap_or("failed");
    let offered = last
        .and_then(|s| s["offered_per_s"].as_f64())
        .unwrap_or(0.0);
    format!(
        "{label}: no step delivered with loss ≤ {:.2}% at a rate the client did not limit (the first, {}/s, was {word})",
        max_loss * 100.0,
        format_rate(offered)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_told_apart_by_loss_shortfall_and_waiting() {
        let c = |accepted, loss, waited_ms, busy| {
            classify(
                Seen {
                    offered: 100_000.0,
                    accepted,
                    loss,
                    waited: Duration::from_millis(waited_ms),
                    window: Duration::from_secs(10),
                    busy,
                },
                0.001,
            )
        };
        assert_eq!(c(99_000.0, 0.0, 0, 0.3), Step::Ok);
        assert_eq!(c(99_000.0, 0.01, 0, 0.3), Step::Lossy);
        // Short, but the publisher spent 3 s waiting for the socket: the broker's pace.
        assert_eq!(c(60_000.0, 0.0, 3_000, 0.3), Step::BrokerLimited);
        // Short without waiting, its lane busy all the time: the client could not keep up.
        assert_eq!(c(60_000.0, 0.0, 10, 0.97), Step::ClientLimited);
        // Short, neither waiting nor busy: not the client's doing, and no figure either.
        assert_eq!(c(60_000.0, 0.0, 10, 0.4), Step::NotReached);
        assert!(Step::BrokerLimited.counts() && !Step::ClientLimited.counts());
        assert!(!Step::Lossy.counts() && !Step::NotReached.counts());
    }
}
