//! Many-to-many: `--many-to-many P×S` — P publishers spread over `--topics` T topics
//! (`…/sensors/N/temp`), S subscribers each on the wildcard `…/sensors/+/temp`, so every
//! subscriber is owed every message of every publisher; one ledger per subscriber and
//! publisher. The figure is aggregate deliveries per second.

use super::{Ctx, RoundError, RoundOutcome, Row, delivered_round};

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    let shape = opts.many_to_many;
    let mut spec = ctx.spec(row, shape.subscribers, opts.common.rate);
    let base = spec.pub_topics[0].clone();
    spec.pub_topics = (0..shape.publishers)
        .map(|p| format!("{base}/sensors/{}/temp", p % opts.topics))
        .collect();
    spec.sub_filters = vec![format!("{base}/sensors/+/temp"); shape.subscribers];
    // Every subscriber is owed P publishers' messages: the bound grows with them.
    spec.backlog = spec.backlog.map(|b| b * shape.publishers as u64);
    let m = ctx.measure(spec).await?;
    Ok(delivered_round(m, row, label, opts.common.rate))
}
