//! The measured path, below both targets and workloads: the session traits a timed operation
//! goes through, the operation each worker runs, and a system's worker sessions (async or
//! blocking), which run windows and answer the verification queries through the very code
//! that is timed. Targets implement the session traits; the window itself is common's.

use std::future::Future;
use std::sync::Arc;

use common::driver::{BlockingOperation, OpError, Operation};
use common::pool::{AsyncSessions, BlockingSessions, BoxFuture, Connector, Drive, Held, Settle};
use common::watchdog::Interrupt;
use common::window::{WindowOutcome, WindowPlan};

use crate::events::Event;
use crate::queries::Query;

/// One connection's measured operations, for async clients.
pub trait GeoSession: Send + 'static {
    /// Inserts `batch` as one request (one acknowledgement for all its events).
    fn insert(&mut self, batch: &[Event]) -> impl Future<Output = Result<(), OpError>> + Send;

    /// Answers `query` into `ids` (cleared first).
    fn query(
        &mut self,
        query: &Query,
        ids: &mut Vec<u128>,
    ) -> impl Future<Output = Result<(), OpError>> + Send;

    /// Sends one single-point add per event, pipelined, and waits for every reply. `first`
    /// numbers the members so they are unique.
    fn add_points(
        &mut self,
        events: &[Event],
        first: u64,
    ) -> impl Future<Output = Result<(), OpError>> + Send {
        let _ = (events, first);
        async { Err(OpError::Fatal("this target has no single-point add".into())) }
    }

    /// Stops on the server the call that just passed the ceiling ([`Operation::cancel`]):
    /// PostgreSQL's cancel request. The default does nothing: a dropped Redis or ArcherDB
    /// request has nothing on the server to stop.
    fn cancel(&mut self) -> impl Future<Output = Result<(), OpError>> + Send {
        std::future::ready(Ok(()))
    }
}

/// The same for synchronous clients, each driven from its own thread.
pub trait BlockingGeoSession: Send + 'static {
    fn insert(&mut self, batch: &[Event]) -> Result<(), OpError>;
    fn query(&mut self, query: &Query, ids: &mut Vec<u128>) -> Result<(), OpError>;

    /// How the statement in progress is stopped from another thread
    /// ([`BlockingOperation::interrupt`]); `None` for an engine that cannot.
    fn interrupt(&self) -> Option<Interrupt> {
        None
    }
}

/// What one window's operations draw on; cheap to clone into every worker.
#[derive(Clone, Debug)]
pub enum Work {
    /// Events cycled from `pool`, their ids made unique by `window`, worker and sequence.
    Insert {
        batch: usize,
        pool: Arc<[Event]>,
        window: u64,
        first_worker: usize,
    },
    /// The family's verified queries, cycled from a per-worker offset.
    Query {
        queries: Arc<[Query]>,
        first_worker: usize,
    },
    PointAdds {
        depth: usize,
        pool: Arc<[Event]>,
        window: u64,
        first_worker: usize,
    },
}

impl Work {
    /// The run-wide number of this process's first connection: with several client
    /// machines, worker i's connections come after those of workers 0 … i−1
    /// (`common::scale::Segment`), so ids and offsets never collide across machines.
    pub fn first_worker(&self) -> usize {
        match self {
            Work::Insert { first_worker, .. }
            | Work::Query { first_worker, .. }
            | Work::PointAdds { first_worker, .. } => *first_worker,
        }
    }
}

/// An event id no generated event has: `0xfb` tag, window, worker and sequence.
#[inline]
pub fn insert_id(window: u64, worker: usize, sequence: u64) -> u128 {
    (0xfb_u128 << 120)
        | (u128::from(window) << 64)
        | ((worker as u128) << 48)
        | u128::from(sequence)
}

/// Where a worker is in its pool, and the batch it is filling.
struct Feed {
    worker: usize,
    cursor: usize,
    sequence: u64,
    batch: Vec<Event>,
}

impl Feed {
    /// Fills the batch with the next `count` pool events under fresh ids.
    #[inline]
    fn fill(&mut self, pool: &[Event], count: usize, window: u64) -> &[Event] {
        self.batch.clear();
        for _ in 0..count {
            let mut event = pool[self.cursor];
            event.id = insert_id(window, self.worker, self.sequence);
            self.sequence += 1;
            self.cursor = (self.cursor + 1) % pool.len();
            self.batch.push(event);
        }
        &self.batch
    }

    /// The index of the next query of `len`.
    #[inline]
    fn next_query(&mut self, len: usize) -> usize {
        let index = self.cursor % len;
        self.cursor = (index + 1) % len;
        index
    }
}

/// Worker `worker`'s operation for one window.
pub struct GeoOp<S> {
    session: S,
    work: Work,
    feed: Feed,
    ids: Vec<u128>,
    /// Events (or commands) the system acknowledged.
    pub acknowledged: u64,
    /// Ids the queries returned, summed.
    pub results: u64,
}

impl<S> GeoOp<S> {
    pub fn new(worker: usize, session: S, work: &Work) -> GeoOp<S> {
        let (capacity, cursor) = match work {
            Work::Insert { batch, pool, .. } => (*batch, worker * 7_919 % pool.len()),
            Work::PointAdds { depth, pool, .. } => (*depth, worker * 7_919 % pool.len()),
            Work::Query { queries, .. } => (0, worker * 31 % queries.len().max(1)),
        };
        GeoOp {
            session,
            work: work.clone(),
            feed: Feed {
                worker,
                cursor,
                sequence: 0,
                batch: Vec::with_capacity(capacity),
            },
            ids: Vec::with_capacity(1024),
            acknowledged: 0,
            results: 0,
        }
    }
}

/// Events (or point adds) acknowledged, and ids returned, summed over a window's workers.
#[derive(Debug, Default)]
pub struct Counted {
    acknowledged: u64,
    results: u64,
}

impl<S> Settle for GeoOp<S> {
    type Session = S;
    type Tally = Counted;

    fn settle(self, tally: &mut Counted) -> S {
        tally.acknowledged += self.acknowledged;
        tally.results += self.results;
        self.session
    }
}

impl<S: GeoSession> Operation for GeoOp<S> {
    async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        match &self.work {
            Work::Insert {
                batch,
                pool,
                window,
                ..
            } => {
                let events = self.feed.fill(pool, *batch, *window);
                self.session.insert(events).await?;
                self.acknowledged += *batch as u64;
            }
            Work::Query { queries, .. } => {
                let query = &queries[self.feed.next_query(queries.len())];
                self.session.query(query, &mut self.ids).await?;
                self.results += self.ids.len() as u64;
            }
            Work::PointAdds {
                depth,
                pool,
                window,
                ..
            } => {
                // Members are numbered per worker, as redis-benchmark numbers its keys.
                let first = ((self.feed.worker as u64) << 40) + self.feed.sequence;
                let events = self.feed.fill(pool, *depth, *window);
                self.session.add_points(events, first).await?;
                self.acknowledged += *depth as u64;
            }
        }
        Ok(())
    }

    fn cancel(&mut self) -> impl Future<Output = Result<(), OpError>> + Send {
        self.session.cancel()
    }
}

impl<S: BlockingGeoSession> BlockingOperation for GeoOp<S> {
    fn interrupt(&self) -> Option<Interrupt> {
        self.session.interrupt()
    }

    fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        match &self.work {
            Work::Insert {
                batch,
                pool,
                window,
                ..
            } => {
                let events = self.feed.fill(pool, *batch, *window);
                self.session.insert(events)?;
                self.acknowledged += *batch as u64;
            }
            Work::Query { queries, .. } => {
                let query = &queries[self.feed.next_query(queries.len())];
                self.session.query(query, &mut self.ids)?;
                self.results += self.ids.len() as u64;
            }
            Work::PointAdds { .. } => {
                return Err(OpError::Fatal("this target has no single-point add".into()));
            }
        }
        Ok(())
    }
}

/// One window: what was measured, and what the system acknowledged and returned.
#[derive(Debug)]
pub struct GeoWindow {
    pub outcome: WindowOutcome,
    /// Events (or point adds) acknowledged, checked afterwards against what the system holds.
    pub acknowledged: u64,
    /// Ids returned by the window's queries, summed.
    pub results: u64,
}

/// A system's open worker sessions.
pub trait GeoWorkers: Send {
    /// Runs one window on the first `n` sessions.
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Work,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<GeoWindow, String>>;

    /// Answers every query on a session of its own, with the same code the windows time.
    fn answer_all<'a>(
        &'a mut self,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>>;
}

common::worker_openers!(GeoWorkers, GeoSession, BlockingGeoSession);

fn render(message: impl std::fmt::Display, query: &Query) -> String {
    format!("{}: {message}", crate::oracle::describe(query))
}

impl<S: Send + 'static, K: Drive<GeoOp<S>> + Answer<S>> GeoWorkers for Held<S, K> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Work,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<GeoWindow, String>> {
        Box::pin(async move {
            let make = |i, s| GeoOp::new(work.first_worker() + i, s, work);
            let (outcome, counted) = self.window(n, plan, make).await?;
            Ok(GeoWindow {
                outcome,
                acknowledged: counted.acknowledged,
                results: counted.results,
            })
        })
    }

    fn answer_all<'a>(
        &'a mut self,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>> {
        K::answer_all(&self.connect, queries)
    }
}

/// Answers every verification query on a session of its own, through the session call the
/// windows time: on the runtime for async sessions, on a thread for blocking ones.
pub trait Answer<S> {
    fn answer_all<'a>(
        connect: &'a Connector<S>,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>>;
}

impl<S: GeoSession> Answer<S> for AsyncSessions {
    fn answer_all<'a>(
        connect: &'a Connector<S>,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>> {
        Box::pin(async move {
            let mut session = connect().await?;
            let mut answers = Vec::with_capacity(queries.len());
            for query in queries {
                let mut ids = Vec::new();
                session
                    .query(query, &mut ids)
                    .await
                    .map_err(|e| render(e, query))?;
                answers.push(ids);
            }
            Ok(answers)
        })
    }
}

impl<S: BlockingGeoSession> Answer<S> for BlockingSessions {
    fn answer_all<'a>(
        connect: &'a Connector<S>,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>> {
        Box::pin(async move {
            let mut session = connect().await?;
            let queries = queries.to_vec();
            tokio::task::spawn_blocking(move || {
                queries
                    .iter()
                    .map(|query| {
                        let mut ids = Vec::new();
                        session
                            .query(query, &mut ids)
                            .map_err(|e| render(e, query))?;
                        Ok(ids)
                    })
                    .collect()
            })
            .await
            .map_err(|e| format!("the verification thread failed: {e}"))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_ids_are_unique_across_windows_workers_and_sequence() {
        let a = insert_id(1, 0, 5);
        assert_ne!(a, insert_id(2, 0, 5));
        assert_ne!(a, insert_id(1, 1, 5));
        assert_ne!(a, insert_id(1, 0, 6));
        assert_eq!(a >> 120, 0xfb);
    }
}
