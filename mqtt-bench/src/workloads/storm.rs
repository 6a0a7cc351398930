//! Connection storms: `connect` (a storm of `--clients` at `--connect-rate`: connections per
//! second sustained, CONNACK latency from each intended start, refused and timed-out connects,
//! the broker's and the client's memory per connection) and `idle` (the same clients held for
//! `--duration` on keep-alive alone: the broker's memory and CPU per idle connection, the
//! connections it dropped).

use std::collections::BTreeMap;
use std::time::Duration;

use common::recorder::{Recorder, percentiles};
use common::results::Status;
use common::window::WindowOutcome;
use serde_json::json;

use super::{Baselines, Ctx, RoundError, RoundOutcome, Row};
use crate::engine::storm::{self, StormResult, StormSpec};
use crate::message::Delivery;
use crate::opts::Scenario;

pub async fn round(row: &Row, ctx: &mut Ctx<'_>, label: &str) -> Result<RoundOutcome, RoundError> {
    let opts = ctx.opts;
    let idle = row.scenario == Scenario::Idle;
    let window = ctx.window();
    let keep_alive = opts.keep_alive;
    // This worker's share of the clients and of their connect rate.
    let segment = ctx.segment();
    let spec = StormSpec {
        endpoint: ctx.link.endpoint.clone(),
        clients: segment.share(opts.clients),
        rate_per_s: segment.share_of_rate(opts.connect_rate),
        hold: if idle {
            opts.common.duration
        } else {
            Duration::ZERO
        },
        // Held idle, a client pings as a standard client does: once per keep-alive.
        ping_every: if idle { keep_alive } else { keep_alive / 2 },
        client_prefix: ctx.client_prefix(window),
        ceiling: opts.common.ceiling,
        probe: ctx.link.probe.clone(),
    };
    note_baselines(ctx.baselines, ctx.system, &spec);
    let clients = spec.clients;
    // A storm's clock is its connects: the barrier opens it before the first.
    if !ctx.gate.open().await {
        return Err(RoundError::from(ctx.gate.stopped_message()));
    }
    let r = storm::run(spec).await;
    let marks = judge(&r, label);
    let figures = figures(&r, ctx.baselines, ctx.system, idle, opts.common.duration);
    let detail = detail(&r, &figures);
    let (recorder, elapsed, count) = if idle {
        let mut recorder = Recorder::new(false);
        recorder.latency = r.ping_rtt.clone();
        // The figure of an idle round is the connections still held at its end.
        (recorder, Duration::from_secs(1), r.alive)
    } else {
        (r.connack.clone(), r.storm_elapsed, r.connected)
    };
    let mut recorder = recorder;
    recorder.counts.ok = count;
    let lanes = if idle {
        r.hold_lanes.clone()
    } else {
        r.lanes.clone()
    };
    let usage = if idle { r.hold_usage } else { r.storm_usage };
    Ok(RoundOutcome {
        outcome: WindowOutcome {
            recorder,
            workers: clients as usize,
            elapsed: elapsed.max(Duration::from_nanos(1)),
            stuck_workers: 0,
            client_cpu_ns: lanes.cpu_ns,
            client_busy: None,
            client_busy_least: None,
            busy_is_the_clients: false,
            target_rate: None,
        },
        marks,
        detail,
        delivery: Delivery::default(),
        messages: r.connected.max(1),
        usage,
        target_rate: None,
        accepted_rate: None,
        lanes,
        figures,
    })
}

/// The system's memory before its first storm, kept for every later one.
fn note_baselines(baselines: &mut Baselines, system: &str, spec: &StormSpec) {
    if let Some(rss) = spec.probe.as_ref().and_then(|p| p.rss_bytes()) {
        baselines.broker_rss.entry(system.to_owned()).or_insert(rss);
    }
    if baselines.client_rss.is_none() {
        baselines.client_rss = common::procstat::own_rss().map(|r| r.current_bytes);
    }
}

fn judge(r: &StormResult, label: &str) -> Vec<(Status, String)> {
    let mut marks = Vec::new();
    let of = r.attempted;
    let mut fail = |count: u64, what: &str, why: &Option<String>| {
        if count > 0 {
            let why = why
                .as_deref()
                .map_or(String::new(), |w| format!("; first: {w}"));
            marks.push((
                Status::Error,
                format!("{label}: {count} of {of} {what}{why}"),
            ));
        }
    };
    fail(r.refused, "connects refused", &r.refused_reason);
    fail(r.timed_out, "connects timed out", &r.first_error);
    fail(r.failed, "connects failed", &r.first_error);
    fail(
        r.dropped,
        "held connections were closed by the broker",
        &r.dropped_reason,
    );
    let silent = r
        .connected
        .saturating_sub(r.dropped)
        .saturating_sub(r.alive);
    fail(
        silent,
        "connections did not answer a PINGREQ before closing",
        &None,
    );
    marks
}

/// Per connection: memory over the system's first baseline and over this round's own start,
/// and the CPU of the storm or of the hold.
fn figures(
    r: &StormResult,
    baselines: &Baselines,
    system: &str,
    idle: bool,
    hold: Duration,
) -> BTreeMap<&'static str, f64> {
    let n = r.connected.max(1) as f64;
    let per = |now: Option<u64>, before: Option<u64>| Some(now?.saturating_sub(before?) as f64 / n);
    let mut f = BTreeMap::new();
    let mut put = |key, value: Option<f64>| {
        if let Some(v) = value {
            f.insert(key, v);
        }
    };
    put("connected", Some(r.connected as f64));
    put("refused", Some(r.refused as f64));
    put("timed_out", Some(r.timed_out as f64));
    put("failed", Some(r.failed as f64));
    put("dropped", Some(r.dropped as f64));
    put("alive", Some(r.alive as f64));
    put("connects_per_s", Some(r.connects_per_s()));
    put("missed_ticks", Some(r.missed_ticks as f64));
    let connack = percentiles(&r.connack.latency);
    put("connack_p50_ns", connack.map(|p| p.p50 as f64));
    put("connack_p99_ns", connack.map(|p| p.p99 as f64));
    put(
        "tcp_connect_p99_ns",
        percentiles(&r.tcp).map(|p| p.p99 as f64),
    );
    let tls = percentiles(&r.tls_handshake);
    put("tls_handshake_p50_ns", tls.map(|p| p.p50 as f64));
    put("tls_handshake_p99_ns", tls.map(|p| p.p99 as f64));
    put(
        "broker_rss_per_conn_bytes",
        per(
            r.broker_rss_connected,
            baselines.broker_rss.get(system).copied(),
        ),
    );
    put(
        "broker_rss_per_conn_this_round_bytes",
        per(r.broker_rss_connected, r.broker_rss_before),
    );
    put(
        "client_rss_per_conn_bytes",
        per(r.client_rss_connected, baselines.client_rss),
    );
    put(
        "client_rss_per_conn_this_round_bytes",
        per(r.client_rss_connected, r.client_rss_before),
    );
    put(
        "broker_rss_connected_bytes",
        r.broker_rss_connected.map(|b| b as f64),
    );
    put(
        "client_rss_connected_bytes",
        r.client_rss_connected.map(|b| b as f64),
    );
    if idle {
        let conn_s = n * hold.as_secs_f64();
        put(
            "broker_cpu_ns_per_conn_s",
            r.hold_usage.cpu_ns.map(|c| c as f64 / conn_s),
        );
        put(
            "client_cpu_ns_per_conn_s",
            Some(r.hold_lanes.cpu_ns as f64 / conn_s),
        );
        put("pings", Some(r.pings as f64));
    } else {
        put(
            "broker_cpu_ns_per_conn",
            r.storm_usage.cpu_ns.map(|c| c as f64 / n),
        );
        put("client_cpu_ns_per_conn", Some(r.lanes.cpu_ns as f64 / n));
    }
    f
}

fn detail(r: &StormResult, figures: &BTreeMap<&'static str, f64>) -> serde_json::Value {
    json!({
        "figure_per_s": r.connects_per_s(),
        "clients": r.attempted,
        "figures": figures,
        "per_source": r.per_source,
        "closed_by_broker": r.closed_by_broker,
        "connack_latency_ns": percentiles(&r.connack.latency),
        "connack_service_ns": r.connack.service.as_ref().and_then(percentiles),
        "tcp_connect_ns": percentiles(&r.tcp),
        "tls_handshake_ns": percentiles(&r.tls_handshake),
        "ping_rtt_ns": percentiles(&r.ping_rtt),
        "client_busy_share": r.lanes.busy_share,
    })
}
