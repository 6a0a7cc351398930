//! Lanes: one single-threaded async runtime per core, each on its own OS thread, as pgbench
//! runs one thread per `-j`. A session is opened on a lane and always runs there, so its socket,
//! its task and its wake-ups stay on one thread: no work stealing, no cross-thread wake per
//! request, and the client's CPU per operation stays low.
//!
//! A lane with nothing to run sleeps on its sockets and timers at once, so a reply wakes it
//! the moment it arrives. While a [`Coalescing`] lives, it waits a set time first and then
//! takes everything that arrived meanwhile in one wake-up: for windows where one message
//! written to many of the client's sockets would otherwise wake it once per socket.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::cputime::ThreadClock;

pub struct Lanes {
    handles: Vec<Handle>,
    /// Each lane thread's scheduler clock, for how busy the client was during a window.
    clocks: Vec<Option<ThreadClock>>,
    park_wait: Arc<ParkWait>,
}

/// How long an idle lane waits before it sleeps: the shortest wait of the [`Coalescing`]
/// guards alive (windows of several workers in one process can overlap), 0 when none is.
#[derive(Default)]
struct ParkWait {
    /// What the lanes read each time they go idle, in nanoseconds.
    ns: AtomicU64,
    /// The wait of every guard alive; changed only under this lock, with `ns` after it.
    held: Mutex<Vec<u64>>,
}

impl ParkWait {
    fn update(&self, change: impl FnOnce(&mut Vec<u64>)) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut held);
        let shortest = held.iter().copied().min().unwrap_or(0);
        self.ns.store(shortest, Ordering::Relaxed);
    }
}

/// While it lives, an idle lane waits [`Lanes::coalesce`]'s delay before it sleeps (the
/// shortest, when several guards live); once every guard is dropped, lanes sleep at once again.
#[must_use = "lanes coalesce only while the guard lives"]
pub struct Coalescing {
    park_wait: Arc<ParkWait>,
    ns: u64,
}

impl Drop for Coalescing {
    fn drop(&mut self) {
        let ns = self.ns;
        self.park_wait.update(|held| {
            if let Some(at) = held.iter().position(|&n| n == ns) {
                held.swap_remove(at);
            }
        });
    }
}

impl Lanes {
    /// The process's lanes, one per available core, started on first use and kept for the
    /// life of the process.
    pub fn shared() -> &'static Lanes {
        static LANES: OnceLock<Lanes> = OnceLock::new();
        LANES.get_or_init(|| {
            let count = std::thread::available_parallelism().map_or(1, |n| n.get());
            Lanes::start(count)
        })
    }

    fn start(count: usize) -> Lanes {
        let park_wait = Arc::new(ParkWait::default());
        let (handles, clocks) = (0..count)
            .map(|index| {
                let (tx, rx) = std::sync::mpsc::channel();
                let wait = park_wait.clone();
                std::thread::Builder::new()
                    .name(format!("lane-{index}"))
                    .spawn(move || {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .on_thread_park(move || {
                                let ns = wait.ns.load(Ordering::Relaxed);
                                if ns > 0 {
                                    std::thread::sleep(Duration::from_nanos(ns));
                                }
                            })
                            .build()
                            .expect("building a lane's runtime");
                        tx.send((runtime.handle().clone(), ThreadClock::current()))
                            .expect("the lane's creator waits for its handle");
                        // Runs the lane's tasks until the process exits.
                        runtime.block_on(std::future::pending::<()>());
                    })
                    .expect("spawning a lane thread");
                rx.recv().expect("a lane reports its handle")
            })
            .unzip();
        Lanes {
            handles,
            clocks,
            park_wait,
        }
    }

    /// Until the guard is dropped, a lane with nothing to run waits `delay` before it sleeps
    /// on its sockets and timers, and then runs everything that became ready meanwhile: one
    /// wake-up for what would have been many, at the price of a wake up to `delay` late.
    /// `None` (and no change) for a zero delay.
    pub fn coalesce(&self, delay: Duration) -> Option<Coalescing> {
        if delay.is_zero() {
            return None;
        }
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.park_wait.update(|held| held.push(ns));
        Some(Coalescing {
            park_wait: self.park_wait.clone(),
            ns,
        })
    }

    /// CPU time so far ([`ThreadClock::running_ns`]) of each lane slots `0..slots` run on, in
    /// nanoseconds: a window judges its busiest lane, not their average.
    pub fn cpu_ns_each(&self, slots: usize) -> Vec<u64> {
        self.clocks
            .iter()
            .take(slots)
            .map(|clock| clock.map_or(0, ThreadClock::running_ns))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Runs `future` on the lane of slot `slot` (slots are spread round-robin).
    pub fn spawn<F>(&self, slot: usize, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handles[slot % self.handles.len()].spawn(future)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn slots_stay_on_their_lane() {
        let lanes = Lanes::shared();
        assert!(!lanes.is_empty());
        let name = |slot| {
            lanes.spawn(slot, async {
                std::thread::current().name().unwrap_or_default().to_owned()
            })
        };
        let first = name(0).await.unwrap();
        assert!(first.starts_with("lane-"), "{first}");
        assert_eq!(name(lanes.len()).await.unwrap(), first);
    }

    /// How long a message sent to a task waiting on a lane takes to be taken, the lane idle
    /// (asleep, or waiting to sleep) when it is sent; the quickest of three.
    fn wake_delay(lanes: &Lanes) -> Duration {
        (0..3)
            .map(|_| {
                let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
                let taken = lanes.spawn(0, async move { rx.await.unwrap().elapsed() });
                // The lane runs the task to its wait and goes idle.
                std::thread::sleep(Duration::from_millis(20));
                tx.send(Instant::now()).unwrap();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                runtime.block_on(taken).unwrap()
            })
            .min()
            .unwrap()
    }

    #[test]
    fn an_idle_lane_waits_before_it_sleeps_only_while_coalescing() {
        // Lanes of their own: the process's shared lanes serve other tests at the same time.
        let lanes = Lanes::start(1);
        let guard = lanes.coalesce(Duration::from_millis(400));
        assert!(guard.is_some());
        // Sent 20 ms into the lane's 400 ms wait: taken when the wait is over, not before.
        let coalesced = wake_delay(&lanes);
        assert!(coalesced >= Duration::from_millis(200), "{coalesced:?}");
        drop(guard);
        // The wait that was under way ends; from then on the lane sleeps at once.
        std::thread::sleep(Duration::from_millis(500));
        let at_once = wake_delay(&lanes);
        assert!(at_once < Duration::from_millis(200), "{at_once:?}");
        assert!(lanes.coalesce(Duration::ZERO).is_none());
    }

    #[test]
    fn overlapping_guards_keep_the_shortest_wait_until_the_last_is_dropped() {
        let lanes = Lanes::start(1);
        let wait = || lanes.park_wait.ns.load(Ordering::Relaxed);
        let long = lanes.coalesce(Duration::from_millis(2));
        let short = lanes.coalesce(Duration::from_micros(500));
        assert_eq!(wait(), 500_000);
        drop(short);
        assert_eq!(wait(), 2_000_000);
        let again = lanes.coalesce(Duration::from_millis(2));
        drop(long);
        assert_eq!(wait(), 2_000_000, "a guard still lives");
        drop(again);
        assert_eq!(wait(), 0);
    }
}
