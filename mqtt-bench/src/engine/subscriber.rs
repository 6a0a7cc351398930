//! One subscriber of a window: reads deliveries in large chunks, checks each message's stamp
//! into the ledger of its publisher, records delivery latency, answers QoS 1 (PUBACK) and
//! QoS 2 (PUBREC, then PUBCOMP on PUBREL) flows, leaves and resumes its session when the
//! window asks it to, and stops once everything sent has arrived or nothing more comes.

use std::time::{Duration, Instant};

use common::recorder::Recorder;

use super::{Owed, Shared, WindowSpec};
use crate::message::{Ledger, Stamp, read_stamp};
use crate::protocol::codec::{self, Ack, Incoming};
use crate::protocol::conn::{Conn, ConnError, ConnectOptions};

/// How many reads a subscriber takes in a row before letting its lane's other tasks run.
const READS_BEFORE_YIELD: u32 = 16;
/// How often an idle subscriber looks at the window's state.
const IDLE_CHECK: Duration = Duration::from_millis(20);

/// How a subscriber's session was resumed after it was away.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Resumed {
    /// The broker said it kept the session (CONNACK session present).
    pub session_present: bool,
    /// Distinct messages that arrived before it left.
    pub before: u64,
    /// Seconds from the reconnect's CONNACK until every message sent while away had come.
    pub caught_up_s: Option<f64>,
    /// Messages the publishers had written by the time it was back.
    pub written_when_back: u64,
}

/// What one subscriber received.
#[derive(Debug, Clone)]
pub struct SubscriberReport {
    /// One ledger per publisher of the window.
    pub ledgers: Vec<Ledger>,
    /// Delivery latency: receipt minus the stamp (the intended send time in open loop).
    pub recorder: Recorder,
    /// From the window's start until the last new message arrived.
    pub last_delivery: Duration,
    pub error: Option<String>,
    pub resumed: Option<Resumed>,
}

impl SubscriberReport {
    pub fn failed(error: String, publishers: usize) -> SubscriberReport {
        SubscriberReport {
            ledgers: vec![Ledger::default(); publishers],
            recorder: Recorder::new(false),
            last_delivery: Duration::ZERO,
            error: Some(error),
            resumed: None,
        }
    }
}

pub struct Subscriber<'a> {
    conn: Conn,
    spec: &'a WindowSpec,
    shared: &'a Shared,
    index: usize,
    /// The source-address slot it connected with, for a reconnect.
    slot: usize,
    report: SubscriberReport,
    distinct: u64,
    /// QoS 2 packet ids received and not yet released (one bit each): a resent PUBLISH with
    /// such an id is the same message, not a new delivery. Part of the session: kept across
    /// a reconnect.
    awaiting_release: Vec<u64>,
}

impl<'a> Subscriber<'a> {
    pub fn new(
        conn: Conn,
        spec: &'a WindowSpec,
        shared: &'a Shared,
        index: usize,
        expected: u64,
        slot: usize,
    ) -> Self {
        Subscriber {
            conn,
            spec,
            shared,
            index,
            slot,
            report: SubscriberReport {
                ledgers: (0..spec.publishers())
                    .map(|_| Ledger::with_capacity(expected))
                    .collect(),
                recorder: Recorder::new(false),
                last_delivery: Duration::ZERO,
                error: None,
                resumed: None,
            },
            distinct: 0,
            awaiting_release: vec![0; 65_536 / 64],
        }
    }

    pub async fn run(mut self, start: Instant) -> (Option<Conn>, SubscriberReport) {
        let leave_at = self.spec.away.map(|a| start + a.after);
        match self.receive(leave_at).await {
            Ok(()) => (Some(self.conn), self.report),
            Err(e) => {
                self.report.error = Some(e.to_string());
                (None, self.report)
            }
        }
    }

    async fn receive(&mut self, mut leave_at: Option<Instant>) -> Result<(), ConnError> {
        let mut last_arrival = Instant::now();
        let mut reads = 0;
        // Bytes the idle wait below read: they are in the buffer, to be decoded now.
        let mut waited_read = false;
        loop {
            if leave_at.is_some_and(|at| Instant::now() >= at) {
                leave_at = None;
                self.leave_and_resume().await?;
                last_arrival = Instant::now();
            }
            if std::mem::take(&mut waited_read) || self.conn.try_fill()? {
                let now = Instant::now();
                if self.take_packets(now)? {
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
            if leave_at.is_none() && self.finished(last_arrival) {
                return Ok(());
            }
            self.conn.keep_alive_due(Instant::now());
            self.conn.flush().await?;
            if let Ok(io) = tokio::time::timeout(IDLE_CHECK, self.conn.io(false)).await {
                waited_read = io?.0;
            }
        }
    }

    /// Persistent sessions: disconnects (the session stays on the broker), stays away, then
    /// connects again with the same client identifier and no clean start, and carries on.
    async fn leave_and_resume(&mut self) -> Result<(), ConnError> {
        let away = self.spec.away.map_or(Duration::ZERO, |a| a.away);
        self.conn.flush().await?;
        self.conn.leave().await;
        let before = self.distinct;
        tokio::time::sleep(away).await;
        let id = self.spec.subscriber_id(self.index);
        let options = ConnectOptions {
            session: self.spec.session,
            ..ConnectOptions::clean(&id, self.slot)
        };
        let (conn, handshake) = Conn::connect(&self.spec.endpoint, &options).await?;
        self.conn = conn;
        self.report.resumed = Some(Resumed {
            session_present: handshake.connack.session_present,
            before,
            caught_up_s: None,
            written_when_back: self.shared.written_so_far(),
        });
        Ok(())
    }

    /// Done when everything sent has arrived, or the publishers are done and nothing new came
    /// for the quiet period, or the window was abandoned.
    fn finished(&self, last_arrival: Instant) -> bool {
        if self.shared.aborted() {
            return true;
        }
        let Some(sent) = self.shared.sent() else {
            return false;
        };
        let total: u64 = sent.iter().sum();
        let complete = match self.shared.owed() {
            Owed::Each => self
                .report
                .ledgers
                .iter()
                .zip(&sent)
                .all(|(l, s)| l.complete(*s)),
            Owed::Group => self.shared.group_complete(total),
        };
        if complete {
            return true;
        }
        let quiet = Instant::now().saturating_duration_since(last_arrival);
        let since_done = self.shared.since_publishers_done();
        quiet >= self.spec.drain_quiet && since_done >= self.spec.drain_quiet
    }

    /// Takes every whole packet read so far; returns true when a new message was among them.
    fn take_packets(&mut self, now: Instant) -> Result<bool, ConnError> {
        let now_ns = now.saturating_duration_since(self.spec.epoch).as_nanos() as u64;
        let protocol = self.conn.protocol();
        let mut fresh = false;
        while let Some(packet) = self.conn.next_packet()? {
            match packet {
                Incoming::Publish(p) => {
                    let repeat = p.qos == 2 && self.awaiting(p.pkid);
                    if !repeat {
                        fresh |= self.count(read_stamp(&p.payload), now_ns);
                    }
                    match p.qos {
                        1 => codec::encode_ack(&mut self.conn.wbuf, protocol, Ack::PubAck, p.pkid),
                        2 => {
                            self.set_awaiting(p.pkid, true);
                            codec::encode_ack(&mut self.conn.wbuf, protocol, Ack::PubRec, p.pkid);
                        }
                        _ => {}
                    }
                }
                Incoming::PubRel { pkid } => {
                    self.set_awaiting(pkid, false);
                    codec::encode_ack(&mut self.conn.wbuf, protocol, Ack::PubComp, pkid);
                }
                Incoming::PingResp | Incoming::SubAck { .. } | Incoming::UnsubAck { .. } => {}
                Incoming::Disconnect { code } => return Err(self.conn.disconnected(code)),
                other => {
                    return Err(self
                        .conn
                        .unexpected(&format!("{} packet (to a subscriber)", other.name())));
                }
            }
        }
        if fresh {
            self.report.last_delivery = self.shared.since_start();
            self.shared.report_progress(self.index, self.distinct);
            self.note_caught_up();
        }
        Ok(fresh)
    }

    /// Persistent sessions: the moment everything written while away has arrived.
    fn note_caught_up(&mut self) {
        let distinct = self.distinct;
        if let Some(resumed) = &mut self.report.resumed
            && resumed.caught_up_s.is_none()
            && distinct >= resumed.written_when_back
        {
            resumed.caught_up_s = Some(self.shared.since_start().as_secs_f64());
        }
    }

    /// Enters one delivery in its publisher's ledger; returns true when it was a new message.
    #[inline]
    fn count(&mut self, stamp: Option<Stamp>, now_ns: u64) -> bool {
        match stamp {
            Some(s) if s.window == self.spec.window_id => {
                let Some(ledger) = self.report.ledgers.get_mut(s.publisher as usize) else {
                    self.report.ledgers[0].stray();
                    return false;
                };
                if ledger.record(s.seq) {
                    let latency = Duration::from_nanos(now_ns.saturating_sub(s.sent_ns));
                    self.report.recorder.record_ok(latency, latency);
                    self.distinct += 1;
                    return true;
                }
                false
            }
            _ => {
                if let Some(ledger) = self.report.ledgers.first_mut() {
                    ledger.stray();
                }
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
