//! A blocking worker's per-operation deadline: one watchdog thread beside the worker for the
//! window, which stops a call still running at the ceiling through the engine's own interrupt
//! (SQLite's `sqlite3_interrupt`), so the call counts as a timeout and the worker carries on
//! with its session instead of being abandoned holding it. The worker only stores two atomics
//! per call; the watchdog polls them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Stops, from another thread, the call a session is running (it then returns an error).
pub type Interrupt = Arc<dyn Fn() + Send + Sync>;

/// What the worker and its watchdog share.
struct Shared {
    origin: Instant,
    /// The running call's sequence number + 1; 0 between calls.
    running: AtomicU64,
    /// When the running call started, in ns since `origin`.
    since_ns: AtomicU64,
    /// The last call the watchdog interrupted (its sequence number + 1).
    fired: AtomicU64,
    stop: AtomicBool,
}

/// The watchdog of one blocking worker; stops its thread when dropped.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts a watchdog that calls `interrupt` once on any call still running `ceiling`
    /// after it started (checked every `ceiling / 8`, between 1 ms and 50 ms).
    pub fn start(ceiling: Duration, interrupt: Interrupt) -> Watchdog {
        let shared = Arc::new(Shared {
            origin: Instant::now(),
            running: AtomicU64::new(0),
            since_ns: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let poll = (ceiling / 8).clamp(Duration::from_millis(1), Duration::from_millis(50));
        let watched = shared.clone();
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || watch(&watched, ceiling, poll, &*interrupt))
            .expect("spawning a watchdog thread");
        Watchdog {
            shared,
            thread: Some(thread),
        }
    }

    /// Call `seq` starts (at `started`).
    #[inline]
    pub fn arm(&self, seq: u64, started: Instant) {
        let since = started.saturating_duration_since(self.shared.origin);
        self.shared
            .since_ns
            .store(since.as_nanos() as u64, Ordering::Relaxed);
        self.shared.running.store(seq + 1, Ordering::Release);
    }

    /// Call `seq` returned; true when the watchdog interrupted it.
    #[inline]
    pub fn disarm(&self, seq: u64) -> bool {
        self.shared.running.store(0, Ordering::Release);
        self.shared.fired.load(Ordering::Acquire) == seq + 1
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

fn watch(shared: &Shared, ceiling: Duration, poll: Duration, interrupt: &(dyn Fn() + Send + Sync)) {
    let ceiling_ns = ceiling.as_nanos().min(u128::from(u64::MAX)) as u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let running = shared.running.load(Ordering::Acquire);
        if running != 0 && shared.fired.load(Ordering::Relaxed) != running {
            let since = shared.since_ns.load(Ordering::Relaxed);
            let now = shared.origin.elapsed().as_nanos() as u64;
            // Still the same call: one that ended in between is never interrupted late.
            if now.saturating_sub(since) >= ceiling_ns
                && shared.running.load(Ordering::Acquire) == running
            {
                shared.fired.store(running, Ordering::Release);
                interrupt();
            }
        }
        std::thread::park_timeout(poll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_call_past_the_ceiling_is_interrupted_once_and_a_quick_one_never() {
        let stopped = Arc::new(AtomicBool::new(false));
        let interrupts = Arc::new(AtomicUsize::new(0));
        let (flag, count) = (stopped.clone(), interrupts.clone());
        let dog = Watchdog::start(
            Duration::from_millis(40),
            Arc::new(move || {
                count.fetch_add(1, Ordering::SeqCst);
                flag.store(true, Ordering::SeqCst);
            }),
        );
        // A call that would sleep 10 s, stopped by the interrupt.
        let began = Instant::now();
        dog.arm(0, began);
        while !stopped.load(Ordering::SeqCst) && began.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(dog.disarm(0), "the call was interrupted");
        let took = began.elapsed();
        assert!(
            took >= Duration::from_millis(40) && took < Duration::from_secs(2),
            "{took:?}"
        );
        // Quick calls after it are left alone.
        for seq in 1..50 {
            dog.arm(seq, Instant::now());
            std::thread::sleep(Duration::from_millis(1));
            assert!(!dog.disarm(seq));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(interrupts.load(Ordering::SeqCst), 1);
    }
}
