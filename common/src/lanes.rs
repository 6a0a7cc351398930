//! Lanes: one single-threaded async runtime per core, each on its own OS thread, as pgbench
//! runs one thread per `-j`. A session is opened on a lane and always runs there, so its socket,
//! its task and its wake-ups stay on one thread: no work stealing, no cross-thread wake per
//! request, and the client's CPU per operation stays low.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::cputime::ThreadClock;

pub struct Lanes {
    handles: Vec<Handle>,
    /// Each lane thread's scheduler clock, for how busy the client was during a window.
    clocks: Vec<Option<ThreadClock>>,
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
        let (handles, clocks) = (0..count)
            .map(|index| {
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::Builder::new()
                    .name(format!("lane-{index}"))
                    .spawn(move || {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
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
        Lanes { handles, clocks }
    }

    /// CPU time so far ([`ThreadClock::running_ns`]) of the lanes slots `0..slots` run on, summed,
    /// in nanoseconds.
    pub fn cpu_ns(&self, slots: usize) -> u64 {
        self.clocks
            .iter()
            .take(slots)
            .map(|clock| clock.map_or(0, ThreadClock::running_ns))
            .sum()
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
}
