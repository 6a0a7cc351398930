//! Delivery latency (scenario 4): a publisher paced open loop at `--latency-rate`, one
//! subscriber, QoS 0, 1 and 2; latency runs from each message's intended send time to its
//! receipt, so a late publisher or a slow broker both show (no coordinated omission).

use super::{Ctx, RoundOutcome, Row, delivered_round};

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, String> {
    let rate = ctx.opts.latency_rate;
    let mut spec = ctx.spec(row, 1, Some(rate));
    spec.precise_pacing = true;
    let m = ctx.measure(spec).await?;
    Ok(delivered_round(m, row, label, Some(rate)))
}
