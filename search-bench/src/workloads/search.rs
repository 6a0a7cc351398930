//! The measured query windows: each worker sends the same sequence of its workload's query
//! set (query `seq mod len`), closed or open loop, through common's window and pool.

use common::driver::{BlockingOperation, OpError, Operation};
use common::pool::{BoxFuture, Pool};
use common::window::{WindowOutcome, WindowPlan};

use crate::queries::QueryKind;
use crate::targets::{BlockingSearchSession, SearchSession, SearchWorkers};

/// One worker's operation: query `seq mod len` of the `kind` set.
struct QueryOp<S> {
    session: S,
    kind: QueryKind,
    len: u64,
}

impl<S: SearchSession> Operation for QueryOp<S> {
    async fn call(&mut self, seq: u64) -> Result<(), OpError> {
        self.session
            .search(self.kind, (seq % self.len) as usize)
            .await
    }
}

impl<S: BlockingSearchSession> BlockingOperation for QueryOp<S> {
    fn call(&mut self, seq: u64) -> Result<(), OpError> {
        self.session.search(self.kind, (seq % self.len) as usize)
    }
}

struct AsyncWorkers<S> {
    pool: Pool<S>,
    set_len: [usize; 4],
}

struct BlockingWorkers<S> {
    pool: Pool<S>,
    set_len: [usize; 4],
}

/// Search workers over async sessions (one task each, on its lane). `set_len[k]` is the size
/// of the query set of `QueryKind::ALL[k]`.
pub fn async_workers<S: SearchSession>(
    pool: Pool<S>,
    set_len: [usize; 4],
) -> Box<dyn SearchWorkers> {
    Box::new(AsyncWorkers { pool, set_len })
}

/// Search workers over blocking sessions (one thread each).
pub fn blocking_workers<S: BlockingSearchSession>(
    pool: Pool<S>,
    set_len: [usize; 4],
) -> Box<dyn SearchWorkers> {
    Box::new(BlockingWorkers { pool, set_len })
}

fn len_of(set_len: &[usize; 4], kind: QueryKind) -> Result<u64, String> {
    let len = set_len[kind as usize];
    if len == 0 {
        return Err(format!("no {} queries were prepared", kind.key()));
    }
    Ok(len as u64)
}

impl<S: SearchSession> SearchWorkers for AsyncWorkers<S> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        kind: QueryKind,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        Box::pin(async move {
            let len = len_of(&self.set_len, kind)?;
            self.pool
                .run_async(
                    n,
                    plan,
                    |_, session| QueryOp { session, kind, len },
                    |op| op.session,
                )
                .await
        })
    }
}

impl<S: BlockingSearchSession> SearchWorkers for BlockingWorkers<S> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        kind: QueryKind,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        Box::pin(async move {
            let len = len_of(&self.set_len, kind)?;
            self.pool
                .run_blocking(
                    n,
                    plan,
                    |_, session| QueryOp { session, kind, len },
                    |op| op.session,
                )
                .await
        })
    }
}
