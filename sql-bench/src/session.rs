//! The measured path of the crud suite, below both targets and suites: the session traits a
//! timed key/value operation goes through, the operation each worker runs (its keys and its
//! random stream), a session that writes to a primary and reads from a replica, and a system's
//! worker sessions (async or blocking) that run one window. Targets implement the session
//! traits; the window itself is common's.

pub mod ycsb;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::driver::{BlockingOperation, OpError, Operation};
use common::pool::{BoxFuture, Connector, Drive, Held, Settle};
use common::watchdog::Interrupt;
use common::window::{WindowOutcome, WindowPlan};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// Write keys are `window << 47 | worker << 35 | sequence`: unique across every window and
/// worker of a run without any coordination between workers.
const WINDOW_SHIFT: u32 = 47;
const WORKER_SHIFT: u32 = 35;
/// The most connections a workload can use (12 bits of the key).
pub const MAX_CONNECTIONS: u32 = 1 << (WINDOW_SHIFT - WORKER_SHIFT);
/// The most windows a run can measure (16 bits of the key, less one so the end of the last
/// window's key range still fits in an `i64`).
pub const MAX_WINDOWS: u64 = (1 << (63 - WINDOW_SHIFT)) - 1;

/// One connection's measured key/value operations, for async clients.
pub trait KvSession: Send + 'static {
    fn insert(&mut self, key: i64, value: &str)
    -> impl Future<Output = Result<(), OpError>> + Send;
    /// Reads one row by key and returns the length of its value.
    fn read(&mut self, key: i64) -> impl Future<Output = Result<usize, OpError>> + Send;

    /// Stops on the server the statement whose call just passed the ceiling
    /// ([`Operation::cancel`]); nothing to do for an engine that cannot.
    fn cancel(&mut self) -> impl Future<Output = Result<(), OpError>> + Send {
        std::future::ready(Ok(()))
    }
}

/// The same for synchronous clients, each driven from its own thread.
pub trait BlockingKvSession: Send + 'static {
    fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError>;
    fn read(&mut self, key: i64) -> Result<usize, OpError>;

    /// How the statement in progress is stopped from another thread
    /// ([`BlockingOperation::interrupt`]); `None` for an engine that cannot.
    fn interrupt(&self) -> Option<Interrupt> {
        None
    }
}

/// What each operation of a window does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Write,
    Read,
    Mixed,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Write => "write",
            Kind::Read => "read",
            Kind::Mixed => "mixed",
        }
    }

    /// The share of operations that are reads.
    pub fn read_fraction(self) -> f64 {
        match self {
            Kind::Write => 0.0,
            Kind::Read => 1.0,
            Kind::Mixed => 0.5,
        }
    }
}

/// What one window's operations draw on; cheap to clone into every worker.
#[derive(Clone, Debug)]
pub struct Mix {
    pub kind: Kind,
    /// Reads pick a key uniformly in `1..=read_keys`.
    pub read_keys: i64,
    /// Every read must return a value of this many bytes.
    pub value_len: usize,
    /// Values written, cycled through (pre-generated: nothing is generated per operation).
    pub values: Arc<[String]>,
    /// This window's number, unique in the run; it owns a disjoint range of write keys.
    pub window: u64,
    pub seed: u64,
    /// The run-wide index of this process's first connection: 0 alone, the start of its
    /// share on one of several workers (`common::scale::Segment`), so the keys each connection
    /// writes and the stream it reads with stay its own across machines.
    pub first_connection: usize,
}

impl Mix {
    /// The write keys of this window: `low..high`.
    pub fn write_key_range(&self) -> (i64, i64) {
        let low = (self.window as i64) << WINDOW_SHIFT;
        (low, low + (1 << WINDOW_SHIFT))
    }
}

/// Worker `worker`'s operation for one window: a session and its own random stream.
pub struct CrudOp<S> {
    session: S,
    mix: Mix,
    rng: ChaCha8Rng,
    key_base: i64,
    inserts_acknowledged: u64,
}

impl<S> CrudOp<S> {
    pub fn new(worker: usize, session: S, mix: &Mix) -> CrudOp<S> {
        let worker = mix.first_connection + worker;
        let stream = (mix.window << 16) | worker as u64;
        CrudOp {
            session,
            mix: mix.clone(),
            rng: common::data::rng(mix.seed, stream),
            key_base: mix.write_key_range().0 | ((worker as i64) << WORKER_SHIFT),
            inserts_acknowledged: 0,
        }
    }

    /// The next step: `Some(key)` to read, `None` to write.
    #[inline]
    fn next_read(&mut self) -> Option<i64> {
        let read = match self.mix.kind {
            Kind::Write => false,
            Kind::Read => true,
            Kind::Mixed => self.rng.random_bool(0.5),
        };
        read.then(|| self.rng.random_range(1..=self.mix.read_keys))
    }

    #[inline]
    fn write_key(&self, seq: u64) -> i64 {
        self.key_base + seq as i64
    }

    #[inline]
    fn check_read(&self, key: i64, len: usize) -> Result<(), OpError> {
        if len == self.mix.value_len {
            Ok(())
        } else {
            Err(OpError::Failed(format!(
                "key {key} returned a value of {len} bytes; {} were written",
                self.mix.value_len
            )))
        }
    }
}

impl<S: KvSession> Operation for CrudOp<S> {
    async fn call(&mut self, seq: u64) -> Result<(), OpError> {
        match self.next_read() {
            Some(key) => {
                let len = self.session.read(key).await?;
                self.check_read(key, len)
            }
            None => {
                let key = self.write_key(seq);
                let value = &self.mix.values[seq as usize % self.mix.values.len()];
                self.session.insert(key, value).await?;
                self.inserts_acknowledged += 1;
                Ok(())
            }
        }
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.session.cancel().await
    }
}

/// A crud window's tally: the inserts the system confirmed.
impl<S> Settle for CrudOp<S> {
    type Session = S;
    type Tally = u64;

    fn settle(self, inserts_acknowledged: &mut u64) -> S {
        *inserts_acknowledged += self.inserts_acknowledged;
        self.session
    }
}

impl<S: BlockingKvSession> BlockingOperation for CrudOp<S> {
    fn interrupt(&self) -> Option<Interrupt> {
        self.session.interrupt()
    }

    fn call(&mut self, seq: u64) -> Result<(), OpError> {
        match self.next_read() {
            Some(key) => {
                let len = self.session.read(key)?;
                self.check_read(key, len)
            }
            None => {
                let key = self.write_key(seq);
                let value = &self.mix.values[seq as usize % self.mix.values.len()];
                self.session.insert(key, value)?;
                self.inserts_acknowledged += 1;
                Ok(())
            }
        }
    }
}

/// A worker's session that writes to the primary and reads from a replica when it has one.
pub struct Routed<S> {
    pub writer: S,
    pub reader: Option<S>,
}

impl<S: Send + 'static> Routed<S> {
    /// Sessions that write on `primary` and read from `replicas` in turn (session i on replica
    /// i mod n), each end opened by `open`; with no replica, a session reads from the primary.
    pub fn connector<A: Clone + Send + Sync + 'static>(
        primary: A,
        replicas: Vec<A>,
        open: impl Fn(A) -> BoxFuture<'static, Result<S, String>> + Send + Sync + 'static,
    ) -> Connector<Routed<S>> {
        let next_replica = AtomicUsize::new(0);
        Arc::new(move || {
            let replica = (!replicas.is_empty()).then(|| {
                replicas[next_replica.fetch_add(1, Ordering::Relaxed) % replicas.len()].clone()
            });
            let writer = open(primary.clone());
            let reader = replica.map(&open);
            Box::pin(async move {
                let writer = writer.await?;
                let reader = match reader {
                    Some(reader) => Some(reader.await?),
                    None => None,
                };
                Ok(Routed { writer, reader })
            })
        })
    }
}

impl<S: KvSession> KvSession for Routed<S> {
    async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        self.writer.insert(key, value).await
    }

    async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        match &mut self.reader {
            Some(reader) => reader.read(key).await,
            None => self.writer.read(key).await,
        }
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.writer.cancel().await?;
        match &mut self.reader {
            Some(reader) => reader.cancel().await,
            None => Ok(()),
        }
    }
}

/// One key/value window: what was measured, and how many inserts the system acknowledged
/// (checked afterwards against the rows it holds).
#[derive(Debug)]
pub struct KvWindow {
    pub outcome: WindowOutcome,
    pub inserts_acknowledged: u64,
}

/// A system's open worker sessions for the key/value workloads.
pub trait KvWorkers: Send {
    /// Runs one window on the first `n` sessions.
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<KvWindow, String>>;
}

common::worker_openers!(KvWorkers, KvSession, BlockingKvSession);

impl<S: Send + 'static, K: Drive<CrudOp<S>>> KvWorkers for Held<S, K> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<KvWindow, String>> {
        Box::pin(async move {
            let make = |i, s| CrudOp::new(i, s, mix);
            let (outcome, acknowledged) = self.window(n, plan, make).await?;
            Ok(KvWindow {
                outcome,
                inserts_acknowledged: acknowledged,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens every end of `connect` `n` times, as the pool does, and names what each end reached.
    fn ends(connect: Connector<Routed<String>>, n: usize) -> Vec<(String, Option<String>)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        (0..n)
            .map(|_| {
                let routed = runtime.block_on(connect()).unwrap();
                (routed.writer, routed.reader)
            })
            .collect()
    }

    #[test]
    fn routed_sessions_write_on_the_primary_and_read_from_the_replicas_in_turn() {
        let open = |address: &'static str| -> BoxFuture<'static, Result<String, String>> {
            Box::pin(async move { Ok(address.to_owned()) })
        };
        let routed = Routed::connector("primary", vec!["r1", "r2"], open);
        let reached: Vec<_> = ends(routed, 5)
            .into_iter()
            .map(|(writer, reader)| format!("{writer}/{}", reader.unwrap_or_default()))
            .collect();
        assert_eq!(
            reached,
            [
                "primary/r1",
                "primary/r2",
                "primary/r1",
                "primary/r2",
                "primary/r1"
            ]
        );
        let alone = Routed::connector("primary", Vec::new(), open);
        assert_eq!(
            ends(alone, 2),
            [("primary".to_owned(), None), ("primary".to_owned(), None)]
        );
    }

    #[test]
    fn write_keys_never_collide_across_windows_and_workers() {
        let mix = |window| Mix {
            kind: Kind::Write,
            read_keys: 1000,
            value_len: 4,
            values: vec!["abcd".to_owned()].into(),
            window,
            seed: 1,
            first_connection: 0,
        };
        let a = CrudOp::new(0, (), &mix(1));
        let b = CrudOp::new(1, (), &mix(1));
        let c = CrudOp::new(0, (), &mix(2));
        let last_of_a = a.write_key((1 << WORKER_SHIFT) - 1);
        assert!(last_of_a < b.write_key(0));
        let (low, high) = mix(1).write_key_range();
        assert!(low <= a.write_key(0) && last_of_a < high);
        assert_eq!(c.write_key(0), high);
        // A second machine's first connection is the run's third: its keys are the third's,
        // never the first's.
        let on_second_worker = CrudOp::new(
            0,
            (),
            &Mix {
                first_connection: 2,
                ..mix(1)
            },
        );
        assert_eq!(
            on_second_worker.write_key(7),
            CrudOp::new(2, (), &mix(1)).write_key(7)
        );
        assert!(on_second_worker.write_key(0) > b.write_key((1 << WORKER_SHIFT) - 1));
        let max_window = CrudOp::new(MAX_CONNECTIONS as usize - 1, (), &mix(MAX_WINDOWS - 1));
        assert!(
            max_window.write_key(5) > 0,
            "the largest key stays positive"
        );
    }

    #[test]
    fn mixed_is_half_reads_and_reads_stay_in_the_table() {
        let mix = Mix {
            kind: Kind::Mixed,
            read_keys: 1000,
            value_len: 4,
            values: vec!["abcd".to_owned()].into(),
            window: 3,
            seed: 42,
            first_connection: 0,
        };
        let mut op = CrudOp::new(0, (), &mix);
        let reads: Vec<i64> = (0..10_000).filter_map(|_| op.next_read()).collect();
        assert!((4_800..=5_200).contains(&reads.len()), "{}", reads.len());
        assert!(reads.iter().all(|k| (1..=1000).contains(k)));
    }
}
