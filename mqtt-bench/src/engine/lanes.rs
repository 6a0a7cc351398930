//! The client's own cost, read from its lanes' threads (each lane reads its own
//! `/proc/thread-self/schedstat`): CPU time and run-queue waiting in nanoseconds, apart from
//! an embedded broker's threads and from the rest of the process, and how busy the busiest
//! lane was, which is what says whether the client was the limit. Busy means on a CPU, as in
//! `common` and every other tool: time spent runnable but waiting for a core is shown apart and
//! never counted as the client's work (on a machine shared with the broker it is the broker's).

use std::time::{Duration, Instant};

use common::lanes::Lanes;
use serde::Serialize;

use common::cputime::ThreadClock;

/// A lane's time on a CPU and waiting for one, in nanoseconds (zeros where the kernel does not
/// keep schedstat).
async fn lane_times() -> Vec<(u64, u64)> {
    let lanes = Lanes::shared();
    let handles: Vec<_> = (0..lanes.len())
        .map(|lane| {
            lanes.spawn(lane, async {
                ThreadClock::current().map_or((0, 0), ThreadClock::running_and_waiting_ns)
            })
        })
        .collect();
    let mut times = Vec::with_capacity(handles.len());
    for handle in handles {
        times.push(handle.await.unwrap_or((0, 0)));
    }
    times
}

/// The lanes' times at the start of a window.
pub struct LaneClock {
    before: Vec<(u64, u64)>,
}

/// What the client's lanes spent during a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LaneUsage {
    /// CPU time of all lanes together.
    pub cpu_ns: u64,
    /// Per lane: its time on a CPU as a share of the window. At 0.9 or more the lane was the
    /// limit ([`common::protocol::CLIENT_LIMIT`]).
    pub busy_share: Vec<f64>,
    /// Per lane: time spent runnable but waiting for a CPU (another process had it), as a share
    /// of the window.
    pub waiting_share: Vec<f64>,
    pub elapsed_s: f64,
}

impl LaneUsage {
    /// The busiest lane's share of the window spent on a CPU.
    pub fn busiest(&self) -> f64 {
        self.busy_share.iter().copied().fold(0.0, f64::max)
    }

    /// The least busy lane's share, for the spread beside the busiest.
    pub fn least_busy(&self) -> Option<f64> {
        self.busy_share.iter().copied().reduce(f64::min)
    }

    /// The CPU share of the lane of the `slot`-th client (lanes are taken round-robin).
    pub fn busy_of(&self, slot: usize) -> f64 {
        if self.busy_share.is_empty() {
            return 0.0;
        }
        self.busy_share[slot % self.busy_share.len()]
    }
}

impl LaneClock {
    pub async fn start() -> LaneClock {
        LaneClock {
            before: lane_times().await,
        }
    }

    /// The lanes' usage from the start to now, as shares of the time since `opened`.
    pub async fn finish(self, opened: Instant) -> LaneUsage {
        let after = lane_times().await;
        let elapsed = Instant::now()
            .saturating_duration_since(opened)
            .max(Duration::from_micros(1));
        let window_ns = elapsed.as_nanos() as f64;
        let mut usage = LaneUsage {
            elapsed_s: elapsed.as_secs_f64(),
            ..LaneUsage::default()
        };
        for (&(cpu0, wait0), &(cpu1, wait1)) in self.before.iter().zip(&after) {
            let cpu = cpu1.saturating_sub(cpu0);
            let wait = wait1.saturating_sub(wait0);
            usage.cpu_ns += cpu;
            usage.busy_share.push(cpu as f64 / window_ns);
            usage.waiting_share.push(wait as f64 / window_ns);
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lane_that_spins_is_busy_and_one_that_waits_is_not() {
        let lanes = Lanes::shared();
        let clock = LaneClock::start().await;
        let opened = Instant::now();
        lanes
            .spawn(0, async {
                // Spins for 20 ms of its own CPU time, not of wall time: on a loaded machine a
                // spin bounded by the clock on the wall may get only a few ms of CPU.
                let clock = ThreadClock::current().expect("schedstat");
                let start = clock.running_ns();
                let give_up = Instant::now() + Duration::from_secs(5);
                while clock.running_ns() - start < 20_000_000 && Instant::now() < give_up {
                    for _ in 0..10_000 {
                        std::hint::spin_loop();
                    }
                }
            })
            .await
            .unwrap();
        let usage = clock.finish(opened).await;
        assert_eq!(usage.busy_share.len(), lanes.len());
        assert!(usage.cpu_ns >= 10_000_000, "{usage:?}");
        // 20 ms of CPU time on lane 0: busy is time on a CPU, whatever the lane waited.
        let window_s = usage.elapsed_s;
        assert!(usage.busy_of(0) * window_s >= 0.019, "{usage:?}");
        assert!(
            usage.busy_of(0) + usage.waiting_share[0] <= 1.05,
            "waiting was counted as busy: {usage:?}"
        );
    }
}
