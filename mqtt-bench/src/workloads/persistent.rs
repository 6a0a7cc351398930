//! Persistent sessions: a subscriber on a session that outlives its connection (3.1.1: clean
//! session off; 5: clean start off and `--session-expiry`) at QoS 1 or 2, a publisher paced at
//! `--session-rate`; a third of the way into the window the subscriber disconnects, stays away
//! for `--away`, and resumes its session. Everything published meanwhile must arrive: a lost
//! message (or a broker that did not keep the session) is an error. The session is cleared
//! afterwards.

use common::results::Status;
use serde_json::json;

use super::{Ctx, RoundError, RoundOutcome, Row, delivered_round};
use crate::engine::Away;
use crate::protocol::conn::Session;
use crate::session::clear_session;

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    let rate = opts.session_rate;
    let mut spec = ctx.spec(row, 1, Some(rate));
    spec.session = Session {
        clean: false,
        expiry_s: Some(opts.session_expiry.as_secs().min(u64::from(u32::MAX)) as u32),
    };
    let after = opts.common.duration / 3;
    spec.away = Some(Away {
        after,
        away: opts.away,
    });
    let subscriber = spec.subscriber_id(0);
    let endpoint = spec.endpoint.clone();
    let measured = ctx.measure(spec).await;
    // Whatever happened, the broker keeps nothing of the run.
    let cleared = clear_session(&endpoint, &subscriber).await;
    let m = measured?;
    let resumed = m.result.resumed.first().cloned();
    let mut round = delivered_round(m, row, label, Some(rate));
    match &resumed {
        None => round.marks.push((
            Status::Error,
            format!("{label}: the subscriber never came back on its session"),
        )),
        Some(r) if !r.session_present => round.marks.insert(
            0,
            (
                Status::Error,
                format!("{label}: the broker did not keep the session (CONNACK session present = 0 on reconnect)"),
            ),
        ),
        Some(r) => {
            let back_s = (after + opts.away).as_secs_f64();
            round.figures.insert("queued_while_away", r.written_when_back.saturating_sub(r.before) as f64);
            if let Some(caught_up) = r.caught_up_s {
                round.figures.insert("catch_up_s", (caught_up - back_s).max(0.0));
            }
        }
    }
    if let Err(e) = cleared {
        round.marks.push((
            Status::Error,
            format!("{label}: the session could not be cleared afterwards: {e}"),
        ));
    }
    round.detail["resumed"] = json!(resumed);
    Ok(round)
}
