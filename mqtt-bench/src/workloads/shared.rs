//! Shared subscriptions: one publisher, `--group` K consumers on `$share/GROUP/TOPIC`. Each
//! message is owed once to the group, whichever consumer gets it: the ledger is the group's
//! (a message two consumers got is a duplicate), and the balance is each consumer's share of
//! what the group received (min/max). A broker that grants the subscription and then delivers
//! nothing does not implement shared subscriptions: a `refused` cell.

use common::results::Status;
use serde_json::json;

use super::{Ctx, RoundError, RoundOutcome, Row, delivered_round};
use crate::engine::Owed;

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    if ctx.link.connack.shared_subscription_available == Some(false) {
        return Err(RoundError {
            status: Status::Refused,
            message: "the broker's CONNACK says shared subscriptions are not available".into(),
        });
    }
    let mut spec = ctx.spec(row, opts.group, opts.common.rate);
    let topic = spec.pub_topics[0].clone();
    let group = format!("fb{}", spec.window_id);
    spec.sub_filters = vec![format!("$share/{group}/{topic}"); opts.group];
    spec.owed = Owed::Group;
    let m = ctx.measure(spec).await?;
    let per_consumer = m.result.per_subscriber.clone();
    let shares = balance(&per_consumer);
    let sent = m.result.publisher.sent;
    let received = m.result.delivery.distinct;
    let mut round = delivered_round(m, row, label, opts.common.rate);
    if sent > 0 && received == 0 {
        round.marks.insert(
            0,
            (
                Status::Refused,
                format!(
                    "{label}: the broker granted `$share/{group}/…` but delivered none of {sent} messages to the group: it does not implement shared subscriptions"
                ),
            ),
        );
    }
    if let Some((min, max)) = shares {
        round.figures.insert("min_share", min);
        round.figures.insert("max_share", max);
    }
    round.detail["per_consumer"] = json!(per_consumer);
    Ok(round)
}

/// The smallest and largest consumer's share of what the group received.
fn balance(per_consumer: &[u64]) -> Option<(f64, f64)> {
    let total: u64 = per_consumer.iter().sum();
    if total == 0 {
        return None;
    }
    let share = |n: u64| n as f64 / total as f64;
    let min = per_consumer.iter().copied().min()?;
    let max = per_consumer.iter().copied().max()?;
    Some((share(min), share(max)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn balance_is_each_consumers_share_of_what_arrived() {
        assert_eq!(super::balance(&[25, 25, 50]), Some((0.25, 0.5)));
        assert_eq!(super::balance(&[0, 0]), None);
    }
}
