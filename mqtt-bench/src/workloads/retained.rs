//! Retained messages: `--retained` R messages published retained (one per topic) before the
//! clock, then a subscriber that connected beforehand subscribes to all of them at once; the
//! figure is retained messages received per second from its SUBSCRIBE, the latency each one's
//! arrival after it. Every topic is cleared afterwards.

use std::collections::BTreeMap;
use std::time::Duration;

use common::results::Status;
use common::window::WindowOutcome;
use serde_json::json;

use super::{Ctx, RoundError, RoundOutcome, Row};
use crate::engine::retained::{self, RetainedSpec};

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    if ctx.link.connack.retain_available == Some(false) {
        return Err(RoundError {
            status: Status::Refused,
            message: "the broker's CONNACK says retained messages are not available".into(),
        });
    }
    let window = ctx.window();
    let base = ctx.topic_base(row, window);
    let spec = RetainedSpec {
        endpoint: ctx.link.endpoint.clone(),
        topics: (0..opts.retained)
            .map(|i| format!("{base}/retained/{i}"))
            .collect(),
        filter: format!("{base}/retained/#"),
        qos: row.qos,
        inflight: opts.inflight,
        payload: ctx.payload.clone(),
        window_id: window,
        client_prefix: ctx.client_prefix(window),
        epoch: ctx.epoch,
        ceiling: opts.common.ceiling,
    };
    let sampler = ctx.link.probe.clone().map(common::procstat::Sampler::start);
    let r = retained::run(spec).await;
    let usage = sampler
        .map(common::procstat::Sampler::finish)
        .unwrap_or_default();
    let r = r?;
    let mut marks = Vec::new();
    if let Some(error) = &r.error {
        marks.push((Status::Error, format!("{label}: {error}")));
    }
    if r.delivery.lost > 0 {
        marks.push((
            Status::Error,
            format!(
                "{label}: {} of {} retained messages never reached the new subscriber",
                r.delivery.lost, r.published
            ),
        ));
    }
    if r.without_retain_flag > 0 {
        marks.push((
            Status::Invalid,
            format!(
                "{label}: {} retained messages arrived without the retain flag",
                r.without_retain_flag
            ),
        ));
    }
    if !r.cleared {
        marks.push((
            Status::Error,
            format!("{label}: the retained messages could not be cleared afterwards"),
        ));
    }
    let messages = r.delivery.distinct.max(1);
    let mut recorder = r.recorder.clone();
    recorder.counts.ok = r.delivery.distinct;
    let figures = BTreeMap::from([
        ("client_busy_share", r.lanes.busiest()),
        ("time_to_all_s", r.elapsed.as_secs_f64()),
    ]);
    Ok(RoundOutcome {
        outcome: WindowOutcome {
            recorder,
            workers: 2,
            elapsed: r.elapsed.max(Duration::from_nanos(1)),
            stuck_workers: 0,
            client_cpu_ns: r.lanes.cpu_ns,
            client_busy: None,
            client_busy_least: None,
            busy_is_the_clients: false,
            target_rate: None,
        },
        marks,
        detail: json!({
            "figure_per_s": r.delivered_per_s(),
            "published": r.published,
            "delivery": r.delivery,
            "time_to_all_s": r.elapsed.as_secs_f64(),
            "client_cpu_ns_per_msg": r.lanes.cpu_ns as f64 / messages as f64,
            "broker_cpu_ns_per_msg": usage.cpu_ns.map(|ns| ns as f64 / messages as f64),
            "cleared": r.cleared,
        }),
        delivery: r.delivery,
        messages,
        usage,
        target_rate: None,
        accepted_rate: None,
        lanes: r.lanes.clone(),
        figures,
    })
}
