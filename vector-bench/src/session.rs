//! The measured path, below both targets and workloads and importing neither: a session
//! searches one query; a pass runs every query once on one session (latency at concurrency 1,
//! answers kept for recall; a search past --ceiling is a timeout and ends the pass); a window runs N sessions flat out for a duration (QPS). Targets
//! provide the session; the sweep sees only [`Searchers`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::driver::{BlockingOperation, CANCEL_WAIT, OpError, Operation};
use common::pool::{AsyncSessions, BlockingSessions, BoxFuture, Connector, Drive, Pool};
use common::recorder::Recorder;
use common::target::TargetError;
use common::window::{WindowOutcome, WindowPlan};

use crate::dataset::Dataset;

/// One sweep point: what every search of it asks.
#[derive(Debug)]
pub struct Work {
    pub data: Arc<Dataset>,
    pub k: usize,
    pub ef: usize,
    /// Only rows of this category qualify.
    pub category: Option<u8>,
    /// Where this process's sessions sit among every worker's of a run on several machines
    /// (`(0, 0)` alone): the run-wide index of its first session, and how many there are in
    /// all, so each session of every worker starts at a query of its own.
    pub sessions: (usize, usize),
}

impl Work {
    pub fn query_count(&self) -> usize {
        self.data.query_count()
    }
}

/// One pass over every query on one session.
#[derive(Debug)]
pub struct Pass {
    /// Latency of each search, from just before the call to just after it.
    pub recorder: Recorder,
    /// The ids each query returned, best first (empty for a failed search).
    pub answers: Vec<Vec<u64>>,
    /// Time inside the search calls, summed.
    pub call_ns: u64,
    /// Time of the whole pass, harness included.
    pub wall_ns: u64,
    /// The query whose search passed the ceiling: a timeout, and the pass ended there.
    pub timed_out_at: Option<usize>,
}

/// Why sessions could not be made ready for a point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Making them ready failed: the point is an `error`.
    Failed(String),
    /// A build it needed (an index made for this ef) ran past `--build-ceiling` and was
    /// stopped: the point is a `timeout`. The sentence names the bound.
    PastBound(String),
}

impl From<String> for NotReady {
    fn from(message: String) -> NotReady {
        NotReady::Failed(message)
    }
}

/// A system's open search sessions.
pub trait Searchers: Send {
    /// Makes every session ready for `work` (its ef, its filter, encoded queries) and returns
    /// the search breadth as the system reports it after the change.
    fn prepare<'a>(&'a mut self, work: &'a Arc<Work>) -> BoxFuture<'a, Result<String, NotReady>>;

    /// Every query once, one after the other, on the first session; a search that passes
    /// `ceiling` is a timeout and the pass stops there.
    fn pass<'a>(
        &'a mut self,
        work: &'a Arc<Work>,
        ceiling: Duration,
    ) -> BoxFuture<'a, Result<Pass, String>>;

    /// A QPS window on the first `n` sessions.
    fn window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Arc<Work>,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>>;

    /// What the sessions did besides searching that the report should say (an index rebuilt
    /// for a new ef), taken once.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// One connection of an async client.
pub trait SearchSession: Send + 'static {
    /// See [`Searchers::prepare`]; runs before any clock starts.
    fn prepare(&mut self, work: &Arc<Work>) -> impl Future<Output = Result<String, String>> + Send;
    /// Searches query `query` of `work`, writing the returned ids (best first) into `out`.
    fn search(
        &mut self,
        work: &Work,
        query: usize,
        out: &mut Vec<u64>,
    ) -> impl Future<Output = Result<(), OpError>> + Send;
    /// Stops, on the server, the search that just passed the ceiling (its future already
    /// dropped, and an HTTP or gRPC request with it); nothing to do for most engines.
    fn cancel(&mut self) -> impl Future<Output = Result<(), OpError>> + Send {
        async { Ok(()) }
    }
}

/// The same for an in-process index or a synchronous client, driven from its own thread.
pub trait BlockingSearchSession: Send + 'static {
    fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String>;
    fn search(&mut self, work: &Work, query: usize, out: &mut Vec<u64>) -> Result<(), OpError>;
}

/// A window's operation: the session cycling through the queries, each worker starting at its
/// own offset so workers do not ask the same query at the same moment.
struct SearchOp<S> {
    session: S,
    work: Arc<Work>,
    next: usize,
    out: Vec<u64>,
}

impl<S> SearchOp<S> {
    fn new(worker: usize, workers: usize, session: S, work: &Arc<Work>) -> SearchOp<S> {
        let queries = work.query_count().max(1);
        let (first, all) = work.sessions;
        let (worker, workers) = (first + worker, all.max(workers).max(1));
        SearchOp {
            session,
            work: work.clone(),
            next: worker * queries / workers,
            out: Vec::with_capacity(work.k),
        }
    }

    #[inline]
    fn advance(&mut self) -> usize {
        let query = self.next;
        self.next = (query + 1) % self.work.query_count();
        query
    }
}

impl<S: SearchSession> Operation for SearchOp<S> {
    async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        let query = self.advance();
        self.session.search(&self.work, query, &mut self.out).await
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.session.cancel().await
    }
}

impl<S: BlockingSearchSession> BlockingOperation for SearchOp<S> {
    fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        let query = self.advance();
        self.session.search(&self.work, query, &mut self.out)
    }
}

/// Folds one search into a pass; returns false when the session is gone.
fn record(pass: &mut Pass, started: Instant, result: Result<(), OpError>, out: &[u64]) -> bool {
    let took = started.elapsed();
    pass.call_ns += took.as_nanos() as u64;
    match result {
        Ok(()) => {
            pass.recorder.record_ok(took, took);
            pass.answers.push(out.to_vec());
            true
        }
        Err(OpError::Failed(message)) => {
            pass.recorder.record_error(&message);
            pass.answers.push(Vec::new());
            true
        }
        Err(OpError::Fatal(message)) => {
            pass.recorder.record_error(&message);
            pass.recorder.fatal = Some(message);
            false
        }
    }
}

/// A search past the ceiling: a timeout, never a latency sample; the pass ends with it.
fn stop(pass: &mut Pass, started: Instant, query: usize) {
    pass.call_ns += started.elapsed().as_nanos() as u64;
    pass.recorder.record_timeout();
    pass.timed_out_at = Some(query);
}

fn new_pass(work: &Work) -> Pass {
    Pass {
        recorder: Recorder::new(false),
        answers: Vec::with_capacity(work.query_count()),
        call_ns: 0,
        wall_ns: 0,
        timed_out_at: None,
    }
}

fn first<S>(pool: &mut Pool<S>) -> Result<&mut S, String>
where
    S: Send + 'static,
{
    pool.sessions_mut()
        .next()
        .ok_or_else(|| "no open session: the previous window lost them all".to_owned())
}

/// Opens `sessions` async sessions, before any clock starts.
pub async fn open_async<S: SearchSession>(
    sessions: usize,
    connect: Connector<S>,
) -> Result<Box<dyn Searchers>, TargetError> {
    let pool = Pool::open(sessions, connect)
        .await
        .map_err(TargetError::Other)?;
    Ok(Box::new(AsyncSearchers { pool }))
}

/// Opens `sessions` blocking sessions, before any clock starts.
pub async fn open_blocking<S: BlockingSearchSession>(
    sessions: usize,
    connect: Connector<S>,
) -> Result<Box<dyn Searchers>, TargetError> {
    let pool = Pool::open(sessions, connect)
        .await
        .map_err(TargetError::Other)?;
    Ok(Box::new(BlockingSearchers { pool }))
}

/// [`Searchers`] over async sessions.
pub struct AsyncSearchers<S> {
    pub pool: Pool<S>,
}

impl<S: SearchSession> Searchers for AsyncSearchers<S> {
    fn prepare<'a>(&'a mut self, work: &'a Arc<Work>) -> BoxFuture<'a, Result<String, NotReady>> {
        Box::pin(async move {
            let mut reported = String::new();
            for session in self.pool.sessions_mut() {
                reported = session.prepare(work).await?;
            }
            Ok(reported)
        })
    }

    fn pass<'a>(
        &'a mut self,
        work: &'a Arc<Work>,
        ceiling: Duration,
    ) -> BoxFuture<'a, Result<Pass, String>> {
        Box::pin(async move {
            let session = first(&mut self.pool)?;
            let mut pass = new_pass(work);
            let mut out = Vec::with_capacity(work.k);
            let began = Instant::now();
            for query in 0..work.query_count() {
                let started = Instant::now();
                // Past the ceiling the search's future is dropped: an HTTP or gRPC request
                // with it.
                let searched = tokio::time::timeout(ceiling, session.search(work, query, &mut out));
                let Ok(result) = searched.await else {
                    stop(&mut pass, started, query);
                    // A cancel that fails leaves the pass as it is: a timeout.
                    let _ = tokio::time::timeout(CANCEL_WAIT, session.cancel()).await;
                    break;
                };
                if !record(&mut pass, started, result, &out) {
                    break;
                }
            }
            pass.wall_ns = began.elapsed().as_nanos() as u64;
            Ok(pass)
        })
    }

    fn window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Arc<Work>,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        window::<S, AsyncSessions>(&mut self.pool, n, work, plan)
    }
}

/// One window of `n` workers, on tasks or threads as `K` drives them.
fn window<'a, S: Send + 'static, K: Drive<SearchOp<S>>>(
    pool: &'a mut Pool<S>,
    n: usize,
    work: &'a Arc<Work>,
    plan: &'a WindowPlan,
) -> BoxFuture<'a, Result<WindowOutcome, String>> {
    Box::pin(K::window(
        pool,
        n,
        plan,
        move |i, s| SearchOp::new(i, n, s, work),
        |op: SearchOp<S>| op.session,
    ))
}

/// [`Searchers`] over blocking sessions (one OS thread per worker).
pub struct BlockingSearchers<S> {
    pub pool: Pool<S>,
}

impl<S: BlockingSearchSession> Searchers for BlockingSearchers<S> {
    fn prepare<'a>(&'a mut self, work: &'a Arc<Work>) -> BoxFuture<'a, Result<String, NotReady>> {
        Box::pin(async move {
            let mut reported = String::new();
            for session in self.pool.sessions_mut() {
                reported = session.prepare(work)?;
            }
            Ok(reported)
        })
    }

    fn pass<'a>(
        &'a mut self,
        work: &'a Arc<Work>,
        ceiling: Duration,
    ) -> BoxFuture<'a, Result<Pass, String>> {
        Box::pin(async move {
            let session = first(&mut self.pool)?;
            // A pass is CPU-bound for an in-process index: keep it off the runtime's workers.
            Ok(tokio::task::block_in_place(|| {
                let mut pass = new_pass(work);
                let mut out = Vec::with_capacity(work.k);
                let began = Instant::now();
                for query in 0..work.query_count() {
                    let started = Instant::now();
                    let result = session.search(work, query, &mut out);
                    // A blocking search cannot be stopped from outside; one that returns past
                    // the ceiling is a timeout all the same, and the pass ends with it.
                    if started.elapsed() >= ceiling {
                        stop(&mut pass, started, query);
                        break;
                    }
                    if !record(&mut pass, started, result, &out) {
                        break;
                    }
                }
                pass.wall_ns = began.elapsed().as_nanos() as u64;
                pass
            }))
        })
    }

    fn window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Arc<Work>,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        window::<S, BlockingSessions>(&mut self.pool, n, work, plan)
    }
}
