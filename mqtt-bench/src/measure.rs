//! The measurement of one cell: a row × system slot with its common cell builder and the MQTT
//! figures it accumulates over the measured rounds (delivery ledger, missed ticks and lost
//! messages beside the latency, broker CPU and memory, each scenario's named figures), the
//! order the windows run in (rows of one family — the QoS levels of a scenario — interleaved
//! like systems), one round run and folded in, and what the report keeps beside the cells.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use common::human::format_rate;
use common::procstat::own_rss;
use common::progress::Progress;
use common::protocol::{CellBuilder, Round};
use common::results::{Cell, Status};
use common::scale::{BarrierError, Segment};
use hdrhistogram::Histogram;
use serde_json::json;

use crate::gate::Gate;
use crate::message::Delivery;
use crate::opts::Opts;
use crate::os::FdLimit;
use crate::protocol::conn::Endpoint;
use crate::systems::System;
use crate::workloads::{self, Baselines, Ctx, RoundOutcome, Row};

/// A cell's MQTT figures, accumulated over its measured rounds.
#[derive(Default)]
struct Tally {
    rounds: Vec<serde_json::Value>,
    delivery: Delivery,
    messages: u64,
    broker_cpu_ns: Option<u64>,
    broker_peak_rss: Option<u64>,
    client_peak_rss: Option<u64>,
    target_rate: Option<f64>,
    accepted: Vec<f64>,
    missed_ticks: u64,
    /// Delivery latency pooled over the measured rounds, for percentiles of all messages sent
    /// (a lost message counted as never delivered).
    latency: Option<Histogram<u64>>,
    figures: BTreeMap<&'static str, Vec<f64>>,
    /// The broker's own count of dropped messages over the measured rounds, and over the
    /// warm-ups, when it keeps one ([`crate::targets::DropCounter`]).
    broker_dropped: Option<u64>,
    broker_dropped_warmup: Option<u64>,
}

impl Tally {
    fn add(&mut self, round: &RoundOutcome) {
        self.rounds.push(round.detail.clone());
        self.delivery.add(&round.delivery);
        self.messages += round.messages;
        if let Some(cpu) = round.usage.cpu_ns {
            *self.broker_cpu_ns.get_or_insert(0) += cpu;
        }
        self.broker_peak_rss = self.broker_peak_rss.max(round.usage.peak_rss_bytes);
        self.client_peak_rss = self.client_peak_rss.max(round.usage.client_peak_rss_bytes);
        self.target_rate = round.target_rate;
        self.accepted.extend(round.accepted_rate);
        self.missed_ticks += round.outcome.recorder.missed_ticks;
        let latency = &round.outcome.recorder.latency;
        match &mut self.latency {
            Some(pooled) => {
                let _ = pooled.add(latency);
            }
            None => self.latency = Some(latency.clone()),
        }
        for (key, value) in &round.figures {
            self.figures.entry(key).or_default().push(*value);
        }
    }

    fn apply(&self, cell: &mut Cell) {
        let per_msg = |ns: u64| ns as f64 / self.messages.max(1) as f64;
        cell.extra.insert("delivery".into(), json!(self.delivery));
        cell.extra
            .insert("loss_fraction".into(), json!(self.delivery.loss_fraction()));
        cell.extra.insert("rounds".into(), json!(self.rounds));
        cell.extra.insert("messages".into(), json!(self.messages));
        cell.extra.insert(
            "broker_cpu_ns_per_msg".into(),
            json!(self.broker_cpu_ns.map(per_msg)),
        );
        cell.extra
            .insert("broker_peak_rss_bytes".into(), json!(self.broker_peak_rss));
        cell.extra
            .insert("client_peak_rss_bytes".into(), json!(self.client_peak_rss));
        cell.extra.insert(
            "latency_of_sent_ns".into(),
            latency_of_sent(self.latency.as_ref(), &self.delivery),
        );
        let figures: BTreeMap<&str, f64> = self
            .figures
            .iter()
            .filter_map(|(k, v)| Some((*k, common::results::median(v)?)))
            .collect();
        cell.extra.insert("figures".into(), json!(figures));
        if self.broker_dropped.is_some() || self.broker_dropped_warmup.is_some() {
            cell.extra
                .insert("broker_dropped".into(), json!(self.broker_dropped));
            cell.extra.insert(
                "broker_dropped_warmup".into(),
                json!(self.broker_dropped_warmup),
            );
        }
        if let Some(target) = self.target_rate {
            cell.target_rate = Some(target);
            // Open loop: ticks the publisher missed sit beside the latency they shaped.
            cell.missed_ticks = Some(self.missed_ticks);
            if !self.accepted.is_empty() {
                cell.achieved_rate =
                    Some(self.accepted.iter().sum::<f64>() / self.accepted.len() as f64);
            }
        }
    }
}

/// Percentiles of the delivery latency `h` over every message owed by `d`, a lost one counted
/// as never delivered: `None` (shown as "lost") where the lost share reaches past the
/// percentile.
pub fn latency_of_sent(h: Option<&Histogram<u64>>, d: &Delivery) -> serde_json::Value {
    let Some(h) = h.filter(|h| !h.is_empty()) else {
        return json!(null);
    };
    let owed = d.sent.max(d.distinct).max(1) as f64;
    let at = |q: f64| {
        let within = q * owed / d.distinct.max(1) as f64;
        (within <= 1.0).then(|| h.value_at_quantile(within))
    };
    json!({ "p50": at(0.50), "p99": at(0.99), "p999": at(0.999), "lost": d.lost })
}

/// One row × broker: the common cell builder and the MQTT figures beside it.
pub struct Slot {
    builder: CellBuilder,
    tally: Tally,
}

impl Slot {
    pub fn is_live(&self) -> bool {
        self.builder.is_live()
    }

    /// Keeps the worse of the cell's status and `status` (the first reason on a tie).
    pub fn mark(&mut self, status: Status, reason: impl Into<String>) {
        self.builder.mark(status, reason);
    }

    /// The cell as it stands.
    pub fn cell(&self) -> Cell {
        let mut cell = self.builder.to_cell();
        self.tally.apply(&mut cell);
        cell
    }
}

/// One slot per row and system (`[row][system]`), each cell carrying its system's labels; a
/// system that refused its protocol has refused cells, never measured.
pub fn slots(opts: &Opts, systems: &[System], rows: &[Row], segment: Segment) -> Vec<Vec<Slot>> {
    rows.iter()
        .map(|row| {
            systems
                .iter()
                .map(|system| {
                    let b = &system.broker;
                    let cell = Cell::new(
                        &row.name,
                        &b.info.name,
                        row.unit,
                        row.clients(opts, segment),
                        opts.common.rounds,
                    );
                    let mut builder = CellBuilder::new(cell, opts.common.ceiling);
                    builder.server(&b.server_process().shared_by(segment.count));
                    for label in &b.info.labels {
                        builder.add_label(label);
                    }
                    if let Some(refusal) = &system.refusal {
                        builder.mark(Status::Refused, refusal.clone());
                    }
                    Slot {
                        builder,
                        tally: Tally::default(),
                    }
                })
                .collect()
        })
        .collect()
}

/// Every window of a run in the order it is measured: the rows of one family (a scenario's
/// QoS levels) are interleaved with the systems, so `qos0, qos1, qos2` on every system make
/// one round, their order alternating from round to round like the systems'.
pub fn steps(rows: &[Row], systems: usize, warmup: u32, rounds: u32) -> Vec<(usize, Round, usize)> {
    let mut steps = Vec::new();
    let mut first = 0;
    while first < rows.len() {
        let family = rows[first].family();
        let len = rows[first..]
            .iter()
            .take_while(|r| r.family() == family)
            .count();
        for step in common::protocol::schedule(1, len * systems, warmup, rounds) {
            let (row, system) = (step.system / systems, step.system % systems);
            steps.push((first + row, step.round, system));
        }
        first += len;
    }
    steps
}

/// What every window of the run shares.
pub struct Windows<'a> {
    pub opts: &'a Opts,
    pub run_tag: &'a str,
    pub epoch: Instant,
    pub payload: Bytes,
    /// Numbers every window of the run, so topics and client ids never repeat.
    pub next_window: u32,
    pub baselines: Baselines,
    /// This worker at the start barrier.
    pub gate: Gate,
}

impl Windows<'_> {
    /// Runs round `round` of `row` on `broker` and folds it into `slot` (a warm-up only marks
    /// what went wrong in it), with a line on `progress`. The window opens at the start
    /// barrier; only a failure of the barrier is an error here (the run stops).
    pub async fn round(
        &mut self,
        row: &Row,
        system: &System,
        round: Round,
        slot: &mut Slot,
        progress: &Progress,
    ) -> Result<(), BarrierError> {
        self.gate.arm();
        let common = &self.opts.common;
        let label = round.label(common.warmup, common.rounds);
        let broker = &system.broker;
        let name = &broker.info.name;
        let mut ctx = Ctx {
            opts: self.opts,
            link: &broker.link,
            system: name,
            run_tag: self.run_tag,
            epoch: self.epoch,
            payload: self.payload.clone(),
            next_window: &mut self.next_window,
            baselines: &mut self.baselines,
            gate: &mut self.gate,
        };
        let counter = broker.dropped.as_ref();
        let before = match counter {
            Some(c) => c.read().await,
            None => None,
        };
        progress.window(format!("{} · {name} · {label}", row.name), common.duration);
        let ran = workloads::run_round(row, &mut ctx, &label).await;
        if let Some(e) = self.gate.close().await {
            return Err(e);
        }
        let after = match (counter, before) {
            (Some(c), Some(_)) => c.read().await,
            _ => None,
        };
        // The broker's counter covers every client of it, so only this window's share is its
        // own when nothing else uses the broker meanwhile.
        let dropped = before.zip(after).map(|(b, a)| a.saturating_sub(b));
        if let Some(n) = dropped {
            let sum = if round.is_warmup() {
                &mut slot.tally.broker_dropped_warmup
            } else {
                &mut slot.tally.broker_dropped
            };
            *sum.get_or_insert(0) += n;
        }
        match ran {
            Ok(mut outcome) => {
                if let (Some(n), Some(counter)) = (dropped, counter) {
                    if let Some(detail) = outcome.detail.as_object_mut() {
                        detail.insert("broker_dropped".into(), json!(n));
                    }
                    if n > 0 {
                        for (_, reason) in &mut outcome.marks {
                            if reason.contains("messages lost") {
                                reason.push_str(&format!(
                                    "; the broker counted {n} dropped ({})",
                                    counter.name()
                                ));
                            }
                        }
                    }
                }
                slot.builder.add(round, &outcome.outcome);
                slot.builder.add_server_cpu(round, outcome.usage.cpu_ns);
                for (status, reason) in &outcome.marks {
                    slot.builder.mark(*status, reason.clone());
                }
                if !round.is_warmup() {
                    slot.tally.add(&outcome);
                }
                progress.line(window_line(&row.name, name, &label, &outcome, dropped));
            }
            Err(e) => {
                slot.builder
                    .mark(e.status, format!("{label}: {}", e.message));
                progress.line(format!(
                    "{} · {name} · {label}: {}: {}",
                    row.name,
                    e.status.as_str(),
                    e.message
                ));
            }
        }
        Ok(())
    }
}

/// The payload every message carries: a seeded, printable filler (its first bytes are stamped).
pub fn payload(opts: &Opts) -> Vec<u8> {
    let mut rng = common::data::rng(opts.common.seed, 0x6d71_7474);
    common::data::ascii(&mut rng, opts.payload_bytes).into_bytes()
}

/// A short tag unique to this run (and to this worker of it), for its topics and client
/// identifiers: with several workers the run id and the worker's index, so no two workers'
/// clients share an identifier (a broker would close the older session) nor their topics.
pub fn run_tag(worker: Option<(&str, u32)>) -> String {
    if let Some((run_id, index)) = worker {
        let id: String = run_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        return format!("{id}-w{index}");
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{:05x}", std::process::id(), nanos & 0xf_ffff)
}

fn window_line(
    row: &str,
    broker: &str,
    label: &str,
    outcome: &RoundOutcome,
    broker_dropped: Option<u64>,
) -> String {
    let rate = outcome.outcome.throughput();
    let d = &outcome.delivery;
    let status = outcome
        .marks
        .first()
        .map_or(String::new(), |(s, r)| format!(" · {}: {r}", s.as_str()));
    let dropped = broker_dropped.map_or(String::new(), |n| format!(" · broker dropped {n}"));
    format!(
        "{row} · {broker} · {label}: {} /s · sent {} · lost {} · dup {}{dropped}{status}",
        format_rate(rate),
        d.sent,
        d.lost,
        d.duplicates
    )
}

/// Every capacity of the client, so a report says exactly what drove the brokers.
pub fn client_capacities(opts: &Opts, endpoint: &Endpoint, fd: &FdLimit) -> serde_json::Value {
    json!({
        "protocol": "rumqttc 0.25.1 mqttbytes (v4 = MQTT 3.1.1, v5) packets, mqtt-bench's own connection driver over tokio",
        "protocols": opts.protocols,
        "lanes": common::lanes::Lanes::shared().len(),
        "inflight": opts.inflight,
        "backlog_messages": opts.backlog,
        "read_coalesce_us": opts.read_coalesce.as_micros() as u64,
        "max_packet_bytes": endpoint.max_packet_bytes,
        "keep_alive_s": endpoint.keep_alive_s,
        "read_chunk_bytes": crate::protocol::conn::READ_CHUNK_BYTES,
        "idle_read_bytes": crate::protocol::conn::IDLE_READ_BYTES,
        "write_queue_bytes": 256 * 1024,
        "payload_bytes": opts.payload_bytes,
        "clean_session": true,
        "reconnects": false,
        "source_addrs": opts.source_addrs,
        "ephemeral_ports_per_source": crate::os::ephemeral_ports(),
        "fd_limit": fd,
    })
}

/// Each broker's resident memory once the run is over (an embedded broker's is this process's).
pub fn after_run(systems: &[System]) -> serde_json::Value {
    let mut after: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for system in systems {
        let broker = &system.broker;
        let link = &broker.link;
        let rss = link.probe.as_ref().and_then(|p| p.rss_bytes());
        let process_rss = link
            .in_process
            .then(|| own_rss().map(|r| r.current_bytes))
            .flatten();
        after.insert(
            broker.info.name.clone(),
            json!({
                "embedded": link.in_process,
                "rss_after_run_bytes": rss,
                "process_rss_after_run_bytes": process_rss,
            }),
        );
    }
    json!(after)
}
