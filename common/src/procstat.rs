//! A local server's process as /proc shows it: which process listens on a loopback port, and
//! the CPU time it has used, so a report can put the server's cost per operation beside the
//! client's.

use std::fs;

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
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it start past the last ')'.
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000_000_000 / clock_ticks_per_s())
}

#[allow(unsafe_code)]
fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
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
}
