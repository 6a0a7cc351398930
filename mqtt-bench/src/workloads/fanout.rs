//! Fan-out (scenario 2): one publisher, `--subscribers` subscribers on one topic; the figure is
//! aggregate deliveries per second, every subscriber's ledger checked.

use super::{Ctx, RoundError, RoundOutcome, Row, delivered_round};

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let spec = ctx.spec(row, ctx.opts.subscribers, ctx.opts.common.rate);
    let m = ctx.measure(spec).await?;
    Ok(delivered_round(m, row, label, ctx.opts.common.rate))
}
