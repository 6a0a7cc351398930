//! The machine's calibration probe: two fixed, short measurements taken when a run starts and
//! when it ends (in every fork), so that `compare` can tell a change in the system from a
//! change in the machine under it. A CPU-bound loop's nanoseconds per iteration, and a
//! memory-latency chase (a random cycle through 64 MiB, each load depending on the one
//! before) in nanoseconds per load. Each is the fastest of 25 short repeats: the probe asks what
//! the machine can do, not how busy it happened to be for one repeat. The durable-write floor
//! (`Environment::durable_write_floor_ns`) is the third probe, measured already.

use std::hint::black_box;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Repeats of each probe; the fastest is kept. Each repeat is shorter than a scheduler's time
/// slice, so on a busy machine some repeat still runs without being preempted.
const REPEATS: usize = 25;
/// Iterations of the CPU loop per repeat (about 0.3 ms on a 2020s core).
const CPU_ITERATIONS: u64 = 200_000;
/// Slots of the memory chase: 16 Mi × 4 bytes = 64 MiB, past the last-level cache of most
/// machines, so the chase measures memory, not a cache shared with whoever else runs there.
const CHASE_SLOTS: usize = 16 << 20;
/// Loads per repeat of the chase (about 1 ms).
const CHASE_LOADS: usize = 10_000;

/// Two runs whose probes differ by more than this share were not measured on the same
/// machine state: `compare` gives them no verdict.
pub const TOLERANCE: f64 = 0.20;

/// One probe's figures.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// A dependent integer loop (multiply, xor, shift): nanoseconds per iteration.
    pub cpu_ns_per_iter: f64,
    /// A pointer chase through 64 MiB in random order: nanoseconds per load.
    pub memory_ns_per_load: f64,
}

/// The probe at the start and at the end of a run (or the median over its forks).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    pub start: Probe,
    pub end: Option<Probe>,
}

impl Calibration {
    /// The figure `compare` holds two runs to: the mean of start and end, each probe.
    pub fn typical(&self) -> Probe {
        match self.end {
            None => self.start,
            Some(end) => Probe {
                cpu_ns_per_iter: (self.start.cpu_ns_per_iter + end.cpu_ns_per_iter) / 2.0,
                memory_ns_per_load: (self.start.memory_ns_per_load + end.memory_ns_per_load) / 2.0,
            },
        }
    }
}

/// Measures the probe now (about 50 ms in all, most of it laying out the chase).
pub fn probe() -> Probe {
    Probe {
        cpu_ns_per_iter: fastest(|| cpu_loop(CPU_ITERATIONS)) / CPU_ITERATIONS as f64,
        memory_ns_per_load: {
            let cycle = random_cycle(CHASE_SLOTS);
            // Each repeat goes on from where the last one stopped: every load is to a slot not
            // visited yet (25 × 10 Ki of 16 Mi), so none finds its line in a cache.
            let mut at = 0u32;
            fastest(|| {
                at = chase(&cycle, at, CHASE_LOADS);
                u64::from(at)
            }) / CHASE_LOADS as f64
        },
    }
}

/// The fastest of [`REPEATS`] runs of `work`, in nanoseconds.
fn fastest(mut work: impl FnMut() -> u64) -> f64 {
    (0..REPEATS)
        .map(|_| {
            let began = Instant::now();
            black_box(work());
            began.elapsed().as_nanos() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn cpu_loop(iterations: u64) -> u64 {
    let mut x = black_box(0x9E37_79B9_7F4A_7C15_u64);
    for i in 0..iterations {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        x ^= x >> 29;
    }
    x
}

/// A single cycle through every slot (`slots` a power of two): slot i leads to slot
/// (a·i + c) mod slots, a full-period linear congruential map (c odd, a ≡ 1 mod 4), whose
/// successive addresses have no stride a prefetcher could follow. Laid out in one pass.
fn random_cycle(slots: usize) -> Vec<u32> {
    debug_assert!(slots.is_power_of_two());
    let mask = (slots - 1) as u64;
    (0..slots as u64)
        .map(|i| (i.wrapping_mul(0x5DEE_CE66D).wrapping_add(0xB) & mask) as u32)
        .collect()
}

/// Follows the cycle `loads` steps from `at`; where it stopped.
fn chase(cycle: &[u32], mut at: u32, loads: usize) -> u32 {
    for _ in 0..loads {
        at = cycle[at as usize];
    }
    at
}

/// How far apart two runs' probes are: candidate over baseline, each probe.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    pub cpu: f64,
    pub memory: f64,
}

impl Drift {
    pub fn between(baseline: &Calibration, candidate: &Calibration) -> Drift {
        let (b, c) = (baseline.typical(), candidate.typical());
        Drift {
            cpu: c.cpu_ns_per_iter / b.cpu_ns_per_iter,
            memory: c.memory_ns_per_load / b.memory_ns_per_load,
        }
    }

    /// Whether either probe moved beyond [`TOLERANCE`] (or is not a number).
    pub fn beyond_tolerance(&self) -> bool {
        [self.cpu, self.memory]
            .iter()
            .any(|r| !(r.is_finite() && (1.0 / (1.0 + TOLERANCE)..=1.0 + TOLERANCE).contains(r)))
    }

    /// `probe ratio cpu 1.02× · memory 0.97×` (candidate over baseline; above 1 is slower).
    pub fn line(&self) -> String {
        format!(
            "calibration probe, candidate over baseline (above 1 is a slower machine): cpu {:.2}× · memory {:.2}×",
            self.cpu, self.memory
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_measures_something_and_the_cycle_visits_every_slot() {
        let p = probe();
        assert!(
            p.cpu_ns_per_iter > 0.0 && p.cpu_ns_per_iter < 1_000.0,
            "{p:?}"
        );
        assert!(
            p.memory_ns_per_load > 0.0 && p.memory_ns_per_load < 100_000.0,
            "{p:?}"
        );
        let cycle = random_cycle(1024);
        let (mut at, mut seen) = (0u32, std::collections::BTreeSet::new());
        for _ in 0..1024 {
            seen.insert(at);
            at = cycle[at as usize];
        }
        assert_eq!(seen.len(), 1024, "one cycle through every slot");
    }

    #[test]
    fn a_probe_thirty_percent_off_is_beyond_tolerance_and_two_percent_is_not() {
        let base = Calibration {
            start: Probe {
                cpu_ns_per_iter: 1.0,
                memory_ns_per_load: 80.0,
            },
            end: None,
        };
        let mut off = base;
        off.start.cpu_ns_per_iter = 1.3;
        assert!(Drift::between(&base, &off).beyond_tolerance());
        off.start.cpu_ns_per_iter = 1.02;
        assert!(!Drift::between(&base, &off).beyond_tolerance());
        off.start.memory_ns_per_load = 80.0 / 1.3;
        assert!(Drift::between(&base, &off).beyond_tolerance());
    }
}
