//! Acked publish throughput (scenarios 1 and 5): one publisher keeps `--inflight` QoS 1 or 2
//! messages unacknowledged; the figure is acknowledgements per second (PUBACK, or PUBCOMP).
//! One subscriber at the same QoS proves every acknowledged message was delivered once.

use std::collections::BTreeMap;

use super::judge::limit;
use super::{Ctx, RoundError, RoundOutcome, Row, detail, judge, outcome};
use crate::opts::Opts;

pub fn name(qos: u8, opts: &Opts) -> String {
    format!("qos{qos} acked publish, {} in flight", opts.inflight)
}

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let rate = ctx.opts.common.rate;
    let spec = ctx.spec(row, 1, rate);
    let m = ctx.measure(spec).await?;
    let r = &m.result;
    let figure = r.acked_per_s();
    let mut marks = judge(r, row.qos, label);
    let (limited, not_reached) = limit(&m, rate, label);
    marks.extend(limited);
    let mut detail = detail(&m, figure);
    if let Some(note) = not_reached {
        detail["limit"] = serde_json::json!(note);
    }
    Ok(RoundOutcome {
        outcome: outcome(&m, r.publisher.acked, r.publisher.ack_elapsed),
        marks,
        detail,
        delivery: r.delivery,
        messages: r.publisher.acked,
        usage: m.usage,
        target_rate: rate,
        accepted_rate: rate.map(|_| r.accepted_per_s()),
        lanes: r.lanes.clone(),
        figures: BTreeMap::from([("client_busy_share", r.lanes.busiest())]),
    })
}
