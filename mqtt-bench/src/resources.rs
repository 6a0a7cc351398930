//! What a process on this machine costs, read from /proc: CPU time (all threads, or only the
//! threads whose names start with a prefix, for a broker running inside this process) and
//! resident memory, sampled through a window by a small thread of its own.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the sampler reads the resident size during a window.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Which process (and which of its threads) a figure is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A whole process, by PID.
    Process(u32),
    /// This process's threads whose names start with one of the prefixes (an embedded broker);
    /// its memory cannot be told apart from the client's, so only CPU is read.
    Threads(Vec<String>),
}

/// Clock ticks per second of /proc's CPU figures.
#[allow(unsafe_code)]
fn ticks_per_s() -> u64 {
    // SAFETY: sysconf reads a constant of the running system and has no side effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// User + system CPU in a `/proc/…/stat` line, in nanoseconds.
fn stat_cpu_ns(stat: &str) -> Option<u64> {
    // The command name is in parentheses and may hold spaces; fields count after it.
    let after = &stat[stat.rfind(')')? + 2..];
    let mut fields = after.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * (1_000_000_000 / ticks_per_s()))
}

impl Probe {
    /// CPU time used so far, in nanoseconds; `None` when the process is gone.
    pub fn cpu_ns(&self) -> Option<u64> {
        match self {
            Probe::Process(pid) => {
                stat_cpu_ns(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
            }
            Probe::Threads(prefixes) => {
                let mut total = 0;
                for entry in fs::read_dir("/proc/self/task").ok()?.flatten() {
                    let path = entry.path();
                    let name = fs::read_to_string(path.join("comm")).unwrap_or_default();
                    if prefixes
                        .iter()
                        .any(|p| name.trim_end().starts_with(p.as_str()))
                    {
                        let stat = fs::read_to_string(path.join("stat")).unwrap_or_default();
                        total += stat_cpu_ns(&stat).unwrap_or(0);
                    }
                }
                Some(total)
            }
        }
    }

    /// Resident memory now, in bytes (`None` for threads of this process).
    pub fn rss_bytes(&self) -> Option<u64> {
        match self {
            Probe::Process(pid) => rss_of(&format!("/proc/{pid}/status")),
            Probe::Threads(_) => None,
        }
    }

    pub fn alive(&self) -> bool {
        self.cpu_ns().is_some()
    }
}

/// `VmRSS` of a `/proc/…/status` file, in bytes.
pub fn rss_of(status_path: &str) -> Option<u64> {
    let text = fs::read_to_string(status_path).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// This process's resident memory, in bytes.
pub fn own_rss_bytes() -> Option<u64> {
    rss_of("/proc/self/status")
}

/// Samples a probe through one window: CPU at both ends, the largest resident size between.
pub struct Sampler {
    probe: Probe,
    cpu_start_ns: Option<u64>,
    peak_rss: Arc<AtomicU64>,
    own_peak_rss: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What one window cost the broker (and the client's memory).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub broker_cpu_ns: Option<u64>,
    pub broker_peak_rss_bytes: Option<u64>,
    pub client_peak_rss_bytes: Option<u64>,
}

impl Sampler {
    pub fn start(probe: Probe) -> Sampler {
        let peak_rss = Arc::new(AtomicU64::new(0));
        let own_peak_rss = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (probe, peak, own, stop) = (
                probe.clone(),
                peak_rss.clone(),
                own_peak_rss.clone(),
                stop.clone(),
            );
            std::thread::Builder::new()
                .name("rss-sampler".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(rss) = probe.rss_bytes() {
                            peak.fetch_max(rss, Ordering::Relaxed);
                        }
                        if let Some(rss) = own_rss_bytes() {
                            own.fetch_max(rss, Ordering::Relaxed);
                        }
                        std::thread::park_timeout(SAMPLE_EVERY);
                    }
                })
                .ok()
        };
        Sampler {
            cpu_start_ns: probe.cpu_ns(),
            probe,
            peak_rss,
            own_peak_rss,
            stop,
            thread,
        }
    }

    pub fn finish(mut self) -> Usage {
        let cpu_end = self.probe.cpu_ns();
        let rss_now = self.probe.rss_bytes();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
        let peak = self
            .peak_rss
            .load(Ordering::Relaxed)
            .max(rss_now.unwrap_or(0));
        let own = self
            .own_peak_rss
            .load(Ordering::Relaxed)
            .max(own_rss_bytes().unwrap_or(0));
        Usage {
            broker_cpu_ns: match (self.cpu_start_ns, cpu_end) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            broker_peak_rss_bytes: (peak > 0).then_some(peak),
            client_peak_rss_bytes: (own > 0).then_some(own),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_spaces_in_the_name_parse() {
        let line = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 100 50 0 0 20 0 1 0";
        let ticks = ticks_per_s();
        assert_eq!(stat_cpu_ns(line), Some(150 * (1_000_000_000 / ticks)));
        assert_eq!(stat_cpu_ns("garbage"), None);
    }

    #[test]
    fn this_process_can_be_probed() {
        let me = Probe::Process(std::process::id());
        assert!(me.alive());
        assert!(me.rss_bytes().unwrap() > 0);
        let lane = Probe::Threads(vec!["no-such-thread-name".into()]);
        assert_eq!(lane.cpu_ns(), Some(0));
        assert_eq!(lane.rss_bytes(), None);
        let sampler = Sampler::start(me);
        let usage = sampler.finish();
        assert!(usage.client_peak_rss_bytes.unwrap() > 0);
        assert!(usage.broker_peak_rss_bytes.is_some());
        assert!(!Probe::Process(u32::MAX).alive());
    }
}
