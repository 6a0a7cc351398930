//! A system's worker sessions running the CRUD operation, for async and for blocking clients.
//! Targets build these from their sessions; the window itself is common's.

use common::pool::{BoxFuture, Pool};
use common::window::WindowPlan;

use super::workload::{CrudOp, Mix};
use crate::targets::{BlockingKvSession, KvSession, KvWindow, KvWorkers};

struct AsyncWorkers<S>(Pool<S>);

struct BlockingWorkers<S>(Pool<S>);

/// Workers for a client whose sessions are async (one task each).
pub fn async_workers<S: KvSession>(pool: Pool<S>) -> Box<dyn KvWorkers> {
    Box::new(AsyncWorkers(pool))
}

/// Workers for a client whose sessions block (one thread each).
pub fn blocking_workers<S: BlockingKvSession>(pool: Pool<S>) -> Box<dyn KvWorkers> {
    Box::new(BlockingWorkers(pool))
}

impl<S: KvSession> KvWorkers for AsyncWorkers<S> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<KvWindow, String>> {
        Box::pin(async move {
            let mut acknowledged = 0;
            let back = |op: CrudOp<S>| {
                acknowledged += op.inserts_acknowledged();
                op.into_session()
            };
            let outcome = self
                .0
                .run_async(n, plan, |i, s| CrudOp::new(i, s, mix), back)
                .await?;
            Ok(KvWindow {
                outcome,
                inserts_acknowledged: acknowledged,
            })
        })
    }
}

impl<S: BlockingKvSession> KvWorkers for BlockingWorkers<S> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<KvWindow, String>> {
        Box::pin(async move {
            let mut acknowledged = 0;
            let back = |op: CrudOp<S>| {
                acknowledged += op.inserts_acknowledged();
                op.into_session()
            };
            let outcome = self
                .0
                .run_blocking(n, plan, |i, s| CrudOp::new(i, s, mix), back)
                .await?;
            Ok(KvWindow {
                outcome,
                inserts_acknowledged: acknowledged,
            })
        })
    }
}
