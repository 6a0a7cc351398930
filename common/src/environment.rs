//! The machine a run measured on: CPU, memory, kernel, load, and the durable-write floor
//! (the median latency of one 4 KiB O_DSYNC write), which bounds any single-connection
//! durable write.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Environment {
    pub cpu_model: String,
    pub cores: u32,
    pub memory_bytes: u64,
    pub kernel: String,
    pub hostname: String,
    /// 1, 5 and 15-minute load averages when the run started and ended.
    pub loadavg_start: [f64; 3],
    pub loadavg_end: Option<[f64; 3]>,
    pub durable_write_floor_ns: Option<u64>,
    pub durable_write_floor_path: Option<String>,
    pub load_gate: Option<LoadGate>,
    /// The calibration probe at the start and the end of the run (the median over its forks):
    /// what `compare` holds two runs' machines to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::calibration::Calibration>,
}

/// What the optional load gate saw before measuring.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LoadGate {
    pub threshold: f64,
    pub waited_s: f64,
    pub satisfied: bool,
    pub loadavg_1m: f64,
}

impl Environment {
    /// Reads the machine's description from /proc; fields it cannot read stay empty.
    pub fn capture() -> Environment {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let memory_bytes = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib * 1024)
            })
            .unwrap_or(0);
        Environment {
            cpu_model,
            cores,
            memory_bytes,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            loadavg_start: loadavg(),
            ..Environment::default()
        }
    }
}

fn read_trimmed(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The 1, 5 and 15-minute load averages.
pub fn loadavg() -> [f64; 3] {
    let text = read_trimmed("/proc/loadavg");
    let mut fields = text.split_whitespace().map(|f| f.parse().unwrap_or(0.0));
    [
        fields.next().unwrap_or(0.0),
        fields.next().unwrap_or(0.0),
        fields.next().unwrap_or(0.0),
    ]
}

/// Waits until the 1-minute load average is at most `threshold`, checking every 5 seconds,
/// for at most `max_wait`. Reports what it saw either way; never blocks longer.
pub fn wait_for_quiet(threshold: f64, max_wait: Duration, on_wait: impl FnMut(f64)) -> LoadGate {
    gate(
        threshold,
        max_wait,
        Duration::from_secs(5),
        || loadavg()[0],
        on_wait,
    )
}

/// [`wait_for_quiet`] on any load source, read every `poll`.
fn gate(
    threshold: f64,
    max_wait: Duration,
    poll: Duration,
    mut load_now: impl FnMut() -> f64,
    mut on_wait: impl FnMut(f64),
) -> LoadGate {
    let began = Instant::now();
    loop {
        let load = load_now();
        let waited = began.elapsed();
        if load <= threshold || waited >= max_wait {
            return LoadGate {
                threshold,
                waited_s: waited.as_secs_f64(),
                satisfied: load <= threshold,
                loadavg_1m: load,
            };
        }
        on_wait(load);
        std::thread::sleep(poll.min(max_wait - waited));
    }
}

/// Measures the median latency of a 4 KiB O_DSYNC write in `dir` (at most `budget` long,
/// at least 10 writes), using a temporary file it removes afterwards.
pub fn durable_write_floor(dir: &Path, budget: Duration) -> io::Result<u64> {
    let path = dir.join(format!(".fairbench-floor-{}", std::process::id()));
    let result = measure_floor(&path, budget);
    let _ = fs::remove_file(&path);
    result
}

fn measure_floor(path: &Path, budget: Duration) -> io::Result<u64> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DSYNC)
        .open(path)?;
    let block = [0x5au8; 4096];
    // The first write allocates the block; it is not what a steady WAL append costs.
    file.write_all_at(&block, 0)?;
    let began = Instant::now();
    let mut samples = Vec::with_capacity(256);
    while samples.len() < 10 || (began.elapsed() < budget && samples.len() < 1000) {
        let t = Instant::now();
        file.write_all_at(&block, 0)?;
        samples.push(t.elapsed().as_nanos() as u64);
    }
    samples.sort_unstable();
    Ok(samples[samples.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_describes_itself() {
        let env = Environment::capture();
        assert!(env.cores >= 1);
        assert!(env.memory_bytes > 0);
        assert!(!env.kernel.is_empty());
        assert!(env.loadavg_start.iter().all(|l| *l >= 0.0));
    }

    #[test]
    fn the_floor_is_measured_and_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let floor = durable_write_floor(dir.path(), Duration::from_millis(50)).unwrap();
        assert!(floor > 0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(durable_write_floor(Path::new("/nonexistent/dir"), Duration::ZERO).is_err());
    }

    #[test]
    fn the_gate_waits_for_the_load_to_fall_and_gives_up_at_its_bound() {
        let mut loads = [9.0, 8.0, 1.5].into_iter();
        let mut seen = Vec::new();
        let gate_ = gate(
            2.0,
            Duration::from_secs(10),
            Duration::from_millis(1),
            || loads.next().unwrap(),
            |load| seen.push(load),
        );
        assert!(gate_.satisfied);
        assert_eq!(seen, [9.0, 8.0], "told of each wait");
        assert_eq!(gate_.loadavg_1m, 1.5);
        assert!(gate_.waited_s < 5.0, "{}", gate_.waited_s);

        let began = Instant::now();
        let busy = gate(
            2.0,
            Duration::from_millis(60),
            Duration::from_millis(5),
            || 9.0,
            |_| {},
        );
        assert!(!busy.satisfied, "{busy:?}");
        assert_eq!(busy.loadavg_1m, 9.0);
        assert!(busy.waited_s >= 0.06, "waited its bound: {}", busy.waited_s);
        assert!(began.elapsed() < Duration::from_secs(5), "and no longer");
    }

    #[test]
    fn a_generous_gate_is_satisfied_at_once() {
        let gate = wait_for_quiet(10_000.0, Duration::from_secs(1), |_| panic!("waited"));
        assert!(gate.satisfied);
        assert!(gate.waited_s < 1.0);
    }
}
