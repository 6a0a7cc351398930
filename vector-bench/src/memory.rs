//! Resident memory from /proc: this process (for the embedded index) and a server given its
//! PID, with its child processes (PostgreSQL serves each connection from a child).

use std::fs;

/// `VmRSS` and `VmHWM` (peak) of one process, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rss {
    pub current_bytes: u64,
    pub peak_bytes: u64,
}

/// This process's resident memory.
pub fn own() -> Option<Rss> {
    of_pid(std::process::id())
}

/// One process's resident memory, or `None` when it cannot be read.
pub fn of_pid(pid: u32) -> Option<Rss> {
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

/// The resident memory of `pid` and all its descendants, summed (shared pages, such as
/// PostgreSQL's shared buffers, are counted once per process that touched them).
pub fn of_tree(pid: u32) -> Option<u64> {
    let mut total = of_pid(pid)?.current_bytes;
    let mut stack = children(pid);
    while let Some(child) = stack.pop() {
        total += of_pid(child).map_or(0, |r| r.current_bytes);
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
        let path = task.path().join("children");
        if let Ok(text) = fs::read_to_string(path) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Parses `NAME=PID`.
pub fn parse_server_pid(text: &str) -> Result<(String, u32), String> {
    let (name, pid) = text
        .split_once('=')
        .ok_or_else(|| format!("--server-pid `{text}` must be NAME=PID"))?;
    let pid: u32 = pid
        .trim()
        .parse()
        .map_err(|_| format!("--server-pid `{text}`: `{pid}` is not a process id"))?;
    if of_pid(pid).is_none() {
        return Err(format!(
            "--server-pid `{text}`: no process {pid} is running here"
        ));
    }
    Ok((name.trim().to_owned(), pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_resident_memory() {
        let rss = own().unwrap();
        assert!(rss.current_bytes > 0 && rss.peak_bytes >= rss.current_bytes);
        assert!(of_tree(std::process::id()).unwrap() >= rss.current_bytes);
        let me = format!("self={}", std::process::id());
        assert_eq!(parse_server_pid(&me).unwrap().0, "self");
        assert!(parse_server_pid("nopid").is_err());
        assert!(parse_server_pid("x=notanumber").is_err());
    }
}
