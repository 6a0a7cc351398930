//! A process as /proc shows it: which process listens on a loopback port, the CPU time and
//! resident memory of a process (or of this process's own named threads), sampled around a
//! window, so a report can put a server's cost beside the client's.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The process listening on TCP `port` on this machine, found through the socket's inode in
/// /proc/net/tcp{,6} and the owners' /proc/<pid>/fd links. `None` when it cannot be seen (not
/// local, or another user's process without the right to read its file descriptors).
pub fn listening_pid(port: u16) -> Option<u32> {
    let inodes: Vec<u64> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| fs::read_to_string(path).ok())
        .flat_map(|table| listening_inodes(&table, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = fs::read_link(fd.path())
                && wanted.iter().any(|w| link.as_os_str() == w.as_str())
            {
                return Some(pid);
            }
        }
    }
    None
}

/// The inodes of sockets in state LISTEN (0A) on `port` in one /proc/net/tcp table.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let (_, port_hex) = local.rsplit_once(':')?;
            let listening = *fields.get(3)? == "0A";
            (listening && u16::from_str_radix(port_hex, 16).ok()? == port)
                .then(|| fields.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// User + system CPU time of process `pid` (all its threads), in nanoseconds, from
/// /proc/<pid>/stat (clock-tick resolution, usually 10 ms).
pub fn process_cpu_ns(pid: u32) -> Option<u64> {
    stat_cpu_ns(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// User + system CPU time of process `pid` and of every process below it, in nanoseconds: a
/// server that forks per connection (PostgreSQL's backends are children of the postmaster) does
/// its work in the children. Each process counts its own time and that of its children already
/// reaped (cutime, cstime), so a backend that exits mid-window moves into its parent's figure
/// instead of out of the sum.
pub fn tree_cpu_ns(pid: u32) -> Option<u64> {
    let mut total = tree_member_cpu_ns(pid)?;
    let mut stack = children(pid);
    while let Some(child) = stack.pop() {
        total += tree_member_cpu_ns(child).unwrap_or(0);
        stack.extend(children(child));
    }
    Some(total)
}

fn tree_member_cpu_ns(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat_cpu_ns(&stat)? + stat_children_cpu_ns(&stat)?)
}

/// User + system CPU time of this process's threads whose name starts with one of
/// `prefixes` (an in-process server's own threads), in nanoseconds.
pub fn own_threads_cpu_ns(prefixes: &[String]) -> Option<u64> {
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

/// utime + stime of one `stat` line, in nanoseconds.
fn stat_cpu_ns(stat: &str) -> Option<u64> {
    // The command name may hold spaces; the fields after it start past the last ')'.
    let after = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = after.split_whitespace();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * 1_000_000_000 / clock_ticks_per_s())
}

/// cutime + cstime of one `stat` line (its reaped children), in nanoseconds.
fn stat_children_cpu_ns(stat: &str) -> Option<u64> {
    let after = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = after.split_whitespace();
    // cutime and cstime are fields 16 and 17 of the whole line, 14 and 15 after the name.
    let cutime: u64 = fields.nth(13)?.parse().ok()?;
    let cstime: u64 = fields.next()?.parse().ok()?;
    Some((cutime + cstime) * 1_000_000_000 / clock_ticks_per_s())
}

#[allow(unsafe_code)]
fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// Resident memory of a process: now, and its peak (the kernel's high-water mark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rss {
    pub current_bytes: u64,
    pub peak_bytes: u64,
}

/// The resident memory of process `pid`, from /proc/<pid>/status.
pub fn rss_of(pid: u32) -> Option<Rss> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(Rss {
        current_bytes: field("VmRSS:")?,
        peak_bytes: field("VmHWM:").unwrap_or(0),
    })
}

/// This process's resident memory.
pub fn own_rss() -> Option<Rss> {
    rss_of(std::process::id())
}

/// The resident memory of `pid` and every process below it (a server that forks workers).
pub fn tree_rss_bytes(pid: u32) -> Option<u64> {
    let mut total = rss_of(pid)?.current_bytes;
    let mut stack = children(pid);
    while let Some(child) = stack.pop() {
        total += rss_of(child).map_or(0, |r| r.current_bytes);
        stack.extend(children(child));
    }
    Some(total)
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// `--server-pid [NAME=]PID`: a local server's process, whose CPU and memory are read from
/// /proc. The name may be left out when there is one system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPid {
    pub name: Option<String>,
    pub pid: u32,
}

impl ServerPid {
    pub fn parse(text: &str) -> Result<ServerPid, String> {
        let (name, pid) = match text.split_once('=') {
            Some((name, pid)) => (Some(name.trim().to_owned()), pid),
            None => (None, text),
        };
        let pid: u32 = pid
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not [NAME=]PID (a process id is a number)"))?;
        if pid == 0 {
            return Err("a process id is never 0".into());
        }
        Ok(ServerPid { name, pid })
    }

    /// The one of `pids` that belongs to the system named `name` (of `systems` in all): by
    /// name, or the only unnamed one when there is one system.
    pub fn find<'a>(pids: &'a [ServerPid], name: &str, systems: usize) -> Option<&'a ServerPid> {
        pids.iter().find(|p| match &p.name {
            Some(n) => n == name,
            None => systems == 1,
        })
    }
}

/// What a [`Probe`] watches: a process, or this process's own threads of some names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Process(u32),
    /// An in-process server: its threads by name prefix (memory is the whole process's).
    Threads(Vec<String>),
}

impl Probe {
    /// The CPU time of the process and every process below it, or of the threads.
    pub fn cpu_ns(&self) -> Option<u64> {
        match self {
            Probe::Process(pid) => tree_cpu_ns(*pid),
            Probe::Threads(prefixes) => own_threads_cpu_ns(prefixes),
        }
    }

    pub fn rss_bytes(&self) -> Option<u64> {
        match self {
            Probe::Process(pid) => rss_of(*pid).map(|r| r.current_bytes),
            Probe::Threads(_) => None,
        }
    }

    pub fn alive(&self) -> bool {
        self.cpu_ns().is_some()
    }
}

/// How often a [`Sampler`] reads resident memory.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Watches a probe during one window: CPU time from start to finish, and the peak resident
/// memory of it and of this process, sampled on a thread of its own.
pub struct Sampler {
    probe: Probe,
    cpu_start_ns: Option<u64>,
    peak_rss: Arc<AtomicU64>,
    own_peak_rss: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What a [`Sampler`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_ns: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
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
                        if let Some(rss) = own_rss() {
                            own.fetch_max(rss.current_bytes, Ordering::Relaxed);
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
            .max(own_rss().map_or(0, |r| r.current_bytes));
        Usage {
            cpu_ns: match (self.cpu_start_ns, cpu_end) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            peak_rss_bytes: (peak > 0).then_some(peak),
            client_peak_rss_bytes: (own > 0).then_some(own),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_in_this_process_is_found_and_its_cpu_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listening_pid(port), Some(std::process::id()));
        drop(listener);
        assert_eq!(listening_pid(port), None);
        assert!(process_cpu_ns(std::process::id()).is_some());
        assert!(process_cpu_ns(u32::MAX).is_none());
    }

    #[test]
    fn the_tcp_table_is_read_by_state_and_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n   1: 0100007F:1F90 0100007F:C000 01 00000000:00000000 00:00000000 00000000     0        0 4343 1\n";
        assert_eq!(listening_inodes(table, 8080), vec![4242]);
        assert!(listening_inodes(table, 8081).is_empty());
    }

    #[test]
    fn stat_lines_with_spaces_in_the_name_parse() {
        let line = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 100 50 0 0 20 0 1 0";
        let expected = 150 * 1_000_000_000 / clock_ticks_per_s();
        assert_eq!(stat_cpu_ns(line), Some(expected));
        let line = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 100 50 7 3 20 0 1 0";
        let children = 10 * 1_000_000_000 / clock_ticks_per_s();
        assert_eq!(stat_children_cpu_ns(line), Some(children));
        assert_eq!(stat_cpu_ns("garbage"), None);
    }

    #[test]
    fn this_process_can_be_probed_and_sampled() {
        let me = Probe::Process(std::process::id());
        assert!(me.alive());
        assert!(me.rss_bytes().unwrap() > 0);
        let rss = own_rss().unwrap();
        assert!(rss.peak_bytes >= rss.current_bytes);
        assert!(tree_rss_bytes(std::process::id()).unwrap() >= rss.current_bytes);
        let lane = Probe::Threads(vec!["no-such-thread-name".into()]);
        assert_eq!(lane.cpu_ns(), Some(0));
        assert_eq!(lane.rss_bytes(), None);
        let usage = Sampler::start(me).finish();
        assert!(usage.client_peak_rss_bytes.unwrap() > 0);
        assert!(usage.peak_rss_bytes.is_some());
        assert!(!Probe::Process(u32::MAX).alive());
    }

    #[test]
    fn a_process_tree_counts_its_children_cpu() {
        // A child that burns CPU until it exits: while it runs it is below this process; once
        // reaped its time is in this process's cutime, so the tree's figure never drops.
        let before = tree_cpu_ns(std::process::id()).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let alive = tree_cpu_ns(std::process::id()).unwrap();
        child.wait().unwrap();
        let after = tree_cpu_ns(std::process::id()).unwrap();
        assert!(
            alive >= before && after >= alive,
            "{before} {alive} {after}"
        );
        assert!(
            after - before >= 10_000_000,
            "the child's CPU is counted: {before} → {after}"
        );
        assert_eq!(tree_cpu_ns(u32::MAX), None);
    }

    #[test]
    fn server_pids_take_an_optional_name() {
        let named = ServerPid::parse("pg=42").unwrap();
        assert_eq!((named.name.as_deref(), named.pid), (Some("pg"), 42));
        assert_eq!(ServerPid::parse("7").unwrap().name, None);
        assert!(ServerPid::parse("pg=x").is_err() && ServerPid::parse("0").is_err());
        let pids = [named, ServerPid::parse("7").unwrap()];
        assert_eq!(ServerPid::find(&pids, "pg", 2).unwrap().pid, 42);
        assert!(ServerPid::find(&pids[1..], "other", 2).is_none());
        assert_eq!(ServerPid::find(&pids[1..], "only", 1).unwrap().pid, 7);
    }
}
