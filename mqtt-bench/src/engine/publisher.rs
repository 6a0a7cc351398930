//! The publisher of one window: stamps and writes messages on schedule (closed or open loop),
//! keeps at most `inflight` QoS 1/2 messages unacknowledged, completes their flows
//! (PUBACK, or PUBREC → PUBREL → PUBCOMP) by packet id, and records how long it waited on the
//! broker (a full socket or a full in-flight window) apart from its own work.

use std::time::{Duration, Instant};

use common::pacing::{Pace, Schedule, Tick};
use hdrhistogram::Histogram;

use super::{Shared, WindowSpec};
use crate::message::stamp;
use crate::protocol::codec::{self, kind};
use crate::protocol::conn::{Conn, ConnError};

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

/// What the publisher did in one window.
#[derive(Debug, Clone)]
pub struct PublisherReport {
    /// Messages written (each stamped with its sequence number 0..sent).
    pub sent: u64,
    /// QoS 1 PUBACKs or QoS 2 PUBCOMPs received.
    pub acked: u64,
    /// From the window's start until the last message was written.
    pub send_elapsed: Duration,
    /// From the window's start until the last acknowledgement.
    pub ack_elapsed: Duration,
    /// Time spent waiting on the broker: the socket would not take more, or every in-flight
    /// slot was taken.
    pub waited_on_broker: Duration,
    /// Open loop: ticks that started more than one interval late, or never.
    pub missed_ticks: u64,
    /// Open loop: how late each message was written against its schedule.
    pub lag: Option<Histogram<u64>>,
    /// Publish → acknowledgement latency (QoS 1/2).
    pub ack_latency: Option<Histogram<u64>>,
    pub error: Option<String>,
}

impl PublisherReport {
    /// A report of nothing sent, with the error that stopped the publisher (if any).
    pub fn failed(error: Option<String>) -> PublisherReport {
        PublisherReport {
            sent: 0,
            acked: 0,
            send_elapsed: Duration::ZERO,
            ack_elapsed: Duration::ZERO,
            waited_on_broker: Duration::ZERO,
            missed_ticks: 0,
            lag: None,
            ack_latency: None,
            error,
        }
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
    payload: Vec<u8>,
    flight: Flight,
    report: PublisherReport,
    /// The last pass stopped at the backlog bound (waiting on the broker's deliveries).
    held_back: bool,
    /// No other connection shares the publisher's lane, so it may block that lane briefly.
    lane_alone: bool,
}

impl<'a> Publisher<'a> {
    pub fn new(conn: Conn, spec: &'a WindowSpec, shared: &'a Shared) -> Publisher<'a> {
        let inflight = spec.inflight.clamp(1, usize::from(u16::MAX));
        let open = spec.rate_per_s.is_some();
        let histogram = || Histogram::new(3).expect("3 significant figures is valid");
        Publisher {
            conn,
            spec,
            shared,
            payload: spec.payload.to_vec(),
            flight: Flight {
                free_ids: (1..=inflight as u16).rev().collect(),
                sent_ns: vec![0; inflight + 1],
            },
            report: PublisherReport {
                lag: open.then(histogram),
                ack_latency: (spec.pub_qos > 0).then(histogram),
                ..PublisherReport::failed(None)
            },
            held_back: false,
            lane_alone: spec.subscribers < common::lanes::Lanes::shared().len(),
        }
    }

    /// Runs the window from `start`; returns the connection (when still usable) and the report.
    pub async fn run(mut self, start: Instant) -> (Option<Conn>, PublisherReport) {
        tokio::time::sleep_until(start.into()).await;
        let result = self.publish(start).await;
        if let Err(e) = result {
            self.report.error = Some(e.to_string());
            return (None, self.report);
        }
        (Some(self.conn), self.report)
    }

    async fn publish(&mut self, start: Instant) -> Result<(), ConnError> {
        let spec = self.spec;
        let pace = Pace::for_worker(spec.rate_per_s, 1, 0);
        let mut schedule = Schedule::new(start, spec.duration, pace);
        let mut done_sending = false;
        loop {
            self.read_acks()?;
            if self.shared.aborted() {
                return Err(self.conn.closed(": the window was abandoned"));
            }
            let mut next_due = None;
            if !done_sending {
                match self.encode_due(&mut schedule) {
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
                self.shared.publisher_done(self.report.sent);
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
    fn encode_due(&mut self, schedule: &mut Schedule) -> Option<Tick> {
        let spec = self.spec;
        let room = match spec.backlog {
            Some(backlog) => {
                let slowest = self.shared.slowest_progress();
                backlog.saturating_sub(self.report.sent.saturating_sub(slowest))
            }
            None => u64::MAX,
        };
        self.held_back = room == 0;
        if room == 0 {
            return Some(Tick::WaitUntil(Instant::now() + BACKLOG_POLL));
        }
        let now = Instant::now();
        let now_ns = now.saturating_duration_since(spec.epoch).as_nanos() as u64;
        for _ in 0..(BATCH as u64).min(room) {
            if self.conn.unflushed() >= WRITE_QUEUE_BYTES {
                return None;
            }
            let packet_id = if spec.pub_qos > 0 {
                self.flight.free_ids.pop()?
            } else {
                0
            };
            let tick = schedule.tick(now);
            let Tick::Go { intended } = tick else {
                if packet_id != 0 {
                    self.flight.free_ids.push(packet_id);
                }
                return Some(tick);
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
            stamp(
                &mut self.payload,
                self.report.sent,
                stamp_ns,
                spec.window_id,
            );
            let wbuf = &mut self.conn.wbuf;
            codec::encode_publish_header(
                wbuf,
                spec.topic.as_bytes(),
                spec.pub_qos,
                packet_id,
                self.payload.len(),
            );
            wbuf.extend_from_slice(&self.payload);
            if packet_id != 0 {
                self.flight.sent_ns[usize::from(packet_id)] = now_ns.max(1);
            }
            self.report.sent += 1;
        }
        None
    }

    /// Takes every acknowledgement already received and answers PUBRECs with PUBRELs.
    fn read_acks(&mut self) -> Result<(), ConnError> {
        while self.conn.try_fill()? {}
        let mut now_ns = None;
        while let Some(frame) = self.conn.next_frame()? {
            let what = match frame.kind {
                kind::PUBACK => "PUBACK",
                kind::PUBREC => "PUBREC",
                kind::PUBCOMP => "PUBCOMP",
                kind::PINGRESP => continue,
                other => {
                    return Err(ConnError::Unexpected {
                        addr: self.conn.addr().to_owned(),
                        what: "(to a publisher)",
                        kind: other,
                    });
                }
            };
            let id = codec::packet_id(self.conn.body(&frame), what).map_err(|source| {
                ConnError::Codec {
                    addr: self.conn.addr().to_owned(),
                    source,
                }
            })?;
            let completes = match (self.spec.pub_qos, frame.kind) {
                (1, kind::PUBACK) | (2, kind::PUBCOMP) => true,
                (2, kind::PUBREC) => {
                    codec::encode_ack(&mut self.conn.wbuf, kind::PUBREL, id);
                    false
                }
                _ => {
                    return Err(ConnError::Unexpected {
                        addr: self.conn.addr().to_owned(),
                        what,
                        kind: frame.kind,
                    });
                }
            };
            if completes {
                let slot = self.flight.sent_ns.get_mut(usize::from(id));
                let Some(slot) = slot.filter(|s| **s != 0) else {
                    return Err(ConnError::Unexpected {
                        addr: self.conn.addr().to_owned(),
                        what: "acknowledgement of a packet id not in flight",
                        kind: frame.kind,
                    });
                };
                let now =
                    *now_ns.get_or_insert_with(|| self.spec.epoch.elapsed().as_nanos() as u64);
                if let Some(h) = &mut self.report.ack_latency {
                    let _ = h.record(now.saturating_sub(*slot));
                }
                *slot = 0;
                self.flight.free_ids.push(id);
                self.report.acked += 1;
            }
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
                ready = self.conn.ready(false) => { ready?; }
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
            let bounded =
                tokio::time::timeout(Duration::from_millis(50), self.conn.ready(!written));
            if let Ok(ready) = bounded.await {
                ready?;
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
                    ready = self.conn.ready(false) => { ready?; }
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
