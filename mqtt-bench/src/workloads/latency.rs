//! Delivery latency (scenario 4): a publisher paced open loop at `--latency-rate`, one
//! subscriber, at each `--qos`; latency runs from each message's intended send time to its
//! receipt, so a late publisher or a slow broker both show (no coordinated omission). Missed
//! ticks and lost messages are kept beside it: a lost message has no latency sample.

use super::{Ctx, RoundError, RoundOutcome, Row, delivered_round};

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let rate = ctx.opts.latency_rate;
    let mut spec = ctx.spec(row, 1, Some(rate));
    spec.precise_pacing = true;
    let m = ctx.measure(spec).await?;
    Ok(delivered_round(m, row, label, Some(rate)))
}
