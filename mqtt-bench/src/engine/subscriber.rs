//! One subscriber of a window: reads deliveries in large chunks, checks each message's stamp
//! into its ledger, records delivery latency, answers QoS 1 (PUBACK) and QoS 2 (PUBREC, then
//! PUBCOMP on PUBREL) flows, and stops once everything sent has arrived or nothing more comes.

use std::time::{Duration, Instant};

use common::recorder::Recorder;

use super::{Shared, WindowSpec};
use crate::message::{Ledger, read_stamp};
use crate::protocol::codec::{self, kind};
use crate::protocol::conn::{Conn, ConnError};

/// How many reads a subscriber takes in a row before letting its lane's other tasks run.
const READS_BEFORE_YIELD: u32 = 16;
/// How often an idle subscriber looks at the window's state.
const IDLE_CHECK: Duration = Duration::from_millis(20);

/// What one subscriber received.
#[derive(Debug, Clone)]
pub struct SubscriberReport {
    pub ledger: Ledger,
    /// Delivery latency: receipt minus the stamp (the intended send time in open loop).
    pub recorder: Recorder,
    /// From the window's start until the last new message arrived.
    pub last_delivery: Duration,
    pub error: Option<String>,
}

pub struct Subscriber<'a> {
    conn: Conn,
    spec: &'a WindowSpec,
    shared: &'a Shared,
    index: usize,
    report: SubscriberReport,
    /// QoS 2 packet ids received and not yet released (one bit each): a resent PUBLISH with
    /// such an id is the same message, not a new delivery.
    awaiting_release: Vec<u64>,
}

impl<'a> Subscriber<'a> {
    pub fn new(
        conn: Conn,
        spec: &'a WindowSpec,
        shared: &'a Shared,
        index: usize,
        expected: u64,
    ) -> Self {
        Subscriber {
            conn,
            spec,
            shared,
            index,
            report: SubscriberReport {
                ledger: Ledger::with_capacity(expected),
                recorder: Recorder::new(false),
                last_delivery: Duration::ZERO,
                error: None,
            },
            awaiting_release: vec![0; 65_536 / 64],
        }
    }

    pub async fn run(mut self) -> (Option<Conn>, SubscriberReport) {
        match self.receive().await {
            Ok(()) => (Some(self.conn), self.report),
            Err(e) => {
                self.report.error = Some(e.to_string());
                (None, self.report)
            }
        }
    }

    async fn receive(&mut self) -> Result<(), ConnError> {
        let mut last_arrival = Instant::now();
        let mut reads = 0;
        loop {
            if self.conn.try_fill()? {
                let now = Instant::now();
                if self.take_frames(now)? {
                    last_arrival = now;
                }
                self.conn.keep_alive_due(now);
                self.conn.flush().await?;
                reads += 1;
                if reads >= READS_BEFORE_YIELD {
                    reads = 0;
                    tokio::task::yield_now().await;
                }
                continue;
            }
            if self.finished(last_arrival) {
                return Ok(());
            }
            self.conn.keep_alive_due(Instant::now());
            self.conn.flush().await?;
            if let Ok(ready) = tokio::time::timeout(IDLE_CHECK, self.conn.ready(false)).await {
                ready?;
            }
        }
    }

    /// Done when everything sent has arrived, or the publisher is done and nothing new came
    /// for the quiet period, or the window was abandoned.
    fn finished(&self, last_arrival: Instant) -> bool {
        if self.shared.aborted() {
            return true;
        }
        let Some(sent) = self.shared.sent() else {
            return false;
        };
        if self.report.ledger.complete(sent) {
            return true;
        }
        let quiet = Instant::now().saturating_duration_since(last_arrival);
        let since_done = self.shared.since_publisher_done();
        quiet >= self.spec.drain_quiet && since_done >= self.spec.drain_quiet
    }

    /// Takes every whole packet read so far; returns true when a new message was among them.
    fn take_frames(&mut self, now: Instant) -> Result<bool, ConnError> {
        let now_ns = now.saturating_duration_since(self.spec.epoch).as_nanos() as u64;
        let mut fresh = false;
        while let Some(frame) = self.conn.next_frame()? {
            match frame.kind {
                kind::PUBLISH => {
                    let qos = frame.qos();
                    let publish =
                        codec::decode_publish(self.conn.body(&frame), qos).map_err(|source| {
                            ConnError::Codec {
                                addr: self.conn.addr().to_owned(),
                                source,
                            }
                        })?;
                    let id = publish.packet_id;
                    let stamp = read_stamp(publish.payload);
                    let repeat = qos == 2 && self.awaiting(id);
                    if !repeat {
                        fresh |= self.count(stamp, now_ns);
                    }
                    match qos {
                        1 => codec::encode_ack(&mut self.conn.wbuf, kind::PUBACK, id),
                        2 => {
                            self.set_awaiting(id, true);
                            codec::encode_ack(&mut self.conn.wbuf, kind::PUBREC, id);
                        }
                        _ => {}
                    }
                }
                kind::PUBREL => {
                    let id =
                        codec::packet_id(self.conn.body(&frame), "PUBREL").map_err(|source| {
                            ConnError::Codec {
                                addr: self.conn.addr().to_owned(),
                                source,
                            }
                        })?;
                    self.set_awaiting(id, false);
                    codec::encode_ack(&mut self.conn.wbuf, kind::PUBCOMP, id);
                }
                kind::PINGRESP | kind::SUBACK | kind::UNSUBACK => {}
                other => {
                    return Err(ConnError::Unexpected {
                        addr: self.conn.addr().to_owned(),
                        what: "(to a subscriber)",
                        kind: other,
                    });
                }
            }
        }
        if fresh {
            self.report.last_delivery = self.shared.since_start();
            self.shared
                .report_progress(self.index, self.report.ledger.distinct);
        }
        Ok(fresh)
    }

    /// Enters one delivery in the ledger; returns true when it was a new message.
    #[inline]
    fn count(&mut self, stamp: Option<(u64, u64, u32)>, now_ns: u64) -> bool {
        match stamp {
            Some((seq, sent_ns, window)) if window == self.spec.window_id => {
                if self.report.ledger.record(seq) {
                    let latency = Duration::from_nanos(now_ns.saturating_sub(sent_ns));
                    self.report.recorder.record_ok(latency, latency);
                    return true;
                }
                false
            }
            _ => {
                self.report.ledger.stray();
                false
            }
        }
    }

    fn awaiting(&self, id: u16) -> bool {
        self.awaiting_release[usize::from(id) / 64] & (1 << (id % 64)) != 0
    }

    fn set_awaiting(&mut self, id: u16, on: bool) {
        let word = &mut self.awaiting_release[usize::from(id) / 64];
        if on {
            *word |= 1 << (id % 64);
        } else {
            *word &= !(1 << (id % 64));
        }
    }
}
