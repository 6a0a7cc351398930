//! Many-to-many: `--many-to-many P×S` — P publishers spread over `--topics` T topics
//! (`…/sensors/N/temp`), S subscribers each on the wildcard `…/sensors/+/temp`, so every
//! subscriber is owed every message of every publisher; one ledger per subscriber and
//! publisher. The figure is aggregate deliveries per second. With several workers each takes
//! its share of the publishers, the subscribers, the topics and the rate, below a topic level
//! of its own: a topic's publishers and its subscribers are all on one worker, so each worker's
//! ledgers account for every message of its own topics.

use super::{Ctx, RoundError, RoundOutcome, Row, delivered_round};

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    let shape = opts.many_to_many;
    let segment = ctx.segment();
    let publishers = segment.share(shape.publishers as u64);
    let subscribers = segment.share(shape.subscribers as u64) as usize;
    let topics = segment.range(opts.topics as u64);
    let rate = opts.common.rate.map(|r| segment.share_of_rate(r));
    let mut spec = ctx.spec(row, subscribers, rate);
    let base = spec.pub_topics[0].clone();
    let count = topics.end - topics.start;
    spec.pub_topics = (0..publishers)
        .map(|p| format!("{base}/sensors/{}/temp", topics.start + p % count))
        .collect();
    spec.sub_filters = vec![format!("{base}/sensors/+/temp"); subscribers];
    // The bound stays the one of a single publisher: it is what each subscriber may have
    // waiting in the broker (`behind` counts every publisher's messages against each
    // subscriber's), which is what the broker's queue per client holds.
    let m = ctx.measure(spec).await?;
    Ok(delivered_round(m, row, label, rate))
}
