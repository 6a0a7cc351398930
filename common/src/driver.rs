//! The hot loop of one worker: ask the schedule, call the operation, record. Nothing here
//! locks, formats or allocates per operation; progress goes out as an occasional snapshot.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::pacing::{Pace, Schedule, Tick};
use crate::progress::{ProgressTx, Snapshot};
use crate::recorder::Recorder;
use crate::watchdog::{Interrupt, Watchdog};

/// Why an operation did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// This operation failed; the connection still works and the worker carries on.
    #[error("{0}")]
    Failed(String),
    /// The connection is gone; the worker stops and the window records the error.
    #[error("{0}")]
    Fatal(String),
}

/// An operation that failed with `e`'s message; the worker carries on (`.map_err(failed)`).
pub fn failed(e: impl std::fmt::Display) -> OpError {
    OpError::Failed(e.to_string())
}

/// One worker's operation, driven from an async runtime. `seq` counts from 0 in each window.
pub trait Operation: Send {
    fn call(&mut self, seq: u64) -> impl Future<Output = Result<(), OpError>> + Send;

    /// Stops, on the server, the call that just passed the ceiling (a PostgreSQL cancel
    /// request, MariaDB's `KILL QUERY`, …); the call's future has been dropped already, so an
    /// HTTP request is gone with it. `Err` says the session cannot be trusted any more: the
    /// worker then stops. Bounded by [`CANCEL_WAIT`].
    fn cancel(&mut self) -> impl Future<Output = Result<(), OpError>> + Send {
        std::future::ready(Ok(()))
    }

    /// Called after each call that succeeded, with the latency the window recorded for it
    /// (from the intended start in open loop), so an operation that does several kinds of
    /// work can keep a histogram per kind. Most operations keep the default.
    #[inline]
    fn completed(&mut self, latency: Duration) {
        let _ = latency;
    }
}

/// How long a cancellation may take before the worker gives up on its session.
pub const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// One worker's operation for a synchronous client, driven from its own thread.
pub trait BlockingOperation: Send {
    fn call(&mut self, seq: u64) -> Result<(), OpError>;

    /// How another thread stops the call in progress (SQLite's `sqlite3_interrupt`): the
    /// worker's [`Watchdog`] uses it on a call still running at the ceiling, which then counts
    /// as a timeout while the worker carries on. `None` (the default): a call cannot be
    /// stopped from outside; one that returns past the ceiling is a timeout all the same.
    fn interrupt(&self) -> Option<Interrupt> {
        None
    }

    /// As [`Operation::completed`].
    #[inline]
    fn completed(&mut self, latency: Duration) {
        let _ = latency;
    }
}

/// What a worker needs to know about its window.
#[derive(Clone, Debug)]
pub struct WorkerCtx {
    pub worker: usize,
    pub start: Instant,
    pub duration: Duration,
    pub pace: Pace,
    /// Set on Ctrl-C: the worker finishes its current operation and stops.
    pub interrupt: Arc<AtomicBool>,
    pub progress: Option<ProgressTx>,
    /// How long one operation may take: past it, it counts as a timeout and is cancelled.
    pub ceiling: Duration,
}

/// How often a worker sends a snapshot to the progress display.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);

/// The bookkeeping shared by the async and the blocking loop.
struct Loop {
    schedule: Schedule,
    recorder: Recorder,
    next_snapshot: Instant,
}

impl Loop {
    fn new(ctx: &WorkerCtx) -> Loop {
        Loop {
            schedule: Schedule::new(ctx.start, ctx.duration, ctx.pace),
            recorder: Recorder::with_seconds(ctx.pace.is_open(), ctx.start),
            next_snapshot: ctx.start + SNAPSHOT_EVERY,
        }
    }

    /// Records one finished operation; returns false when the worker must stop, and the
    /// latency recorded when it succeeded.
    #[inline]
    fn finish(
        &mut self,
        ctx: &WorkerCtx,
        intended: Instant,
        started: Instant,
        result: Result<(), OpError>,
    ) -> (bool, Option<Duration>) {
        let ended = Instant::now();
        let mut latency = None;
        match result {
            Ok(()) => {
                let since_intended = ended - intended;
                self.recorder
                    .record_ok_at(ended, since_intended, ended - started);
                latency = Some(since_intended);
            }
            Err(OpError::Failed(message)) => self.recorder.record_error(&message),
            Err(OpError::Fatal(message)) => {
                self.recorder.record_error(&message);
                self.recorder.fatal = Some(message);
                return (false, None);
            }
        }
        if ctx.pace.is_open() {
            let missed = self.schedule.missed(intended, started);
            self.recorder
                .record_lag(started.saturating_duration_since(intended), missed);
        }
        if ended >= self.next_snapshot {
            self.next_snapshot = ended + SNAPSHOT_EVERY;
            if let Some(tx) = &ctx.progress {
                // A full channel only means the display is behind; never wait for it.
                let _ = tx.try_send(Snapshot::of(ctx.worker, &self.recorder));
            }
        }
        (true, latency)
    }

    /// The recorder, with the open-loop ticks that were due but never started counted as missed.
    /// An operation passed the ceiling: it is a timeout (never a latency sample), cancelled on
    /// the server; the worker carries on unless the cancellation failed.
    async fn timed_out<O: Operation>(&mut self, op: &mut O) -> bool {
        self.recorder.record_timeout();
        match tokio::time::timeout(CANCEL_WAIT, op.cancel()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                self.recorder.fatal =
                    Some(format!("cancelling an operation past the ceiling: {e}"));
                false
            }
            Err(_) => {
                self.recorder.fatal = Some(format!(
                    "cancelling an operation past the ceiling took over {}s",
                    CANCEL_WAIT.as_secs()
                ));
                false
            }
        }
    }

    fn done(mut self) -> Recorder {
        self.recorder.missed_ticks += self.schedule.unissued();
        self.recorder.close_seconds();
        self.recorder
    }

    fn interrupted(ctx: &WorkerCtx) -> bool {
        ctx.interrupt.load(Ordering::Relaxed)
    }
}

/// Runs one worker's window on an async runtime and returns what it measured.
pub async fn drive<O: Operation>(op: &mut O, ctx: &WorkerCtx) -> Recorder {
    tokio::time::sleep_until(ctx.start.into()).await;
    let mut run = Loop::new(ctx);
    loop {
        let started = Instant::now();
        let intended = match run.schedule.tick(started) {
            Tick::Stop => break,
            Tick::WaitUntil(due) => {
                tokio::time::sleep_until(due.into()).await;
                continue;
            }
            Tick::Go { intended } => intended,
        };
        if Loop::interrupted(ctx) {
            break;
        }
        let seq = run.schedule.issued() - 1;
        let result = match tokio::time::timeout(ctx.ceiling, op.call(seq)).await {
            Ok(result) => result,
            Err(_) => {
                if !run.timed_out(op).await {
                    break;
                }
                continue;
            }
        };
        let (go_on, latency) = run.finish(ctx, intended, started, result);
        if let Some(latency) = latency {
            op.completed(latency);
        }
        if !go_on {
            break;
        }
    }
    run.done()
}

/// Runs one worker's window on the calling thread and returns what it measured. A call still
/// running at the ceiling is interrupted when the operation can be (its [`Watchdog`]), and any
/// call that returns past the ceiling is a timeout, never a latency sample.
pub fn drive_blocking<O: BlockingOperation>(op: &mut O, ctx: &WorkerCtx) -> Recorder {
    let watchdog = op.interrupt().map(|i| Watchdog::start(ctx.ceiling, i));
    sleep_until(ctx.start);
    let mut run = Loop::new(ctx);
    loop {
        let started = Instant::now();
        let intended = match run.schedule.tick(started) {
            Tick::Stop => break,
            Tick::WaitUntil(due) => {
                sleep_until(due);
                continue;
            }
            Tick::Go { intended } => intended,
        };
        if Loop::interrupted(ctx) {
            break;
        }
        let seq = run.schedule.issued() - 1;
        if let Some(watchdog) = &watchdog {
            watchdog.arm(seq, started);
        }
        let result = op.call(seq);
        let interrupted = watchdog.as_ref().is_some_and(|w| w.disarm(seq));
        if interrupted || started.elapsed() >= ctx.ceiling {
            run.recorder.record_timeout();
            continue;
        }
        let (go_on, latency) = run.finish(ctx, intended, started, result);
        if let Some(latency) = latency {
            op.completed(latency);
        }
        if !go_on {
            break;
        }
    }
    run.done()
}

fn sleep_until(due: Instant) {
    let now = Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter {
        calls: u64,
        fail_at: Option<u64>,
    }

    impl BlockingOperation for Counter {
        fn call(&mut self, seq: u64) -> Result<(), OpError> {
            self.calls += 1;
            match self.fail_at {
                Some(n) if seq == n => Err(OpError::Fatal("connection closed".into())),
                Some(_) if seq % 2 == 1 => Err(OpError::Failed("odd".into())),
                _ => Ok(()),
            }
        }
    }

    impl Operation for Counter {
        async fn call(&mut self, seq: u64) -> Result<(), OpError> {
            BlockingOperation::call(self, seq)
        }
    }

    fn ctx(pace: Pace, duration: Duration) -> WorkerCtx {
        WorkerCtx {
            worker: 0,
            start: Instant::now(),
            duration,
            pace,
            interrupt: Arc::new(AtomicBool::new(false)),
            progress: None,
            ceiling: Duration::from_secs(120),
        }
    }

    #[test]
    fn open_loop_holds_its_rate() {
        let mut op = Counter {
            calls: 0,
            fail_at: None,
        };
        let pace = Pace::for_worker(Some(1_000.0), 1, 0);
        let recorder = drive_blocking(&mut op, &ctx(pace, Duration::from_millis(200)));
        // 200 ticks are due in 200 ms at 1,000/s; each operation is instant. On a busy machine
        // a tick can start late or be left unsent: never more than 200, and none lost uncounted.
        let ok = recorder.counts.ok;
        assert!(
            ok <= 200 && ok + recorder.missed_ticks >= 200,
            "{recorder:?}"
        );
        assert!(recorder.lag.is_some() && recorder.service.is_some());
        // Every completed operation is also in its second (all in the first one here).
        let seconds = recorder.per_second.as_ref().unwrap().histograms();
        assert_eq!(seconds.iter().map(|h| h.len()).sum::<u64>(), ok);
    }

    #[test]
    fn a_fatal_error_stops_the_worker_and_failures_are_counted() {
        let mut op = Counter {
            calls: 0,
            fail_at: Some(6),
        };
        let recorder = drive_blocking(&mut op, &ctx(Pace::Closed, Duration::from_secs(5)));
        assert_eq!(op.calls, 7);
        assert_eq!(recorder.counts.ok, 3);
        assert_eq!(recorder.counts.error, 4);
        assert_eq!(recorder.first_error.as_deref(), Some("odd"));
        assert_eq!(recorder.fatal.as_deref(), Some("connection closed"));
    }

    #[test]
    fn an_interrupt_stops_the_loop() {
        let mut op = Counter {
            calls: 0,
            fail_at: None,
        };
        let ctx = ctx(Pace::Closed, Duration::from_secs(60));
        ctx.interrupt.store(true, Ordering::Relaxed);
        let recorder = drive_blocking(&mut op, &ctx);
        assert_eq!(recorder.counts.ok, 0);
    }

    /// Counts what the driver reports back through `completed`.
    struct Observed {
        completed: u64,
        latency_ns: u128,
    }

    impl BlockingOperation for Observed {
        fn call(&mut self, seq: u64) -> Result<(), OpError> {
            if seq % 3 == 2 {
                Err(OpError::Failed("every third".into()))
            } else {
                Ok(())
            }
        }

        fn completed(&mut self, latency: Duration) {
            self.completed += 1;
            self.latency_ns += latency.as_nanos();
        }
    }

    #[test]
    fn every_success_and_only_a_success_is_reported_back_with_its_latency() {
        let mut op = Observed {
            completed: 0,
            latency_ns: 0,
        };
        let recorder = drive_blocking(&mut op, &ctx(Pace::Closed, Duration::from_millis(20)));
        assert_eq!(op.completed, recorder.counts.ok);
        assert!(recorder.counts.error > 0);
        let recorded_sum = recorder.latency.mean() * recorder.counts.ok as f64;
        // The histogram keeps 3 significant figures; the sums agree within that.
        let reported = op.latency_ns as f64;
        assert!(
            (recorded_sum - reported).abs() <= 0.01 * reported + 1e3,
            "{recorded_sum} vs {reported}"
        );
    }

    #[tokio::test]
    async fn the_async_loop_measures_like_the_blocking_one() {
        let mut op = Counter {
            calls: 0,
            fail_at: None,
        };
        let pace = Pace::for_worker(Some(500.0), 1, 0);
        let recorder = drive(&mut op, &ctx(pace, Duration::from_millis(100))).await;
        let ok = recorder.counts.ok;
        assert!(ok <= 50 && ok + recorder.missed_ticks >= 50, "{recorder:?}");
    }
}
