//! QoS 0 delivered throughput, 1 publisher → 1 subscriber (scenario 3): the publish rate is
//! swept upwards, each step reporting offered, accepted and delivered rates and loss. A round's
//! figure is the highest delivered rate with loss within `--max-loss` at a step the client did
//! not limit — a broker that slows its publisher through TCP sets its own pace and counts; a
//! broker that sheds messages does not. Never a delivered rate against an accepted one.

use std::time::Duration;

use common::human::format_rate;
use common::results::Status;
use serde_json::json;

use super::{Ctx, RoundOutcome, Row, detail, judge, outcome};
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
    /// The client did not publish at the offered rate and was not held back by the broker.
    ClientLimited,
}

impl Step {
    pub fn word(self) -> &'static str {
        match self {
            Step::Ok => "ok",
            Step::BrokerLimited => "broker-limited",
            Step::Lossy => "lossy",
            Step::ClientLimited => "client-limited",
        }
    }

    /// Whether the step's delivered rate may be the round's figure.
    pub fn counts(self) -> bool {
        matches!(self, Step::Ok | Step::BrokerLimited)
    }
}

/// Classifies a step from what the publisher and the subscriber saw.
pub fn classify(
    offered: f64,
    accepted: f64,
    loss: f64,
    max_loss: f64,
    waited: Duration,
    window: Duration,
) -> Step {
    if loss > max_loss {
        Step::Lossy
    } else if accepted >= SHORT * offered {
        Step::Ok
    } else if waited.as_secs_f64() >= WAITED * window.as_secs_f64() {
        Step::BrokerLimited
    } else {
        Step::ClientLimited
    }
}

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, String> {
    let opts = ctx.opts;
    let mut steps = Vec::new();
    let mut best: Option<(f64, Measured)> = None;
    let mut first: Option<Measured> = None;
    let mut marks = Vec::new();
    for &offered in &opts.sweep {
        let spec = ctx.spec(row, 1, Some(offered));
        let m = ctx.measure(spec).await?;
        let r = &m.result;
        let step_label = format!("{label} at {}/s", format_rate(offered));
        let failed = judge(r, 0, &step_label);
        let step = classify(
            offered,
            r.accepted_per_s(),
            r.delivery.loss_fraction(),
            opts.max_loss,
            r.publisher.waited_on_broker,
            opts.common.duration,
        );
        let delivered = r.delivered_per_s();
        let mut figures = detail(&m, delivered);
        figures["offered_per_s"] = json!(offered);
        figures["step"] = json!(step.word());
        steps.push(figures);
        let stop = !failed.is_empty() || !matches!(step, Step::Ok);
        marks.extend(failed);
        if step.counts() && marks.is_empty() && best.as_ref().is_none_or(|(b, _)| delivered > *b) {
            best = Some((delivered, m));
        } else if first.is_none() {
            first = Some(m);
        }
        if stop {
            break;
        }
    }
    let chosen = match best {
        Some((_, m)) => m,
        None => {
            marks.push((Status::Error, no_figure(label, &steps, opts.max_loss)));
            first.ok_or_else(|| "the sweep has no rates".to_owned())?
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
        target_rate: None,
        accepted_rate: None,
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
        let w = Duration::from_secs(10);
        let c = |accepted, loss, waited_ms| {
            classify(
                100_000.0,
                accepted,
                loss,
                0.001,
                Duration::from_millis(waited_ms),
                w,
            )
        };
        assert_eq!(c(99_000.0, 0.0, 0), Step::Ok);
        assert_eq!(c(99_000.0, 0.01, 0), Step::Lossy);
        // Short, but the publisher spent 3 s waiting for the socket: the broker's pace.
        assert_eq!(c(60_000.0, 0.0, 3_000), Step::BrokerLimited);
        // Short without waiting: the client could not keep up.
        assert_eq!(c(60_000.0, 0.0, 10), Step::ClientLimited);
        assert!(Step::BrokerLimited.counts() && !Step::ClientLimited.counts());
        assert!(!Step::Lossy.counts());
    }
}
