//! One publisher of a window: stamps and writes messages on schedule (closed or open loop),
//! keeps at most `inflight` QoS 1/2 messages unacknowledged (the broker's receive maximum when
//! it announces a smaller one), completes their flows (PUBACK, or PUBREC → PUBREL → PUBCOMP)
//! by the packet ids it assigned, counts what the broker refused with a reason code, and
//! records how long it waited on the broker (a full socket or a full in-flight window) apart
//! from its own work.

use std::time::{Duration, Instant};

use common::pacing::{Pace, Schedule, Tick};
use hdrhistogram::Histogram;

use super::{Shared, WindowSpec};
use crate::message::{Stamp, stamp};
use crate::protocol::codec::{self, Ack, ConnAckInfo, Incoming, PublishTemplate};
use crate::protocol::conn::{Conn, ConnError};
use crate::protocol::reason;

/// Messages encoded per pass before the publisher writes, reads acks and yields.
const BATCH: usize = 256;
/// Bytes queued for the socket before the publisher stops encoding and waits for it.
const WRITE_QUEUE_BYTES: usize = 256 * 1024;
/// Below this wait, a precise publisher yields instead of sleeping: the runtime's timer only
/// resolves milliseconds, and a millisecond late would be measured as latency.
const SPIN_BELOW: Duration = Duration::from_millis(2);
/// A precise publisher's blocking sleep stops this far before its tick (the kernel may wake
/// it up to 50 µs late) and yields for the rest.
const SPIN_MARGIN: Duration = Duration::from_micros(60);
/// How often a publisher held back by its backlog bound looks at the subscribers' progress.
const BACKLOG_POLL: Duration = Duration::from_millis(1);
/// The topic alias publishers use when the broker allows one.
const TOPIC_ALIAS: u16 = 1;

/// What the publishers did in one window (one, or several merged).
#[derive(Debug, Clone)]
pub struct PublisherReport {
    /// Messages written (each stamped with its sequence number 0..sent of its publisher).
    pub sent: u64,
    /// QoS 1 PUBACKs or QoS 2 PUBCOMPs received with a success code.
    pub acked: u64,
    /// PUBACKs or PUBRECs with a reason code of 0x80 or more: the broker refused the message.
    pub refused: u64,
    /// The first refusal's reason.
    pub refused_reason: Option<String>,
    /// From the window's start until the last message was written.
    pub send_elapsed: Duration,
    /// From the window's start until the last acknowledgement.
    pub ack_elapsed: Duration,
    /// Time spent waiting on the broker: the socket would not take more, or every in-flight
    /// slot was taken (the longest of the publishers).
    pub waited_on_broker: Duration,
    /// Open loop: ticks that started more than one interval late, or never.
    pub missed_ticks: u64,
    /// Open loop: how late each message was written against its schedule.
    pub lag: Option<Histogram<u64>>,
    /// Publish → acknowledgement latency (QoS 1/2).
    pub ack_latency: Option<Histogram<u64>>,
    pub error: Option<String>,
    /// Whether messages after the first went under a topic alias (MQTT 5).
    pub topic_alias: bool,
    /// The in-flight window kept.
    pub inflight: usize,
}

impl PublisherReport {
    /// A report of nothing sent, with the error that stopped the publisher (if any).
    pub fn failed(error: Option<String>) -> PublisherReport {
        PublisherReport {
            sent: 0,
            acked: 0,
            refused: 0,
            refused_reason: None,
            send_elapsed: Duration::ZERO,
            ack_elapsed: Duration::ZERO,
            waited_on_broker: Duration::ZERO,
            missed_ticks: 0,
            lag: None,
            ack_latency: None,
            error,
            topic_alias: false,
            inflight: 0,
        }
    }

    /// Several publishers as one: counts summed, times the longest, histograms pooled.
    pub fn merge(reports: Vec<PublisherReport>) -> PublisherReport {
        let mut merged = PublisherReport::failed(None);
        for r in reports {
            merged.sent += r.sent;
            merged.acked += r.acked;
            merged.refused += r.refused;
            if merged.refused_reason.is_none() {
                merged.refused_reason = r.refused_reason;
            }
            merged.send_elapsed = merged.send_elapsed.max(r.send_elapsed);
            merged.ack_elapsed = merged.ack_elapsed.max(r.ack_elapsed);
            merged.waited_on_broker = merged.waited_on_broker.max(r.waited_on_broker);
            merged.missed_ticks += r.missed_ticks;
            pool(&mut merged.lag, r.lag);
            pool(&mut merged.ack_latency, r.ack_latency);
            if merged.error.is_none() {
                merged.error = r.error;
            }
            merged.topic_alias |= r.topic_alias;
            merged.inflight = merged.inflight.max(r.inflight);
        }
        merged
    }
}

fn pool(into: &mut Option<Histogram<u64>>, from: Option<Histogram<u64>>) {
    match (into.as_mut(), from) {
        (Some(into), Some(from)) => {
            let _ = into.add(&from);
        }
        (None, Some(from)) => *into = Some(from),
        _ => {}
    }
}

struct Flight {
    /// Packet ids free to use (1..=inflight); a used id returns when its flow completes.
    free_ids: Vec<u16>,
    /// Per packet id: when its PUBLISH was stamped (ns from the epoch), or 0 when free.
    sent_ns: Vec<u64>,
}

pub struct Publisher<'a> {
    conn: Conn,
    spec: &'a WindowSpec,
    shared: &'a Shared,
    index: usize,
    template: PublishTemplate,
    flight: Flight,
    report: PublisherReport,
    /// The last pass stopped at the backlog bound (waiting on the broker's deliveries).
    held_back: bool,
    /// No other connection shares the publisher's lane, so it may block that lane briefly.
    lane_alone: bool,
}

impl<'a> Publisher<'a> {
    pub fn new(
        conn: Conn,
        connack: &ConnAckInfo,
        spec: &'a WindowSpec,
        shared: &'a Shared,
        index: usize,
    ) -> Publisher<'a> {
        // MQTT 5: never more in flight than the broker's receive maximum.
        let receive_max = connack.receive_max.map_or(usize::MAX, usize::from);
        let inflight = spec
            .inflight
            .min(receive_max)
            .clamp(1, usize::from(u16::MAX));
        let open = spec.rate_per_s.is_some();
        let histogram = || Histogram::new(3).expect("3 significant figures is valid");
        let alias = (spec.topic_alias && connack.topic_alias_max.unwrap_or(0) >= TOPIC_ALIAS)
            .then_some(TOPIC_ALIAS);
        let template = PublishTemplate::new(
            conn.protocol(),
            &spec.pub_topics[index],
            spec.pub_qos,
            false,
            spec.payload.clone(),
            alias,
        );
        let lanes = common::lanes::Lanes::shared().len();
        Publisher {
            conn,
            spec,
            shared,
            index,
            flight: Flight {
                free_ids: (1..=inflight as u16).rev().collect(),
                sent_ns: vec![0; inflight + 1],
            },
            report: PublisherReport {
                lag: open.then(histogram),
                ack_latency: (spec.pub_qos > 0).then(histogram),
                topic_alias: template.uses_alias(),
                inflight,
                ..PublisherReport::failed(None)
            },
            template,
            held_back: false,
            lane_alone: spec.publishers() + spec.subscribers() <= lanes,
        }
    }

    /// Runs the window from `start`; returns the connection (when still usable) and the report.
    pub async fn run(mut self, start: Instant) -> (Option<Conn>, PublisherReport) {
        tokio::time::sleep_until(start.into()).await;
        let result = self.publish(start).await;
        if let Err(e) = result {
            self.report.error = Some(e.to_string());
            self.shared.publisher_done(self.index, self.report.sent);
            return (None, self.report);
        }
        (Some(self.conn), self.report)
    }

    async fn publish(&mut self, start: Instant) -> Result<(), ConnError> {
        let spec = self.spec;
        let pace = Pace::for_worker(spec.rate_per_s, spec.publishers(), self.index);
        let mut schedule = Schedule::new(start, spec.duration, pace);
        let mut done_sending = false;
        loop {
            self.read_acks()?;
            if self.shared.aborted() {
                return Err(self.conn.closed(": the window was abandoned"));
            }
            let mut next_due = None;
            if !done_sending {
                let before = self.report.sent;
                let tick = self.encode_due(&mut schedule)?;
                self.shared.add_written(self.report.sent - before);
                match tick {
                    Some(Tick::Stop) => {
                        done_sending = true;
                        self.report.missed_ticks += schedule.unissued();
                    }
                    Some(Tick::WaitUntil(due)) => next_due = Some(due),
                    _ => {}
                }
            }
            let written = self.conn.try_flush()?;
            if written && done_sending && self.report.send_elapsed.is_zero() {
                self.report.send_elapsed = start.elapsed();
                self.shared.publisher_done(self.index, self.report.sent);
            }
            let in_flight = self.in_flight();
            if written && done_sending && in_flight == 0 {
                return Ok(());
            }
            self.wait(written, in_flight, next_due, done_sending)
                .await?;
        }
    }

    fn in_flight(&self) -> usize {
        self.flight.sent_ns.len() - 1 - self.flight.free_ids.len()
    }

    /// Encodes every message due now (up to a batch); returns the tick that stopped it.
    fn encode_due(&mut self, schedule: &mut Schedule) -> Result<Option<Tick>, ConnError> {
        let spec = self.spec;
        // The publishers share what is left of the bound, each taking its part, so that
        // together they pass it by at most one message each.
        let room = match spec.backlog {
            Some(backlog) => backlog
                .saturating_sub(self.shared.behind())
                .div_ceil(spec.publishers().max(1) as u64),
            None => u64::MAX,
        };
        self.held_back = room == 0;
        if room == 0 {
            return Ok(Some(Tick::WaitUntil(Instant::now() + BACKLOG_POLL)));
        }
        let now = Instant::now();
        let now_ns = now.saturating_duration_since(spec.epoch).as_nanos() as u64;
        for _ in 0..(BATCH as u64).min(room) {
            if self.conn.unflushed() >= WRITE_QUEUE_BYTES {
                return Ok(None);
            }
            let packet_id = if spec.pub_qos > 0 {
                match self.flight.free_ids.pop() {
                    Some(id) => id,
                    None => return Ok(None),
                }
            } else {
                0
            };
            let tick = schedule.tick(now);
            let Tick::Go { intended } = tick else {
                if packet_id != 0 {
                    self.flight.free_ids.push(packet_id);
                }
                return Ok(Some(tick));
            };
            // Open loop stamps the intended time, so latency includes any lateness of ours.
            let stamp_ns = if let Some(lag) = &mut self.report.lag {
                let late = now.saturating_duration_since(intended);
                let _ = lag.record(late.as_nanos() as u64);
                if schedule.missed(intended, now) {
                    self.report.missed_ticks += 1;
                }
                intended.saturating_duration_since(spec.epoch).as_nanos() as u64
            } else {
                now_ns
            };
            let payload = match self.template.encode(&mut self.conn.wbuf, packet_id) {
                Ok(payload) => payload,
                Err(source) => return Err(self.conn.codec_error(source)),
            };
            stamp(
                payload,
                Stamp {
                    seq: self.report.sent,
                    sent_ns: stamp_ns,
                    window: spec.window_id,
                    publisher: self.index as u32,
                },
            );
            if packet_id != 0 {
                self.flight.sent_ns[usize::from(packet_id)] = now_ns.max(1);
            }
            self.report.sent += 1;
        }
        Ok(None)
    }

    /// Takes every acknowledgement already received and answers PUBRECs with PUBRELs.
    fn read_acks(&mut self) -> Result<(), ConnError> {
        while self.conn.try_fill()? {}
        let mut now_ns = None;
        let protocol = self.conn.protocol();
        while let Some(packet) = self.conn.next_packet()? {
            let (ack, id, code) = match packet {
                Incoming::Ack { ack, pkid, code } => (ack, pkid, code),
                Incoming::PingResp => continue,
                Incoming::Disconnect { code } => return Err(self.conn.disconnected(code)),
                other => {
                    return Err(self
                        .conn
                        .unexpected(&format!("{} packet (to a publisher)", other.name())));
                }
            };
            let refused = code >= 0x80;
            let completes = match (self.spec.pub_qos, ack) {
                (1, Ack::PubAck) | (2, Ack::PubComp) => true,
                // A refused PUBREC ends the flow: no PUBREL follows it.
                (2, Ack::PubRec) if refused => true,
                (2, Ack::PubRec) => {
                    codec::encode_ack(&mut self.conn.wbuf, protocol, Ack::PubRel, id);
                    false
                }
                _ => {
                    return Err(self
                        .conn
                        .unexpected(&format!("{ack:?} at QoS {}", self.spec.pub_qos)));
                }
            };
            if !completes {
                continue;
            }
            let slot = self.flight.sent_ns.get_mut(usize::from(id));
            let Some(slot) = slot.filter(|s| **s != 0) else {
                return Err(self.conn.unexpected(&format!(
                    "acknowledgement of packet id {id}, which is not in flight"
                )));
            };
            let now = *now_ns.get_or_insert_with(|| self.spec.epoch.elapsed().as_nanos() as u64);
            if refused {
                self.report.refused += 1;
                self.report
                    .refused_reason
                    .get_or_insert_with(|| reason::describe(code));
            } else {
                if let Some(h) = &mut self.report.ack_latency {
                    let _ = h.record(now.saturating_sub(*slot));
                }
                self.report.acked += 1;
            }
            *slot = 0;
            self.flight.free_ids.push(id);
        }
        if now_ns.is_some() {
            self.report.ack_elapsed = self.shared.since_start();
        }
        Ok(())
    }

    /// Open loop, precisely: the runtime's timer (1 ms grain) to within 2 ms of the tick, a
    /// blocking sleep to within 60 µs when the lane is the publisher's alone, then yields, so a
    /// message leaves close to its intended time without burning a core between ticks.
    async fn wait_precisely(&mut self, due: Instant) -> Result<(), ConnError> {
        let left = due.saturating_duration_since(Instant::now());
        if left > SPIN_BELOW {
            let wake = tokio::time::sleep_until((due - SPIN_BELOW).into());
            tokio::select! {
                () = wake => {}
                io = self.conn.io(false) => { io?; }
            }
        } else if left > SPIN_MARGIN && self.lane_alone {
            std::thread::sleep(left - SPIN_MARGIN);
        } else {
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// Waits for whatever holds the publisher back: the socket, acknowledgements, or the
    /// schedule. Time spent waiting on the broker is recorded.
    async fn wait(
        &mut self,
        written: bool,
        in_flight: usize,
        next_due: Option<Instant>,
        done_sending: bool,
    ) -> Result<(), ConnError> {
        let window_full = self.spec.pub_qos > 0 && self.flight.free_ids.is_empty();
        if !written || window_full || (done_sending && in_flight > 0) {
            let began = Instant::now();
            let bounded = tokio::time::timeout(Duration::from_millis(50), self.conn.io(!written));
            if let Ok(io) = bounded.await {
                io?;
            }
            if !done_sending {
                self.report.waited_on_broker += began.elapsed();
            }
            return Ok(());
        }
        match next_due {
            Some(due) if self.spec.precise_pacing => self.wait_precisely(due).await?,
            Some(due) => {
                let began = Instant::now();
                let sleep = tokio::time::sleep_until(due.into());
                tokio::select! {
                    () = sleep => {}
                    io = self.conn.io(false) => { io?; }
                }
                if self.held_back {
                    self.report.waited_on_broker += began.elapsed();
                }
            }
            // Closed loop, or a batch just went out: let the lane's other connections run.
            None => tokio::task::yield_now().await,
        }
        Ok(())
    }
}
