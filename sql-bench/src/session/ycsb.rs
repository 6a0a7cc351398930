//! The measured path of the ycsb suite, below both targets and suites: the session traits a
//! YCSB operation goes through (read, update one field, insert, scan from a key,
//! read-modify-write, delete, and the load's batch insert), and a system's worker sessions
//! (async or blocking) that run one window or the load. Targets implement the session traits;
//! the key space and the operation are in [`keys`] and [`op`].

pub mod keys;
pub mod op;
pub mod stats;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::cputime::process_cpu_ns;
use common::driver::{CANCEL_WAIT, OpError};
use common::lanes::Lanes;
use common::pool::{AsyncSessions, BlockingSessions, BoxFuture, Connector, Drive, Held};
use common::recorder::Recorder;
use common::watchdog::Interrupt;
use common::window::{WindowOutcome, WindowPlan};

use self::op::{Mix, Shape, YcsbOp};
use self::stats::OpStats;

/// What a read or a scan returned: records, fields and value bytes (every field is checked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fetched {
    pub records: usize,
    pub fields: usize,
    pub bytes: usize,
}

impl Fetched {
    /// One record with these field values.
    pub fn record<'a>(values: impl IntoIterator<Item = &'a str>) -> Fetched {
        let mut got = Fetched {
            records: 1,
            ..Fetched::default()
        };
        for v in values {
            got.fields += 1;
            got.bytes += v.len();
        }
        got
    }

    /// Adds another record's fields.
    pub fn add(&mut self, other: Fetched) {
        self.records += other.records;
        self.fields += other.fields;
        self.bytes += other.bytes;
    }
}

/// A record to load: its key and its field values (`field0`, `field1`, …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: String,
    pub values: Vec<String>,
}

/// One connection's YCSB operations, for async clients. `field` numbers a field (`field{n}`).
pub trait YcsbSession: Send + 'static {
    /// Every field of one record; `None` when the key is not there.
    fn read(&mut self, key: &str) -> impl Future<Output = Result<Option<Fetched>, OpError>> + Send;
    /// Sets one field; returns the records changed.
    fn update(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> impl Future<Output = Result<u64, OpError>> + Send;
    fn insert(
        &mut self,
        key: &str,
        values: &[&str],
    ) -> impl Future<Output = Result<(), OpError>> + Send;
    /// Up to `count` records from `start` on, in key order, every field.
    fn scan(
        &mut self,
        start: &str,
        count: usize,
    ) -> impl Future<Output = Result<Fetched, OpError>> + Send;
    /// Reads every field and sets one, in one transaction or the engine's nearest equivalent.
    fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> impl Future<Output = Result<Option<Fetched>, OpError>> + Send;
    /// Deletes one record; returns the records deleted.
    fn delete(&mut self, key: &str) -> impl Future<Output = Result<u64, OpError>> + Send;
    /// Inserts one batch of the load, as one request or transaction where the engine allows.
    fn insert_batch(
        &mut self,
        records: &[Record],
    ) -> impl Future<Output = Result<(), OpError>> + Send;

    /// When the call about to start passes the ceiling, for an engine that bounds each request
    /// on the server itself (MongoDB's `maxTimeMS`); the others keep the default.
    #[inline]
    fn deadline(&mut self, at: Instant) {
        let _ = at;
    }

    /// Stops on the server the statement whose call just passed the ceiling
    /// ([`Operation::cancel`](common::driver::Operation::cancel)); nothing to do for an engine
    /// that cannot.
    fn cancel(&mut self) -> impl Future<Output = Result<(), OpError>> + Send {
        std::future::ready(Ok(()))
    }
}

/// The same for synchronous clients, each driven from its own thread.
pub trait BlockingYcsbSession: Send + 'static {
    fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError>;
    fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError>;
    fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError>;
    fn scan(&mut self, start: &str, count: usize) -> Result<Fetched, OpError>;
    fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<Option<Fetched>, OpError>;
    fn delete(&mut self, key: &str) -> Result<u64, OpError>;
    fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError>;

    /// How the statement in progress is stopped from another thread
    /// ([`BlockingOperation::interrupt`]); `None` for an engine that cannot.
    fn interrupt(&self) -> Option<Interrupt> {
        None
    }
}

/// One window: what was measured in all, and per kind of operation.
#[derive(Debug)]
pub struct YcsbWindow {
    pub outcome: WindowOutcome,
    pub stats: OpStats,
}

/// What the load does: key numbers `first..first + records` in batches, spread over the
/// sessions (a run alone loads from 0; a worker of several its range, YCSB's
/// `insertstart`/`insertcount`).
#[derive(Clone, Debug)]
pub struct LoadPlan {
    pub first: u64,
    pub records: u64,
    pub batch: usize,
    pub shape: Shape,
    pub seed: u64,
    /// How long one batch may take before the load is a `timeout`.
    pub ceiling: Duration,
    pub interrupt: Arc<AtomicBool>,
}

impl LoadPlan {
    fn batches(&self) -> u64 {
        self.records.div_ceil(self.batch as u64)
    }

    /// The records of batch `index`, generated from the seed.
    pub fn batch_records(&self, index: u64) -> Vec<Record> {
        let low = self.first + index * self.batch as u64;
        let high = (low + self.batch as u64).min(self.first + self.records);
        (low..high)
            .map(|keynum| Record {
                key: keys::key_of(keynum),
                values: keys::record_values(
                    self.seed,
                    keynum,
                    self.shape.fields,
                    self.shape.field_length,
                ),
            })
            .collect()
    }
}

/// A system's open worker sessions for the ycsb suite.
pub trait YcsbWorkers: Send {
    /// Runs one window on the first `n` sessions.
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<YcsbWindow, String>>;

    /// Loads every record over `n` sessions of its own (opened before the clock starts),
    /// one batch at a time each; the outcome counts records, its histogram holds batches.
    fn load<'a>(
        &'a mut self,
        n: usize,
        plan: &'a LoadPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>>;
}

common::worker_openers!(YcsbWorkers, YcsbSession, BlockingYcsbSession);

impl<S: Send + 'static, K: Drive<YcsbOp<S>> + Load<S>> YcsbWorkers for Held<S, K> {
    fn run_window<'a>(
        &'a mut self,
        n: usize,
        mix: &'a Mix,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<YcsbWindow, String>> {
        Box::pin(async move {
            let make = |i, s| YcsbOp::new(i, s, mix);
            let (outcome, stats) = self.window(n, plan, make).await?;
            mix.keys.sweep();
            Ok(YcsbWindow { outcome, stats })
        })
    }

    fn load<'a>(
        &'a mut self,
        n: usize,
        plan: &'a LoadPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        K::load(&self.connect, n, plan)
    }
}

/// The load, over `n` sessions of its own: on their lanes for async sessions, on threads of
/// their own for blocking ones.
pub trait Load<S> {
    fn load<'a>(
        connect: &'a Connector<S>,
        n: usize,
        plan: &'a LoadPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>>;
}

impl<S: YcsbSession> Load<S> for AsyncSessions {
    fn load<'a>(
        connect: &'a Connector<S>,
        n: usize,
        plan: &'a LoadPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        Box::pin(async move {
            let lanes = Lanes::shared();
            let mut sessions = Vec::with_capacity(n);
            for slot in 0..n {
                let session = lanes
                    .spawn(slot, connect())
                    .await
                    .map_err(|e| format!("opening a load session failed: {e}"))??;
                sessions.push(session);
            }
            let cpu_before = process_cpu_ns();
            let start = Instant::now();
            let tasks: Vec<_> = sessions
                .into_iter()
                .enumerate()
                .map(|(slot, mut session)| {
                    let plan = plan.clone();
                    lanes.spawn(slot, async move {
                        let mut loaded = Loaded::new();
                        for index in (slot as u64..plan.batches()).step_by(n) {
                            if plan.interrupt.load(Ordering::Relaxed) {
                                break;
                            }
                            let records = plan.batch_records(index);
                            let began = Instant::now();
                            match tokio::time::timeout(plan.ceiling, session.insert_batch(&records))
                                .await
                            {
                                Ok(result) => loaded.settle(began, records.len(), result),
                                Err(_) => {
                                    // Stopped on the server too, or it would run on beside
                                    // the next system; the session is not used again.
                                    let _ =
                                        tokio::time::timeout(CANCEL_WAIT, session.cancel()).await;
                                    loaded.stuck = true;
                                    break;
                                }
                            }
                            if loaded.recorder.fatal.is_some() {
                                break;
                            }
                        }
                        loaded
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(n);
            for task in tasks {
                all.push(
                    task.await
                        .map_err(|e| format!("a load worker failed: {e}"))?,
                );
            }
            Ok(Loaded::outcome(all, start, cpu_before))
        })
    }
}

impl<S: BlockingYcsbSession> Load<S> for BlockingSessions {
    fn load<'a>(
        connect: &'a Connector<S>,
        n: usize,
        plan: &'a LoadPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        Box::pin(async move {
            let mut sessions = Vec::with_capacity(n);
            for _ in 0..n {
                sessions.push(connect().await?);
            }
            let plan = plan.clone();
            tokio::task::spawn_blocking(move || {
                let cpu_before = process_cpu_ns();
                let start = Instant::now();
                let threads: Vec<_> = sessions
                    .into_iter()
                    .enumerate()
                    .map(|(slot, mut session)| {
                        let plan = plan.clone();
                        std::thread::spawn(move || {
                            let mut loaded = Loaded::new();
                            for index in (slot as u64..plan.batches()).step_by(n) {
                                if plan.interrupt.load(Ordering::Relaxed) {
                                    break;
                                }
                                let records = plan.batch_records(index);
                                let began = Instant::now();
                                let result = session.insert_batch(&records);
                                loaded.settle(began, records.len(), result);
                                if began.elapsed() > plan.ceiling {
                                    loaded.stuck = true;
                                }
                                if loaded.stuck || loaded.recorder.fatal.is_some() {
                                    break;
                                }
                            }
                            loaded
                        })
                    })
                    .collect();
                let all: Vec<Loaded> = threads
                    .into_iter()
                    .map(|t| {
                        t.join()
                            .unwrap_or_else(|_| Loaded::failed("a load thread panicked"))
                    })
                    .collect();
                Ok(Loaded::outcome(all, start, cpu_before))
            })
            .await
            .map_err(|e| format!("the load's threads failed: {e}"))?
        })
    }
}

/// One load worker's tally: records loaded (the recorder's `ok`), batch latencies.
struct Loaded {
    recorder: Recorder,
    stuck: bool,
    ended: Instant,
}

impl Loaded {
    fn new() -> Loaded {
        Loaded {
            recorder: Recorder::new(false),
            stuck: false,
            ended: Instant::now(),
        }
    }

    fn failed(message: &str) -> Loaded {
        let mut loaded = Loaded::new();
        loaded.recorder.record_error(message);
        loaded.recorder.fatal = Some(message.to_owned());
        loaded
    }

    fn settle(&mut self, began: Instant, records: usize, result: Result<(), OpError>) {
        self.ended = Instant::now();
        let took = self.ended - began;
        match result {
            Ok(()) => {
                self.recorder.record_ok(took, took);
                // The recorder counted one batch; the cell counts records.
                self.recorder.counts.ok += records as u64 - 1;
            }
            Err(OpError::Failed(message)) => self.recorder.record_error(&message),
            Err(OpError::Fatal(message)) => {
                self.recorder.record_error(&message);
                self.recorder.fatal = Some(message);
            }
        }
    }

    fn outcome(all: Vec<Loaded>, start: Instant, cpu_before: u64) -> WindowOutcome {
        let workers = all.len();
        let mut recorder = Recorder::new(false);
        let mut stuck = 0;
        let mut last = start;
        for loaded in &all {
            recorder.merge(&loaded.recorder);
            stuck += usize::from(loaded.stuck);
            last = last.max(loaded.ended);
        }
        recorder.counts.timeout += stuck as u64;
        WindowOutcome {
            recorder,
            workers,
            elapsed: last.saturating_duration_since(start),
            stuck_workers: stuck,
            client_cpu_ns: process_cpu_ns().saturating_sub(cpu_before),
            // The load's threads are not clocked: how busy the client was is not measured.
            client_busy: None,
            client_busy_least: None,
            busy_is_the_clients: false,
            target_rate: None,
        }
    }
}
