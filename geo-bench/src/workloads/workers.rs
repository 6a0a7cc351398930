//! A system's worker sessions, for async and for blocking clients: they run windows of any
//! workload, and answer the verification queries through the very code that is timed.
//! Targets build these from a connector; the window itself is common's.

use common::pool::{BoxFuture, Connector, Pool};
use common::window::{WindowOutcome, WindowPlan};

use super::{GeoOp, Work};
use crate::queries::Query;
use crate::targets::{BlockingGeoSession, GeoSession};

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

struct AsyncWorkers<S> {
    pool: Pool<S>,
    connect: Connector<S>,
}

struct BlockingWorkers<S> {
    pool: Pool<S>,
    connect: Connector<S>,
}

/// Opens `size` async sessions (one task each when measured).
pub async fn async_workers<S: GeoSession>(
    size: usize,
    connect: Connector<S>,
) -> Result<Box<dyn GeoWorkers>, String> {
    let pool = Pool::open(size, connect.clone()).await?;
    Ok(Box::new(AsyncWorkers { pool, connect }))
}

/// Opens `size` blocking sessions (one thread each when measured).
pub async fn blocking_workers<S: BlockingGeoSession>(
    size: usize,
    connect: Connector<S>,
) -> Result<Box<dyn GeoWorkers>, String> {
    let pool = Pool::open(size, connect.clone()).await?;
    Ok(Box::new(BlockingWorkers { pool, connect }))
}

fn render(message: impl std::fmt::Display, query: &Query) -> String {
    format!("{}: {message}", crate::oracle::describe(query))
}

impl<S: GeoSession> GeoWorkers for AsyncWorkers<S> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Work,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<GeoWindow, String>> {
        Box::pin(async move {
            let (mut acknowledged, mut results) = (0, 0);
            let back = |op: GeoOp<S>| {
                acknowledged += op.acknowledged;
                results += op.results;
                op.into_session()
            };
            let outcome = self
                .pool
                .run_async(n, plan, |i, s| GeoOp::new(i, s, work), back)
                .await?;
            Ok(GeoWindow {
                outcome,
                acknowledged,
                results,
            })
        })
    }

    fn answer_all<'a>(
        &'a mut self,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>> {
        Box::pin(async move {
            let mut session = (self.connect)().await?;
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

impl<S: BlockingGeoSession> GeoWorkers for BlockingWorkers<S> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Work,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<GeoWindow, String>> {
        Box::pin(async move {
            let (mut acknowledged, mut results) = (0, 0);
            let back = |op: GeoOp<S>| {
                acknowledged += op.acknowledged;
                results += op.results;
                op.into_session()
            };
            let outcome = self
                .pool
                .run_blocking(n, plan, |i, s| GeoOp::new(i, s, work), back)
                .await?;
            Ok(GeoWindow {
                outcome,
                acknowledged,
                results,
            })
        })
    }

    fn answer_all<'a>(
        &'a mut self,
        queries: &'a [Query],
    ) -> BoxFuture<'a, Result<Vec<Vec<u128>>, String>> {
        Box::pin(async move {
            let mut session = (self.connect)().await?;
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
