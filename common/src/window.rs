//! One measured window across N workers: start them together, stop them at the deadline,
//! give up on any still busy after the ceiling (for async workers, after the ceiling and the
//! time a cancellation may take), merge what they measured.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::cputime::{ThreadClock, busy_share, process_cpu_ns};
use crate::driver::{BlockingOperation, CANCEL_WAIT, Operation, WorkerCtx, drive, drive_blocking};
use crate::lanes::Lanes;
use crate::pacing::Pace;
use crate::progress::ProgressTx;
use crate::recorder::Recorder;
use crate::seconds::PerSecond;

/// How long before the window opens workers are started, so all begin on the same instant.
const START_LEAD: Duration = Duration::from_millis(5);
/// Beyond the driver's own bounds, how long an async worker may take to come back.
const GIVE_UP_SLACK: Duration = Duration::from_secs(1);

/// What every worker of a window shares.
#[derive(Clone, Debug)]
pub struct WindowPlan {
    pub duration: Duration,
    /// How long past the deadline a worker may take before the window is a `timeout`.
    pub ceiling: Duration,
    /// Open-loop rate across all workers; `None` is closed loop.
    pub rate_per_s: Option<f64>,
    pub interrupt: Arc<AtomicBool>,
    pub progress: Option<ProgressTx>,
}

/// The merged measurements of one window.
#[derive(Debug, Clone)]
pub struct WindowOutcome {
    pub recorder: Recorder,
    pub workers: usize,
    /// From the opening of the window until the last worker finished.
    pub elapsed: Duration,
    /// Workers still busy when the window gave up on them (the ceiling after it closed, plus
    /// the cancellation bound for async workers); their operations count as timeouts.
    pub stuck_workers: usize,
    /// The process's CPU time (all threads) spent during the window.
    pub client_cpu_ns: u64,
    /// How busy the client was over the window, from its threads' time running on a CPU
    /// ([`ThreadClock`]; 0–1). Async lanes: the busiest lane's share of the window, since one
    /// saturated lane limits the connections on it however idle the others are (the busiest is
    /// judged, never the average). Blocking workers: their threads' time together over as many
    /// cores as they could use. Time spent waiting for a core is not counted: on a machine
    /// shared with a local server that wait is the server's load, not the client's work. `None`
    /// when not measured.
    pub client_busy: Option<f64>,
    /// The least busy lane's share, so a report can show the spread beside the busiest.
    pub client_busy_least: Option<f64>,
    /// Whether `client_busy` is the client's own work (async lanes: the client library and
    /// fairbench) and can name the client as the limit. A blocking worker's thread runs
    /// whatever its operation calls, an embedded engine included, so its share is reported
    /// and never judged.
    pub busy_is_the_clients: bool,
    pub target_rate: Option<f64>,
}

impl WindowOutcome {
    /// Completed operations per second of window.
    pub fn throughput(&self) -> f64 {
        self.recorder.counts.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The busiest and the least busy of the lanes that ran the workers, from each one's CPU
    /// time over the window ([`client_busy`](Self::client_busy)).
    fn busy_spread(&mut self, cpu_ns: &[u64]) {
        let shares: Vec<f64> = cpu_ns
            .iter()
            .filter_map(|&ns| busy_share(ns, self.elapsed.as_nanos(), 1))
            .collect();
        self.client_busy = shares.iter().copied().reduce(f64::max);
        self.client_busy_least = shares.iter().copied().reduce(f64::min);
    }

    /// Operations per second the workers actually started, for comparing with the target rate.
    pub fn achieved_rate(&self) -> f64 {
        let c = self.recorder.counts;
        (c.ok + c.error + c.timeout) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl WindowPlan {
    fn contexts(&self, workers: usize) -> (Instant, Vec<WorkerCtx>) {
        let start = Instant::now() + START_LEAD;
        let contexts = (0..workers)
            .map(|worker| WorkerCtx {
                worker,
                start,
                duration: self.duration,
                pace: Pace::for_worker(self.rate_per_s, workers, worker),
                interrupt: self.interrupt.clone(),
                progress: self.progress.clone(),
                ceiling: self.ceiling,
            })
            .collect();
        (start, contexts)
    }

    fn outcome(&self, start: Instant, workers: usize, cpu_before: u64) -> WindowOutcome {
        WindowOutcome {
            recorder: Recorder::new(self.rate_per_s.is_some()),
            workers,
            elapsed: Instant::now().saturating_duration_since(start),
            stuck_workers: 0,
            client_cpu_ns: process_cpu_ns().saturating_sub(cpu_before),
            client_busy: None,
            client_busy_least: None,
            busy_is_the_clients: false,
            target_rate: self.rate_per_s,
        }
    }
}

impl WindowOutcome {
    fn absorb(&mut self, recorder: Option<Recorder>) {
        match recorder {
            Some(recorder) => self.recorder.merge(&recorder),
            None => {
                self.stuck_workers += 1;
                self.recorder.counts.timeout += 1;
            }
        }
    }
}

/// Runs one window with one task per operation, each on the lane of its slot (where its
/// session was opened). Returns the operations that came back
/// (in order; `None` for a worker abandoned at the ceiling) and the merged outcome.
pub async fn run_async<O: Operation + 'static>(
    ops: Vec<O>,
    plan: &WindowPlan,
) -> (Vec<Option<O>>, WindowOutcome) {
    let cpu_before = process_cpu_ns();
    let workers = ops.len();
    let (start, contexts) = plan.contexts(workers);
    let lanes = Lanes::shared();
    let busy_lanes = workers.min(lanes.len());
    let lanes_before = lanes.cpu_ns_each(busy_lanes);
    let tasks: Vec<_> = ops
        .into_iter()
        .zip(contexts)
        .enumerate()
        .map(|(slot, (mut op, ctx))| {
            lanes.spawn(slot, async move {
                let recorder = drive(&mut op, &ctx).await;
                (op, recorder, Instant::now())
            })
        })
        .collect();
    // A call that began just before the window closed passes the ceiling just before
    // window + ceiling, and its cancellation (bounded by CANCEL_WAIT in the driver) must still
    // reach the server: a worker abandoned in the middle of it would leave the statement
    // running there, beside the next window. The driver returns by then; a worker is given up
    // only when something outside its bounds holds it.
    let give_up = start + plan.duration + plan.ceiling + CANCEL_WAIT + GIVE_UP_SLACK;
    let mut returned = Vec::with_capacity(workers);
    let mut results = Vec::with_capacity(workers);
    let mut last_end = start;
    for mut task in tasks {
        match tokio::time::timeout_at(give_up.into(), &mut task).await {
            Ok(Ok((op, recorder, ended))) => {
                last_end = last_end.max(ended);
                returned.push(Some(op));
                results.push(Some(recorder));
            }
            Ok(Err(join_error)) => {
                let mut recorder = Recorder::new(plan.rate_per_s.is_some());
                recorder.record_error(&format!("worker failed: {join_error}"));
                recorder.fatal = Some(format!("worker failed: {join_error}"));
                returned.push(None);
                results.push(Some(recorder));
            }
            Err(_) => {
                task.abort();
                returned.push(None);
                results.push(None);
            }
        }
    }
    let mut outcome = plan.outcome(start, workers, cpu_before);
    let lanes_busy: Vec<u64> = lanes
        .cpu_ns_each(busy_lanes)
        .iter()
        .zip(&lanes_before)
        .map(|(after, before)| after.saturating_sub(*before))
        .collect();
    finish(&mut outcome, results, last_end, start);
    outcome.busy_spread(&lanes_busy);
    outcome.busy_is_the_clients = true;
    (returned, outcome)
}

/// Runs one window with one OS thread per operation, for synchronous clients. A thread still
/// busy at the ceiling is left behind (it cannot be cancelled) and its operation is lost.
pub fn run_blocking<O: BlockingOperation + 'static>(
    ops: Vec<O>,
    plan: &WindowPlan,
) -> (Vec<Option<O>>, WindowOutcome) {
    let cpu_before = process_cpu_ns();
    let workers = ops.len();
    let (start, contexts) = plan.contexts(workers);
    let (tx, rx) = std::sync::mpsc::channel();
    for (index, (mut op, ctx)) in ops.into_iter().zip(contexts).enumerate() {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || {
                let clock = ThreadClock::current();
                let before = clock.map_or(0, ThreadClock::running_ns);
                let recorder = drive_blocking(&mut op, &ctx);
                let cpu = clock
                    .map_or(0, ThreadClock::running_ns)
                    .saturating_sub(before);
                let _ = tx.send((index, op, recorder, Instant::now(), cpu));
            })
            .expect("spawning a worker thread");
    }
    drop(tx);
    let give_up = start + plan.duration + plan.ceiling;
    let mut returned: Vec<Option<O>> = (0..workers).map(|_| None).collect();
    let mut results: Vec<Option<Recorder>> = (0..workers).map(|_| None).collect();
    let mut last_end = start;
    let mut threads_busy = 0;
    for _ in 0..workers {
        let wait = give_up.saturating_duration_since(Instant::now());
        let Ok((index, op, recorder, ended, cpu)) = rx.recv_timeout(wait) else {
            break;
        };
        last_end = last_end.max(ended);
        threads_busy += cpu;
        returned[index] = Some(op);
        results[index] = Some(recorder);
    }
    let mut outcome = plan.outcome(start, workers, cpu_before);
    finish(&mut outcome, results, last_end, start);
    // More threads than cores each get a slice of one: their share together, over as many
    // cores as they could use, says how busy the machine kept them. Never judged (the engine's
    // work is in it), so no busiest thread either.
    outcome.client_busy = busy_share(threads_busy, outcome.elapsed.as_nanos(), workers);
    (returned, outcome)
}

fn finish(
    outcome: &mut WindowOutcome,
    mut results: Vec<Option<Recorder>>,
    last_end: Instant,
    start: Instant,
) {
    let all_returned = results.iter().all(Option::is_some);
    for recorder in results.iter_mut().flatten() {
        recorder.close_seconds();
    }
    // Each worker's seconds are decoded once and added second by second, not pairwise.
    let seconds = PerSecond::merge_all(
        results
            .iter()
            .flatten()
            .filter_map(|r| r.per_second.as_ref()),
    );
    for mut recorder in results {
        if let Some(recorder) = &mut recorder {
            recorder.per_second = None;
        }
        outcome.absorb(recorder);
    }
    outcome.recorder.per_second = seconds;
    if all_returned {
        outcome.elapsed = last_end.saturating_duration_since(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::OpError;

    struct Sleeper {
        each: Duration,
    }

    impl BlockingOperation for Sleeper {
        fn call(&mut self, _seq: u64) -> Result<(), OpError> {
            std::thread::sleep(self.each);
            Ok(())
        }
    }

    impl Operation for Sleeper {
        async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
            tokio::time::sleep(self.each).await;
            Ok(())
        }
    }

    /// Burns the client's CPU between awaits, as a client library that cannot keep up would.
    struct Spinner;

    impl Operation for Spinner {
        async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
            let until = Instant::now() + Duration::from_micros(200);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            tokio::task::yield_now().await;
            Ok(())
        }
    }

    /// Answers in 1 ms, except the 50th operation, which stalls for 200 ms: a server that
    /// stops mid-window.
    struct Staller;

    impl Operation for Staller {
        async fn call(&mut self, seq: u64) -> Result<(), OpError> {
            let stall = if seq == 50 { 200 } else { 1 };
            tokio::time::sleep(Duration::from_millis(stall)).await;
            Ok(())
        }
    }

    #[tokio::test]
    async fn in_open_loop_a_stall_is_in_the_latency_of_every_operation_it_delayed() {
        // 500/s for 600 ms: the operations due during the stall start late, and their latency
        // counts from when they were due; their service time does not include the wait.
        let plan = WindowPlan {
            rate_per_s: Some(500.0),
            ..plan(600, 5_000)
        };
        let (_, outcome) = run_async(vec![Staller], &plan).await;
        let recorder = &outcome.recorder;
        let latency = |q: f64| recorder.latency.value_at_quantile(q);
        let service = recorder
            .service
            .as_ref()
            .expect("open loop keeps service time");
        assert!(
            latency(1.0) >= 200_000_000,
            "the stalled operation: {}",
            latency(1.0)
        );
        // About 100 operations fell due during the stall and the backlog drains at 1 ms per
        // 2 ms tick, so well over a quarter of the samples carry tens of milliseconds of wait.
        assert!(
            latency(0.7) >= 20_000_000,
            "latency p70 {} ns: the backlog is missing",
            latency(0.7)
        );
        assert!(
            service.value_at_quantile(0.7) < 15_000_000,
            "service p70 {} ns: the wait was counted as service",
            service.value_at_quantile(0.7)
        );
        assert!(recorder.missed_ticks > 0);
    }

    #[tokio::test]
    async fn a_client_that_burns_its_lanes_is_busy_and_one_that_waits_is_not() {
        let (_, spinning) = run_async(vec![Spinner], &plan(300, 1_000)).await;
        let busy = spinning.client_busy.unwrap();
        let sleeper = Sleeper {
            each: Duration::from_millis(20),
        };
        let (_, waiting) = run_async(vec![sleeper], &plan(300, 1_000)).await;
        let idle = waiting.client_busy.unwrap();
        // On an idle machine the spinner is near 100%; tests running beside it share the cores
        // (a full suite on 2 cores left it 19%), so only the gap is asserted: a busy share that
        // counted waiting as work would put the sleeper beside the spinner.
        assert!(busy > 5.0 * idle, "{busy} vs {idle}");
        assert!(spinning.busy_is_the_clients);
        let sleepers = (0..2)
            .map(|_| Sleeper {
                each: Duration::from_millis(20),
            })
            .collect();
        let (_, blocking) = run_blocking(sleepers, &plan(300, 1_000));
        let idle = blocking.client_busy.unwrap();
        assert!(idle < 0.2 && !blocking.busy_is_the_clients, "{idle}");
    }

    /// Spins on its lane, or only waits: one saturated lane beside an idle one.
    struct OneOfEach {
        spin: bool,
    }

    impl Operation for OneOfEach {
        async fn call(&mut self, seq: u64) -> Result<(), OpError> {
            if self.spin {
                Spinner.call(seq).await
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(())
            }
        }
    }

    #[tokio::test]
    async fn the_busiest_lane_is_judged_not_the_average_of_the_lanes() {
        let lanes = Lanes::shared();
        if lanes.len() < 2 {
            return;
        }
        let before = lanes.cpu_ns_each(2);
        let ops = vec![OneOfEach { spin: true }, OneOfEach { spin: false }];
        let (_, outcome) = run_async(ops, &plan(300, 1_000)).await;
        let elapsed = outcome.elapsed.as_nanos() as f64;
        let shares: Vec<f64> = lanes
            .cpu_ns_each(2)
            .iter()
            .zip(&before)
            .map(|(after, before)| after.saturating_sub(*before) as f64 / elapsed)
            .collect();
        let (busiest, mean) = (shares[0].max(shares[1]), (shares[0] + shares[1]) / 2.0);
        assert!(
            busiest - mean > 0.1,
            "the spinning lane was not busier: {shares:?}"
        );
        let busy = outcome.client_busy.unwrap();
        assert!(
            (busy - busiest).abs() < 0.05,
            "{busy} judged; lanes {shares:?}"
        );
        let least = outcome.client_busy_least.unwrap();
        assert!(
            (least - shares[0].min(shares[1])).abs() < 0.05,
            "{least}; lanes {shares:?}"
        );
    }

    fn plan(duration_ms: u64, ceiling_ms: u64) -> WindowPlan {
        WindowPlan {
            duration: Duration::from_millis(duration_ms),
            ceiling: Duration::from_millis(ceiling_ms),
            rate_per_s: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            progress: None,
        }
    }

    #[test]
    fn blocking_workers_all_return_and_are_merged() {
        let ops = (0..4)
            .map(|_| Sleeper {
                each: Duration::from_millis(10),
            })
            .collect();
        let (back, outcome) = run_blocking(ops, &plan(200, 1_000));
        assert!(back.iter().all(Option::is_some));
        assert_eq!(outcome.stuck_workers, 0);
        // Four workers × at most 20 operations each (a sleep never ends early); a busy
        // machine may give fewer, but every worker ran at least once.
        let ok = outcome.recorder.counts.ok;
        assert!((4..=84).contains(&ok), "ok = {ok}");
        assert!(outcome.elapsed >= Duration::from_millis(200));
        // The workers' seconds are merged: they hold every completed operation.
        let seconds = outcome.recorder.per_second.as_ref().unwrap().histograms();
        assert_eq!(seconds.iter().map(|h| h.len()).sum::<u64>(), ok);
        assert!(
            outcome.throughput() <= 4.0 / 0.010,
            "{}",
            outcome.throughput()
        );
    }

    #[test]
    fn a_worker_past_the_ceiling_is_a_timeout() {
        let ops = vec![
            Sleeper {
                each: Duration::from_millis(5),
            },
            Sleeper {
                each: Duration::from_millis(600),
            },
        ];
        let (back, outcome) = run_blocking(ops, &plan(50, 100));
        assert!(back[0].is_some() && back[1].is_none());
        assert_eq!(outcome.stuck_workers, 1);
        assert_eq!(outcome.recorder.counts.timeout, 1);
    }

    /// Sleeps far past any ceiling on its first call, then answers at once; counts the
    /// cancellations it was asked for.
    struct Hangs {
        calls: u64,
        cancelled: Arc<std::sync::atomic::AtomicU64>,
        cancel_fails: bool,
        cancel_hangs: bool,
    }

    impl Operation for Hangs {
        async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
            self.calls += 1;
            if self.calls == 1 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(())
        }

        async fn cancel(&mut self) -> Result<(), OpError> {
            self.cancelled
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.cancel_hangs {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            if self.cancel_fails {
                return Err(OpError::Fatal("connection closed".into()));
            }
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_operation_past_the_ceiling_is_a_cancelled_timeout_and_the_worker_carries_on() {
        let cancelled = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let hangs = |cancel_fails| Hangs {
            calls: 0,
            cancelled: cancelled.clone(),
            cancel_fails,
            cancel_hangs: false,
        };
        let began = Instant::now();
        let (back, outcome) = run_async(vec![hangs(false)], &plan(600, 200)).await;
        // Cancelled at 200 ms, not abandoned at the end of the window plus the ceiling.
        assert!(back[0].is_some(), "the worker came back with its session");
        assert_eq!(outcome.stuck_workers, 0);
        assert_eq!(outcome.recorder.counts.timeout, 1);
        assert_eq!(cancelled.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(
            outcome.recorder.counts.ok > 0,
            "it carried on after the cancel"
        );
        assert!(began.elapsed() < Duration::from_secs(5));
        // The hung call is a timeout, never a latency sample of 200 ms or more.
        assert!(outcome.recorder.latency.max() < 200_000_000);

        // A session whose cancellation failed cannot be trusted: the worker stops.
        let (_, outcome) = run_async(vec![hangs(true)], &plan(600, 200)).await;
        assert_eq!(outcome.recorder.counts.timeout, 1);
        assert_eq!(outcome.recorder.counts.ok, 0);
        assert!(
            outcome
                .recorder
                .fatal
                .unwrap()
                .contains("connection closed")
        );
    }

    /// Quick calls until the window is nearly over, then one that hangs; its cancellation takes
    /// 300 ms.
    struct LateHang {
        began: Instant,
        cancelled: Arc<std::sync::atomic::AtomicU64>,
    }

    impl Operation for LateHang {
        async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
            if self.began.elapsed() >= Duration::from_millis(90) {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(())
        }

        async fn cancel(&mut self) -> Result<(), OpError> {
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.cancelled
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_begun_as_the_window_closes_is_cancelled_on_the_server_not_abandoned() {
        let cancelled = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let late = LateHang {
            began: Instant::now(),
            cancelled: cancelled.clone(),
        };
        // The window closes at 100 ms; the call that began at 90 ms passes the 200 ms ceiling
        // at 290 ms, and its cancellation ends at about 590 ms, past window + ceiling.
        let (back, outcome) = run_async(vec![late], &plan(100, 200)).await;
        assert_eq!(
            cancelled.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the cancellation ran to its end"
        );
        assert!(back[0].is_some(), "the worker came back with its session");
        assert_eq!(outcome.stuck_workers, 0);
        assert_eq!(outcome.recorder.counts.timeout, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_whose_cancellation_hangs_stops_once_the_cancel_wait_is_over() {
        let hangs = Hangs {
            calls: 0,
            cancelled: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            cancel_fails: false,
            cancel_hangs: true,
        };
        let began = Instant::now();
        let (_, outcome) = run_async(vec![hangs], &plan(50, 100)).await;
        // Its session cannot be trusted: the worker stops with the driver's reason.
        assert_eq!(outcome.stuck_workers, 0);
        assert!(outcome.recorder.counts.timeout >= 1);
        let fatal = outcome.recorder.fatal.unwrap();
        assert!(fatal.contains("took over 5s"), "{fatal}");
        // The window, the ceiling and the driver's bound on a cancellation, and no longer.
        assert!(
            began.elapsed() < Duration::from_millis(150) + CANCEL_WAIT + Duration::from_secs(2)
        );
    }
}
