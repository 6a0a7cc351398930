//! Acked publish throughput (scenarios 1 and 5): one publisher keeps `--inflight` QoS 1 or 2
//! messages unacknowledged; the figure is acknowledgements per second (PUBACK, or PUBCOMP).
//! One subscriber at the same QoS proves every acknowledged message was delivered once.

use super::{Ctx, RoundOutcome, Row, detail, judge, outcome};
use crate::opts::Opts;

pub fn name(qos: u8, opts: &Opts) -> String {
    format!("qos{qos} acked publish, {} in flight", opts.inflight)
}

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, String> {
    let spec = ctx.spec(row, 1, ctx.opts.common.rate);
    let m = ctx.measure(spec).await?;
    let r = &m.result;
    let figure = r.acked_per_s();
    Ok(RoundOutcome {
        outcome: outcome(&m, r.publisher.acked, r.publisher.ack_elapsed),
        marks: judge(r, row.qos, label),
        detail: detail(&m, figure),
        delivery: r.delivery,
        messages: r.publisher.acked,
        usage: m.usage,
        target_rate: ctx.opts.common.rate,
        accepted_rate: ctx.opts.common.rate.map(|_| r.accepted_per_s()),
    })
}
