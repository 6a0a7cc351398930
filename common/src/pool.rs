//! The sessions (open, authenticated connections) a system's workers use. All are opened
//! before any clock starts; a session lost in a window is reopened before the next one.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use crate::driver::{BlockingOperation, Operation};
use crate::lanes::Lanes;
use crate::target::TargetError;
use crate::window::{WindowOutcome, WindowPlan, run_async, run_blocking};

/// A boxed future, for the object-safe control paths of tools (never the hot path).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Opens one session; the error is a complete, printable sentence.
pub type Connector<S> = Arc<dyn Fn() -> BoxFuture<'static, Result<S, String>> + Send + Sync>;

/// A tool's workers (`W`: its workers trait object), being opened before anything is measured.
pub type Opened<W> = BoxFuture<'static, Result<Box<W>, TargetError>>;

pub struct Pool<S> {
    sessions: Vec<Option<S>>,
    connect: Connector<S>,
}

impl<S: Send + 'static> Pool<S> {
    /// Opens `size` sessions, one after the other, before anything is measured. Session `i`
    /// is opened on the lane it will always run on.
    pub async fn open(size: usize, connect: Connector<S>) -> Result<Pool<S>, String> {
        let mut sessions = Vec::with_capacity(size);
        for slot in 0..size {
            sessions.push(Some(open_on_lane(slot, &connect).await?));
        }
        Ok(Pool { sessions, connect })
    }

    pub fn size(&self) -> usize {
        self.sessions.len()
    }

    /// The open sessions, for control work between windows (setting a per-session parameter,
    /// a single-session pass); never used inside a window.
    pub fn sessions_mut(&mut self) -> impl Iterator<Item = &mut S> {
        self.sessions.iter_mut().flatten()
    }

    /// Reopens any of the first `n` sessions lost in an earlier window.
    async fn ensure(&mut self, n: usize) -> Result<(), String> {
        for (index, slot) in self.sessions.iter_mut().take(n).enumerate() {
            if slot.is_none() {
                *slot = Some(open_on_lane(index, &self.connect).await?);
            }
        }
        Ok(())
    }

    fn take(&mut self, n: usize) -> Vec<S> {
        self.sessions
            .iter_mut()
            .take(n)
            .map(|slot| slot.take().expect("ensure() opened every slot"))
            .collect()
    }

    fn put_back(&mut self, sessions: Vec<Option<S>>) {
        for (slot, session) in self.sessions.iter_mut().zip(sessions) {
            *slot = session;
        }
    }

    /// Runs one window on the first `n` sessions with async workers. `make` turns a session
    /// into worker `i`'s operation; `back` recovers the session afterwards. A session whose
    /// worker stopped on a fatal error is dropped and reopened next time.
    pub async fn run_async<O: Operation + 'static>(
        &mut self,
        n: usize,
        plan: &WindowPlan,
        make: impl Fn(usize, S) -> O,
        back: impl FnMut(O) -> S,
    ) -> Result<WindowOutcome, String> {
        self.ensure(n).await?;
        let ops = self
            .take(n)
            .into_iter()
            .enumerate()
            .map(|(i, s)| make(i, s))
            .collect();
        let (ops, outcome) = run_async(ops, plan).await;
        self.put_back(keep_healthy(ops, &outcome, back));
        Ok(outcome)
    }

    /// The same for synchronous clients: one OS thread per worker, orchestrated off the runtime.
    pub async fn run_blocking<O: BlockingOperation + 'static>(
        &mut self,
        n: usize,
        plan: &WindowPlan,
        make: impl Fn(usize, S) -> O,
        back: impl FnMut(O) -> S,
    ) -> Result<WindowOutcome, String> {
        self.ensure(n).await?;
        let ops: Vec<O> = self
            .take(n)
            .into_iter()
            .enumerate()
            .map(|(i, s)| make(i, s))
            .collect();
        let plan = plan.clone();
        let (ops, outcome) = tokio::task::spawn_blocking(move || run_blocking(ops, &plan))
            .await
            .map_err(|e| format!("the window's worker threads failed: {e}"))?;
        self.put_back(keep_healthy(ops, &outcome, back));
        Ok(outcome)
    }
}

/// Declares a tool's two worker openers over [`Held`], for the tool's workers trait `$workers`
/// (implemented for `Held<S, K>`): `async_workers::<S: $session>` drives each session on a task,
/// `blocking_workers::<S: $blocking_session>` on a thread. Each opens `size` sessions before
/// anything is measured and hands them back as a `dyn $workers`. In a tool's `session.rs`:
/// `common::worker_openers!(GeoWorkers, GeoSession, BlockingGeoSession);`.
#[macro_export]
macro_rules! worker_openers {
    ($workers:ident, $session:ident, $blocking_session:ident) => {
        $crate::worker_openers!(
            @one async_workers, $session, AsyncSessions, $workers,
            "Opens `size` workers for a client whose sessions are async (one task each)."
        );
        $crate::worker_openers!(
            @one blocking_workers, $blocking_session, BlockingSessions, $workers,
            "Opens `size` workers for a client whose sessions block (one thread each)."
        );
    };
    (@one $name:ident, $session:ident, $kind:ident, $workers:ident, $doc:literal) => {
        #[doc = $doc]
        pub fn $name<S: $session>(
            size: usize,
            connect: $crate::pool::Connector<S>,
        ) -> $crate::pool::Opened<dyn $workers> {
            $crate::pool::Held::<S, $crate::pool::$kind>::open_boxed(size, connect, |held| {
                Box::new(held)
            })
        }
    };
}

/// A system's sessions held for its timed windows, with the connector that opens one more
/// (a single-session pass, a reopened session). `K` is [`AsyncSessions`] or
/// [`BlockingSessions`]: it keeps a tool's two implementations of its workers trait apart, one
/// driving async sessions on tasks, the other blocking sessions on threads.
pub struct Held<S, K> {
    pub pool: Pool<S>,
    pub connect: Connector<S>,
    kind: PhantomData<fn() -> K>,
}

/// Sessions whose operations are futures (one task each in a window).
pub struct AsyncSessions;

/// Sessions whose operations block (one thread each in a window).
pub struct BlockingSessions;

/// How a window drives operations `O`: [`AsyncSessions`] on tasks ([`Pool::run_async`]),
/// [`BlockingSessions`] on threads ([`Pool::run_blocking`]). A tool writes its workers once,
/// generic over the kind, instead of once per kind.
pub trait Drive<O>: Send + 'static {
    fn window<S: Send + 'static>(
        pool: &mut Pool<S>,
        n: usize,
        plan: &WindowPlan,
        make: impl Fn(usize, S) -> O + Send,
        back: impl FnMut(O) -> S + Send,
    ) -> impl Future<Output = Result<WindowOutcome, String>> + Send;
}

impl<O: Operation + 'static> Drive<O> for AsyncSessions {
    fn window<S: Send + 'static>(
        pool: &mut Pool<S>,
        n: usize,
        plan: &WindowPlan,
        make: impl Fn(usize, S) -> O + Send,
        back: impl FnMut(O) -> S + Send,
    ) -> impl Future<Output = Result<WindowOutcome, String>> + Send {
        pool.run_async(n, plan, make, back)
    }
}

impl<O: BlockingOperation + 'static> Drive<O> for BlockingSessions {
    fn window<S: Send + 'static>(
        pool: &mut Pool<S>,
        n: usize,
        plan: &WindowPlan,
        make: impl Fn(usize, S) -> O + Send,
        back: impl FnMut(O) -> S + Send,
    ) -> impl Future<Output = Result<WindowOutcome, String>> + Send {
        pool.run_blocking(n, plan, make, back)
    }
}

impl<S: Send + 'static, K> Held<S, K> {
    /// Opens `size` sessions before anything is measured ([`Pool::open`]).
    pub async fn open(size: usize, connect: Connector<S>) -> Result<Held<S, K>, String> {
        Ok(Held::new(Pool::open(size, connect).await?))
    }

    /// Opens `size` sessions as a tool's workers: `boxed` makes the held sessions the tool's
    /// workers trait object (`|held| Box::new(held)`; [`worker_openers!`](crate::worker_openers)
    /// declares both kinds' openers).
    pub fn open_boxed<W: ?Sized + 'static>(
        size: usize,
        connect: Connector<S>,
        boxed: fn(Held<S, K>) -> Box<W>,
    ) -> Opened<W>
    where
        K: 'static,
    {
        Box::pin(async move {
            let held = Held::open(size, connect).await;
            Ok(boxed(held.map_err(TargetError::Other)?))
        })
    }

    /// Holds sessions already opened.
    pub fn new(pool: Pool<S>) -> Held<S, K> {
        Held {
            connect: pool.connect.clone(),
            pool,
            kind: PhantomData,
        }
    }

    /// Runs one window on the first `n` sessions, on tasks or threads as `K` drives them, and
    /// sums what its operations counted.
    pub async fn window<O: Settle<Session = S>>(
        &mut self,
        n: usize,
        plan: &WindowPlan,
        make: impl Fn(usize, S) -> O + Send,
    ) -> Result<(WindowOutcome, O::Tally), String>
    where
        K: Drive<O>,
    {
        let mut tally = O::Tally::default();
        let back = |op: O| op.settle(&mut tally);
        let outcome = K::window(&mut self.pool, n, plan, make, back).await?;
        Ok((outcome, tally))
    }
}

/// A window's operation after the window: it gives its session back and adds what it
/// counted (writes acknowledged, results returned) to the window's tally.
pub trait Settle {
    type Session;
    type Tally: Default + Send;

    fn settle(self, tally: &mut Self::Tally) -> Self::Session;
}

async fn open_on_lane<S: Send + 'static>(slot: usize, connect: &Connector<S>) -> Result<S, String> {
    Lanes::shared()
        .spawn(slot, connect())
        .await
        .map_err(|e| format!("opening a session failed: {e}"))?
}

/// After a fatal error, which session failed is not known: reopen them all, which is cheap
/// and never measured.
fn keep_healthy<O, S>(
    ops: Vec<Option<O>>,
    outcome: &WindowOutcome,
    mut back: impl FnMut(O) -> S,
) -> Vec<Option<S>> {
    let fatal = outcome.recorder.fatal.is_some();
    ops.into_iter()
        .map(|op| op.filter(|_| !fatal).map(&mut back))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::OpError;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    struct Session {
        id: usize,
        die: bool,
    }

    struct Op(Session);

    impl Operation for Op {
        async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
            tokio::time::sleep(Duration::from_millis(1)).await;
            if self.0.die {
                Err(OpError::Fatal("connection closed".into()))
            } else {
                Ok(())
            }
        }
    }

    #[tokio::test]
    async fn lost_sessions_are_reopened_before_the_next_window() {
        let opened = Arc::new(AtomicUsize::new(0));
        let counter = opened.clone();
        let connect: Connector<Session> = Arc::new(move || {
            let id = counter.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(Session { id, die: id == 1 }) })
        });
        let mut pool = Pool::open(2, connect).await.unwrap();
        let plan = WindowPlan {
            duration: Duration::from_millis(30),
            ceiling: Duration::from_secs(5),
            rate_per_s: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            progress: None,
        };
        let outcome = pool
            .run_async(2, &plan, |_, s| Op(s), |op| op.0)
            .await
            .unwrap();
        assert!(outcome.recorder.fatal.is_some());
        let outcome = pool
            .run_async(2, &plan, |_, s| Op(s), |op| op.0)
            .await
            .unwrap();
        assert!(
            outcome.recorder.fatal.is_none(),
            "sessions 2 and 3 are healthy"
        );
        assert_eq!(opened.load(Ordering::SeqCst), 4);
        let ids: Vec<usize> = pool.sessions.iter().flatten().map(|s| s.id).collect();
        assert_eq!(ids, vec![2, 3]);
    }

    #[tokio::test]
    async fn a_failing_connector_is_reported() {
        let connect: Connector<Session> =
            Arc::new(|| Box::pin(async { Err("cannot connect: refused".to_owned()) }));
        let error = Pool::open(1, connect).await.err().unwrap();
        assert_eq!(error, "cannot connect: refused");
    }
}
