//! What the tasks of one window share: set rarely (once per publisher, once per read of a
//! subscriber), read by publishers holding back to their backlog bound and by subscribers when
//! idle. Nothing here is touched per message.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Owed;

#[derive(Debug)]
pub struct Shared {
    start: Instant,
    owed: Owed,
    /// Per publisher: its final count once it has written everything; `u64::MAX` before.
    sent: Vec<AtomicU64>,
    /// Publishers that have finished.
    done: AtomicUsize,
    /// Messages written so far by all publishers (updated once per batch).
    written: AtomicU64,
    /// Nanoseconds from `start` at which the last publisher finished.
    done_ns: AtomicU64,
    aborted: AtomicBool,
    /// Per subscriber: distinct messages received so far (updated once per read).
    progress: Vec<AtomicU64>,
}

impl Shared {
    pub fn new(start: Instant, publishers: usize, subscribers: usize, owed: Owed) -> Shared {
        Shared {
            start,
            owed,
            sent: (0..publishers).map(|_| AtomicU64::new(u64::MAX)).collect(),
            done: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            done_ns: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            progress: (0..subscribers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn report_progress(&self, subscriber: usize, distinct: u64) {
        self.progress[subscriber].store(distinct, Ordering::Relaxed);
    }

    pub fn add_written(&self, messages: u64) {
        self.written.fetch_add(messages, Ordering::Relaxed);
    }

    /// Messages written so far by all publishers.
    pub fn written_so_far(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// How many messages the publishers are ahead of what was delivered: of the slowest
    /// subscriber (each is owed all), or of the group as a whole.
    pub fn behind(&self) -> u64 {
        let written = self.written.load(Ordering::Relaxed);
        let delivered = match self.owed {
            Owed::Each => self
                .progress
                .iter()
                .map(|p| p.load(Ordering::Relaxed))
                .min()
                .unwrap_or(u64::MAX),
            Owed::Group => self
                .progress
                .iter()
                .map(|p| p.load(Ordering::Relaxed))
                .sum(),
        };
        written.saturating_sub(delivered)
    }

    /// Whether what has arrived at every subscriber (or the group) is everything written.
    pub fn group_complete(&self, total_sent: u64) -> bool {
        let arrived: u64 = self
            .progress
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .sum();
        arrived >= total_sent
    }

    pub fn owed(&self) -> Owed {
        self.owed
    }

    pub fn publisher_done(&self, publisher: usize, sent: u64) {
        let slot = &self.sent[publisher];
        if slot.load(Ordering::Acquire) == u64::MAX {
            slot.store(sent, Ordering::Release);
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.sent.len() {
                self.done_ns
                    .store(self.since_start().as_nanos() as u64, Ordering::Release);
            }
        }
    }

    /// Every publisher's count, once all have finished.
    pub fn sent(&self) -> Option<Vec<u64>> {
        if self.done.load(Ordering::Acquire) < self.sent.len() {
            return None;
        }
        Some(
            self.sent
                .iter()
                .map(|s| s.load(Ordering::Acquire))
                .collect(),
        )
    }

    pub fn since_publishers_done(&self) -> Duration {
        if self.done.load(Ordering::Acquire) < self.sent.len() {
            return Duration::ZERO;
        }
        let done = Duration::from_nanos(self.done_ns.load(Ordering::Acquire));
        self.since_start().saturating_sub(done)
    }

    pub fn since_start(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Relaxed);
    }

    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }
}
