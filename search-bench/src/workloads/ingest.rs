//! The `_bulk` ingest driver every engine shares: N sessions take the prepared bodies from one
//! queue until none is left, each request timed. Bounded by count (every body once), not by a
//! window; counts are documents, the latency histogram holds one sample per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::cputime::process_cpu_ns;
use common::driver::OpError;
use common::lanes::Lanes;
use common::pool::BoxFuture;
use common::recorder::Recorder;
use common::window::WindowOutcome;

use crate::corpus::Bulk;
use crate::targets::{BlockingBulkSession, BulkSession, IngestWorkers};

/// How long before the first request the workers are started, so all begin together.
const START_LEAD: Duration = Duration::from_millis(5);

pub trait AsyncIngest: Send {
    fn run(
        self: Box<Self>,
        bulks: Arc<[Bulk]>,
        ceiling: Duration,
        interrupt: Arc<AtomicBool>,
    ) -> BoxFuture<'static, WindowOutcome>;
}

pub trait BlockingIngest: Send {
    fn run(
        self: Box<Self>,
        bulks: Arc<[Bulk]>,
        ceiling: Duration,
        interrupt: Arc<AtomicBool>,
    ) -> WindowOutcome;
}

/// Ingest workers over async sessions; session `i` must have been opened on lane `i`.
pub fn async_ingest<S: BulkSession>(sessions: Vec<S>) -> IngestWorkers {
    IngestWorkers::Async(Box::new(AsyncSessions(sessions)))
}

/// Ingest workers over blocking sessions, one thread each.
pub fn blocking_ingest<S: BlockingBulkSession>(sessions: Vec<S>) -> IngestWorkers {
    IngestWorkers::Blocking(Box::new(BlockingSessions(sessions)))
}

struct AsyncSessions<S>(Vec<S>);
struct BlockingSessions<S>(Vec<S>);

/// One worker's tally: documents acknowledged or lost, and the per-request latencies.
struct Tally {
    recorder: Recorder,
    docs_ok: u64,
    docs_failed: u64,
    timeouts: u64,
    ended: Instant,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            recorder: Recorder::new(false),
            docs_ok: 0,
            docs_failed: 0,
            timeouts: 0,
            ended: Instant::now(),
        }
    }

    /// Records one request; returns false when the worker must stop.
    fn record(&mut self, bulk: &Bulk, started: Instant, result: Result<(), OpError>) -> bool {
        let took = started.elapsed();
        match result {
            Ok(()) => {
                self.recorder.record_ok(took, took);
                self.docs_ok += bulk.docs;
                true
            }
            Err(OpError::Failed(message)) => {
                self.recorder.record_error(&message);
                self.docs_failed += bulk.docs;
                true
            }
            Err(OpError::Fatal(message)) => {
                self.recorder.record_error(&message);
                self.recorder.fatal = Some(message);
                self.docs_failed += bulk.docs;
                false
            }
        }
    }

    fn into_recorder(mut self) -> Recorder {
        self.recorder.counts.ok = self.docs_ok;
        self.recorder.counts.error = self.docs_failed;
        self.recorder.counts.timeout = self.timeouts;
        self.recorder
    }
}

/// The queue of bodies shared by the workers.
#[derive(Clone)]
struct Queue {
    bulks: Arc<[Bulk]>,
    next: Arc<AtomicUsize>,
    interrupt: Arc<AtomicBool>,
}

impl Queue {
    fn take(&self) -> Option<usize> {
        if self.interrupt.load(Ordering::Relaxed) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.bulks.len()).then_some(i)
    }
}

fn outcome(start: Instant, cpu_before: u64, tallies: Vec<Tally>) -> WindowOutcome {
    let workers = tallies.len();
    let last_end = tallies.iter().map(|t| t.ended).max().unwrap_or(start);
    let mut recorder = Recorder::new(false);
    for tally in tallies {
        recorder.merge(&tally.into_recorder());
    }
    WindowOutcome {
        recorder,
        workers,
        elapsed: last_end.saturating_duration_since(start),
        stuck_workers: 0,
        client_cpu_ns: process_cpu_ns().saturating_sub(cpu_before),
        target_rate: None,
    }
}

impl<S: BulkSession> AsyncIngest for AsyncSessions<S> {
    fn run(
        self: Box<Self>,
        bulks: Arc<[Bulk]>,
        ceiling: Duration,
        interrupt: Arc<AtomicBool>,
    ) -> BoxFuture<'static, WindowOutcome> {
        Box::pin(async move {
            let cpu_before = process_cpu_ns();
            let start = Instant::now() + START_LEAD;
            let queue = Queue {
                bulks,
                next: Arc::new(AtomicUsize::new(0)),
                interrupt,
            };
            let tasks: Vec<_> = self
                .0
                .into_iter()
                .enumerate()
                .map(|(slot, mut session)| {
                    let queue = queue.clone();
                    Lanes::shared().spawn(slot, async move {
                        tokio::time::sleep_until(start.into()).await;
                        let mut tally = Tally::new();
                        while let Some(i) = queue.take() {
                            let bulk = &queue.bulks[i];
                            let started = Instant::now();
                            match tokio::time::timeout(ceiling, session.bulk(bulk)).await {
                                Ok(result) => {
                                    if !tally.record(bulk, started, result) {
                                        break;
                                    }
                                }
                                Err(_) => {
                                    tally.timeouts += bulk.docs;
                                    tally.recorder.fatal = Some(format!(
                                        "a _bulk request was not answered within {}",
                                        common::human::format_duration(ceiling)
                                    ));
                                    break;
                                }
                            }
                        }
                        tally.ended = Instant::now();
                        tally
                    })
                })
                .collect();
            let mut tallies = Vec::with_capacity(tasks.len());
            for task in tasks {
                match task.await {
                    Ok(tally) => tallies.push(tally),
                    Err(e) => {
                        let mut tally = Tally::new();
                        tally.recorder.fatal = Some(format!("an ingest worker failed: {e}"));
                        tallies.push(tally);
                    }
                }
            }
            outcome(start, cpu_before, tallies)
        })
    }
}

impl<S: BlockingBulkSession> BlockingIngest for BlockingSessions<S> {
    fn run(
        self: Box<Self>,
        bulks: Arc<[Bulk]>,
        _ceiling: Duration,
        interrupt: Arc<AtomicBool>,
    ) -> WindowOutcome {
        let cpu_before = process_cpu_ns();
        let start = Instant::now() + START_LEAD;
        let queue = Queue {
            bulks,
            next: Arc::new(AtomicUsize::new(0)),
            interrupt,
        };
        let tallies = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .0
                .into_iter()
                .enumerate()
                .map(|(index, mut session)| {
                    let queue = queue.clone();
                    std::thread::Builder::new()
                        .name(format!("ingest-{index}"))
                        .spawn_scoped(scope, move || {
                            let now = Instant::now();
                            if start > now {
                                std::thread::sleep(start - now);
                            }
                            let mut tally = Tally::new();
                            while let Some(i) = queue.take() {
                                let bulk = &queue.bulks[i];
                                let started = Instant::now();
                                let result = session.bulk(bulk);
                                if !tally.record(bulk, started, result) {
                                    break;
                                }
                            }
                            tally.ended = Instant::now();
                            tally
                        })
                        .expect("spawning an ingest thread")
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an ingest thread does not panic"))
                .collect::<Vec<_>>()
        });
        outcome(start, cpu_before, tallies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    struct Flaky {
        calls: u64,
    }

    impl BlockingBulkSession for Flaky {
        fn bulk(&mut self, _bulk: &Bulk) -> Result<(), OpError> {
            self.calls += 1;
            if self.calls == 2 {
                Err(OpError::Failed("rejected".into()))
            } else {
                Ok(())
            }
        }
    }

    impl BulkSession for Flaky {
        async fn bulk(&mut self, bulk: &Bulk) -> Result<(), OpError> {
            BlockingBulkSession::bulk(self, bulk)
        }
    }

    fn bulks() -> Arc<[Bulk]> {
        (0..10)
            .map(|i| Bulk {
                docs: 100 + i,
                body: Bytes::new(),
            })
            .collect()
    }

    #[test]
    fn every_body_is_sent_once_and_counts_are_documents() {
        let workers = BlockingSessions(vec![Flaky { calls: 0 }, Flaky { calls: 0 }]);
        let flag = Arc::new(AtomicBool::new(false));
        let outcome = Box::new(workers).run(bulks(), Duration::from_secs(5), flag);
        let counts = outcome.recorder.counts;
        let total: u64 = bulks().iter().map(|b| b.docs).sum();
        assert_eq!(counts.ok + counts.error, total);
        // At least one worker sent five bodies or more, so its second one failed.
        assert!(counts.error >= 100, "{counts:?}");
        let acknowledged = outcome.recorder.latency.len();
        assert!(
            (8..=9).contains(&acknowledged),
            "one sample per request acknowledged"
        );
        assert_eq!(outcome.recorder.first_error.as_deref(), Some("rejected"));
    }

    #[tokio::test]
    async fn the_async_driver_and_an_interrupt_stop_it() {
        let workers = AsyncSessions(vec![Flaky { calls: 0 }]);
        let outcome = Box::new(workers)
            .run(
                bulks(),
                Duration::from_secs(5),
                Arc::new(AtomicBool::new(false)),
            )
            .await;
        assert_eq!(outcome.recorder.latency.len(), 9);
        let stopped = AsyncSessions(vec![Flaky { calls: 0 }]);
        let outcome = Box::new(stopped)
            .run(
                bulks(),
                Duration::from_secs(5),
                Arc::new(AtomicBool::new(true)),
            )
            .await;
        assert_eq!(outcome.recorder.counts.ok, 0);
    }
}
