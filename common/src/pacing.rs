//! When each operation of a worker should start: closed loop (as fast as the system answers)
//! or open loop (a fixed schedule, staggered across workers, measured from the intended start).

use std::time::{Duration, Instant};

/// How one worker paces its operations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// The next operation starts when the previous one ends.
    Closed,
    /// Operation `k` is due at `offset + k × interval` after the window opens.
    Open { interval_ns: f64, offset_ns: f64 },
}

impl Pace {
    /// The pace of `worker` out of `workers` sharing `rate_per_s` (none: closed loop). Workers
    /// are staggered by one global interval so the system sees an even stream, not bursts.
    pub fn for_worker(rate_per_s: Option<f64>, workers: usize, worker: usize) -> Pace {
        match rate_per_s {
            None => Pace::Closed,
            Some(rate) => {
                let global_interval_ns = 1e9 / rate;
                Pace::Open {
                    interval_ns: global_interval_ns * workers as f64,
                    offset_ns: global_interval_ns * worker as f64,
                }
            }
        }
    }

    pub fn is_open(&self) -> bool {
        matches!(self, Pace::Open { .. })
    }
}

/// What a worker does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// Start now; latency counts from `intended`.
    Go { intended: Instant },
    /// Nothing is due before this instant.
    WaitUntil(Instant),
    /// The window is over.
    Stop,
}

/// One worker's schedule inside one window.
#[derive(Clone, Debug)]
pub struct Schedule {
    start: Instant,
    deadline: Instant,
    pace: Pace,
    next: u64,
}

impl Schedule {
    pub fn new(start: Instant, duration: Duration, pace: Pace) -> Schedule {
        Schedule {
            start,
            deadline: start + duration,
            pace,
            next: 0,
        }
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Operations handed out so far.
    pub fn issued(&self) -> u64 {
        self.next
    }

    /// Decides the next step at `now`. In open loop a late worker gets `Go` at once with the
    /// original intended time, so the delay it suffered is counted, not skipped.
    #[inline]
    pub fn tick(&mut self, now: Instant) -> Tick {
        match self.pace {
            Pace::Closed => {
                if now >= self.deadline {
                    return Tick::Stop;
                }
                self.next += 1;
                Tick::Go { intended: now }
            }
            Pace::Open {
                interval_ns,
                offset_ns,
            } => {
                let due_ns = offset_ns + interval_ns * self.next as f64;
                let intended = self.start + Duration::from_nanos(due_ns as u64);
                // A worker that fell behind stops at the deadline too: the window is over,
                // and the ticks it never reached are counted by `unissued`.
                if intended >= self.deadline || now >= self.deadline {
                    Tick::Stop
                } else if now < intended {
                    Tick::WaitUntil(intended)
                } else {
                    self.next += 1;
                    Tick::Go { intended }
                }
            }
        }
    }

    /// Open loop: ticks due inside the window that were never started because the worker
    /// could not keep up. They count as missed.
    pub fn unissued(&self) -> u64 {
        match self.pace {
            Pace::Closed => 0,
            Pace::Open {
                interval_ns,
                offset_ns,
            } => {
                let window_ns = (self.deadline - self.start).as_nanos() as f64;
                let due = if window_ns > offset_ns {
                    ((window_ns - offset_ns) / interval_ns).ceil() as u64
                } else {
                    0
                };
                due.saturating_sub(self.next)
            }
        }
    }

    /// Whether an operation that started at `started`, due at `intended`, missed its tick:
    /// it began more than one interval late, so the schedule could not be held.
    #[inline]
    pub fn missed(&self, intended: Instant, started: Instant) -> bool {
        match self.pace {
            Pace::Closed => false,
            Pace::Open { interval_ns, .. } => {
                started.saturating_duration_since(intended).as_nanos() as f64 > interval_ns
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_staggers_workers_and_shares_the_rate() {
        let pace = Pace::for_worker(Some(1_000.0), 4, 1);
        assert_eq!(
            pace,
            Pace::Open {
                interval_ns: 4e6,
                offset_ns: 1e6
            }
        );
        assert_eq!(Pace::for_worker(None, 4, 1), Pace::Closed);
    }

    #[test]
    fn open_loop_waits_for_its_tick_then_counts_from_it() {
        let start = Instant::now();
        let pace = Pace::Open {
            interval_ns: 10e6,
            offset_ns: 0.0,
        };
        let mut schedule = Schedule::new(start, Duration::from_millis(35), pace);
        assert_eq!(schedule.tick(start), Tick::Go { intended: start });
        let second = start + Duration::from_millis(10);
        assert_eq!(schedule.tick(start), Tick::WaitUntil(second));
        // A worker 12 ms late still gets the tick it was due, and it counts as missed.
        let late = second + Duration::from_millis(12);
        assert_eq!(schedule.tick(late), Tick::Go { intended: second });
        assert!(schedule.missed(second, late));
        assert!(!schedule.missed(second, second + Duration::from_millis(9)));
        assert!(matches!(schedule.tick(late), Tick::Go { .. }));
        assert_eq!(schedule.issued(), 3);
        // The fourth tick (30 ms) is due inside the window, the fifth (40 ms) is not.
        assert!(matches!(
            schedule.tick(late + Duration::from_millis(10)),
            Tick::Go { .. }
        ));
        assert_eq!(schedule.tick(late + Duration::from_millis(10)), Tick::Stop);
        assert_eq!(schedule.unissued(), 0);
    }

    #[test]
    fn a_worker_far_behind_stops_at_the_deadline_and_counts_what_it_never_sent() {
        let start = Instant::now();
        let pace = Pace::Open {
            interval_ns: 1e6,
            offset_ns: 0.0,
        };
        let mut schedule = Schedule::new(start, Duration::from_millis(100), pace);
        assert!(matches!(schedule.tick(start), Tick::Go { .. }));
        assert_eq!(
            schedule.tick(start + Duration::from_millis(100)),
            Tick::Stop
        );
        assert_eq!(schedule.unissued(), 99);
    }

    #[test]
    fn closed_loop_runs_until_the_deadline() {
        let start = Instant::now();
        let mut schedule = Schedule::new(start, Duration::from_millis(5), Pace::Closed);
        let now = start + Duration::from_millis(1);
        assert_eq!(schedule.tick(now), Tick::Go { intended: now });
        assert_eq!(schedule.tick(start + Duration::from_millis(5)), Tick::Stop);
        assert!(!schedule.missed(start, now));
    }
}
