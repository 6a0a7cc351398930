//! The measured path, below both targets and workloads: the session traits a timed operation
//! goes through (a `_bulk` request, a search) and the drivers that run them. Ingest sends
//! every prepared body once over N sessions taking from one queue, each request timed
//! (bounded by count, not by a window; counts are documents, the histogram holds one sample
//! per request); a query window has each worker send the same sequence of its workload's set
//! (query `seq mod len`), closed or open loop, through common's window and pool. Targets
//! implement the session traits; async clients run as tasks, in-process engines on threads.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::cputime::process_cpu_ns;
use common::driver::{BlockingOperation, OpError, Operation};
use common::lanes::Lanes;
use common::pool::{AsyncSessions, BlockingSessions, BoxFuture, Drive, Held, Pool, Settle};
use common::recorder::Recorder;
use common::window::{WindowOutcome, WindowPlan};

use crate::corpus::Bulk;
use crate::queries::QueryKind;

/// One connection's measured searches, for async clients: query `index` of the `kind` set.
pub trait SearchSession: Send + 'static {
    fn search(
        &mut self,
        kind: QueryKind,
        index: usize,
    ) -> impl Future<Output = Result<(), OpError>> + Send;
}

/// The same for in-process engines, each session driven from its own thread.
pub trait BlockingSearchSession: Send + 'static {
    fn search(&mut self, kind: QueryKind, index: usize) -> Result<(), OpError>;
}

/// One connection's `_bulk` requests, for async clients.
pub trait BulkSession: Send + 'static {
    fn bulk(&mut self, bulk: &Bulk) -> impl Future<Output = Result<(), OpError>> + Send;
}

/// The same for in-process engines.
pub trait BlockingBulkSession: Send + 'static {
    fn bulk(&mut self, bulk: &Bulk) -> Result<(), OpError>;
}

/// An engine's open search sessions.
pub trait SearchWorkers: Send {
    /// Runs one window of `kind` on the first `n` sessions; the `seq`-th request of each is
    /// query `order[seq mod len]` (query `seq mod len` without an order).
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        kind: QueryKind,
        plan: &'a WindowPlan,
        order: Option<Order>,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>>;
}

/// An engine's open ingest sessions, over async clients or in-process threads.
pub enum IngestWorkers {
    Async(Box<dyn AsyncIngest>),
    Blocking(Box<dyn BlockingIngest>),
}

impl std::fmt::Debug for IngestWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IngestWorkers")
    }
}

impl IngestWorkers {
    /// Sends every body once, `sessions` at a time; a request unanswered within `ceiling`
    /// stops its session.
    pub async fn run(
        self,
        bulks: Arc<[Bulk]>,
        ceiling: Duration,
        interrupt: Arc<AtomicBool>,
    ) -> WindowOutcome {
        match self {
            IngestWorkers::Async(w) => w.run(bulks, ceiling, interrupt).await,
            IngestWorkers::Blocking(w) => {
                tokio::task::spawn_blocking(move || w.run(bulks, ceiling, interrupt))
                    .await
                    .expect("the ingest threads do not panic")
            }
        }
    }
}

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
    IngestWorkers::Async(Box::new(AsyncBulks(sessions)))
}

/// Ingest workers over blocking sessions, one thread each.
pub fn blocking_ingest<S: BlockingBulkSession>(sessions: Vec<S>) -> IngestWorkers {
    IngestWorkers::Blocking(Box::new(BlockingBulks(sessions)))
}

/// How long before the first request the workers are started, so all begin together.
const START_LEAD: Duration = Duration::from_millis(5);

/// Ingest sessions, async or blocking.
struct AsyncBulks<S>(Vec<S>);
struct BlockingBulks<S>(Vec<S>);

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

    /// A request past the ceiling: its documents are timeouts, and the worker stops (what
    /// the engine holds is no longer known).
    fn past_ceiling(&mut self, bulk: &Bulk, ceiling: Duration) {
        self.timeouts += bulk.docs;
        self.recorder.fatal = Some(format!(
            "a _bulk request was still running at the ceiling ({})",
            common::human::format_duration(ceiling)
        ));
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
        client_busy: None,
        client_busy_least: None,
        busy_is_the_clients: false,
        target_rate: None,
    }
}

impl<S: BulkSession> AsyncIngest for AsyncBulks<S> {
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
                                    tally.past_ceiling(bulk, ceiling);
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

impl<S: BlockingBulkSession> BlockingIngest for BlockingBulks<S> {
    fn run(
        self: Box<Self>,
        bulks: Arc<[Bulk]>,
        ceiling: Duration,
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
                                // An in-process call cannot be stopped from outside; one that
                                // returns past the ceiling is a timeout all the same.
                                if started.elapsed() >= ceiling {
                                    tally.past_ceiling(bulk, ceiling);
                                    break;
                                }
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

/// A worker's own order of a query set: position `i` of its sequence sends query `order[i]`.
pub type Order = Arc<[u32]>;

/// One connection's operation: query `seq mod len` of the `kind` set, through `order`.
struct QueryOp<S> {
    session: S,
    kind: QueryKind,
    len: u64,
    order: Option<Order>,
}

impl<S> QueryOp<S> {
    fn index(&self, seq: u64) -> usize {
        let position = (seq % self.len) as usize;
        match &self.order {
            Some(order) => order[position] as usize,
            None => position,
        }
    }
}

/// A query window counts nothing beyond its outcome.
impl<S> Settle for QueryOp<S> {
    type Session = S;
    type Tally = ();

    fn settle(self, (): &mut ()) -> S {
        self.session
    }
}

impl<S: SearchSession> Operation for QueryOp<S> {
    async fn call(&mut self, seq: u64) -> Result<(), OpError> {
        let index = self.index(seq);
        self.session.search(self.kind, index).await
    }
}

impl<S: BlockingSearchSession> BlockingOperation for QueryOp<S> {
    fn call(&mut self, seq: u64) -> Result<(), OpError> {
        let index = self.index(seq);
        self.session.search(self.kind, index)
    }
}

/// A system's search sessions, and the size of each query set (`set_len[k]` for
/// `QueryKind::ALL[k]`).
struct Workers<S, K> {
    held: Held<S, K>,
    set_len: [usize; 4],
}

/// Search workers over async sessions (one task each, on its lane). `set_len[k]` is the size
/// of the query set of `QueryKind::ALL[k]`.
pub fn async_workers<S: SearchSession>(
    pool: Pool<S>,
    set_len: [usize; 4],
) -> Box<dyn SearchWorkers> {
    Box::new(Workers::<S, AsyncSessions> {
        held: Held::new(pool),
        set_len,
    })
}

/// Search workers over blocking sessions (one thread each).
pub fn blocking_workers<S: BlockingSearchSession>(
    pool: Pool<S>,
    set_len: [usize; 4],
) -> Box<dyn SearchWorkers> {
    Box::new(Workers::<S, BlockingSessions> {
        held: Held::new(pool),
        set_len,
    })
}

fn len_of(set_len: &[usize; 4], kind: QueryKind, order: Option<&Order>) -> Result<u64, String> {
    let len = set_len[kind as usize];
    if len == 0 {
        return Err(format!("no {} queries were prepared", kind.key()));
    }
    if let Some(order) = order
        && (order.len() != len || order.iter().any(|&i| i as usize >= len))
    {
        return Err(format!(
            "the {} order does not cover the {len} queries prepared",
            kind.key()
        ));
    }
    Ok(len as u64)
}

impl<S: Send + 'static, K: Drive<QueryOp<S>>> SearchWorkers for Workers<S, K> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        kind: QueryKind,
        plan: &'a WindowPlan,
        order: Option<Order>,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        Box::pin(async move {
            let len = len_of(&self.set_len, kind, order.as_ref())?;
            let make = |_, session| QueryOp {
                session,
                kind,
                len,
                order: order.clone(),
            };
            let (outcome, ()) = self.held.window(n, plan, make).await?;
            Ok(outcome)
        })
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
        let workers = BlockingBulks(vec![Flaky { calls: 0 }, Flaky { calls: 0 }]);
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
        let workers = AsyncBulks(vec![Flaky { calls: 0 }]);
        let outcome = Box::new(workers)
            .run(
                bulks(),
                Duration::from_secs(5),
                Arc::new(AtomicBool::new(false)),
            )
            .await;
        assert_eq!(outcome.recorder.latency.len(), 9);
        let stopped = AsyncBulks(vec![Flaky { calls: 0 }]);
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
