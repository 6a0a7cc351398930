//! What the operating system allows and costs the client: the file-descriptor limit (raised to
//! the hard limit at start, and said when a run needs more), the ephemeral ports one source
//! address has toward one broker, whether a source address can be bound, and a thread's own
//! CPU and run-queue time (the client's lanes, in nanoseconds).

use std::net::{IpAddr, SocketAddr, TcpListener};

use serde::Serialize;

/// Descriptors kept for everything that is not a client socket (the runtime, files, the
/// embedded broker's listener, a result writer).
pub const FD_RESERVE: u64 = 64;

/// The process's open-file limit, before and after raising it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit the process started with.
    pub soft_before: u64,
    /// The soft limit now (raised to the hard limit when the kernel allows it).
    pub soft: u64,
    pub hard: u64,
    /// Why it could not go further, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

impl FdLimit {
    /// Client connections this process can hold at once.
    pub fn connections(&self) -> u64 {
        self.soft.saturating_sub(FD_RESERVE)
    }
}

/// Raises the soft open-file limit to the hard one (never lowers it). The hard limit itself
/// only moves with CAP_SYS_RESOURCE, which mqtt-bench does not try to use.
#[allow(unsafe_code)]
pub fn raise_fd_limit() -> FdLimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return FdLimit {
            soft_before: 0,
            soft: 0,
            hard: 0,
            note: Some("getrlimit(RLIMIT_NOFILE) failed"),
        };
    }
    let before = limit.rlim_cur;
    let mut result = FdLimit {
        soft_before: before,
        soft: before,
        hard: limit.rlim_max,
        note: None,
    };
    if limit.rlim_max > before {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct we own; raising the soft limit up to the
        // hard limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            result.soft = limit.rlim_max;
        } else {
            result.note = Some("setrlimit could not raise the soft limit to the hard limit");
        }
    }
    if result.note.is_none() {
        result.note = Some(
            "the hard limit is the ceiling: raising it needs CAP_SYS_RESOURCE (ulimit -Hn as root, or LimitNOFILE= for a service)",
        );
    }
    result
}

/// Ephemeral ports one source address has toward one broker address
/// (`/proc/sys/net/ipv4/ip_local_port_range`, 28,232 by Linux's default).
pub fn ephemeral_ports() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut words = text.split_whitespace();
            let low: u64 = words.next()?.parse().ok()?;
            let high: u64 = words.next()?.parse().ok()?;
            Some(high.saturating_sub(low) + 1)
        })
        .unwrap_or(28_232)
}

/// Whether a socket can be bound to `ip` on this machine (a source address must be local).
pub fn bindable(ip: IpAddr) -> Result<(), String> {
    TcpListener::bind(SocketAddr::new(ip, 0))
        .map(drop)
        .map_err(|e| format!("--source-addrs {ip}: cannot bind to it on this machine ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_raised_never_lowered() {
        let limit = raise_fd_limit();
        assert!(limit.soft >= limit.soft_before, "{limit:?}");
        assert!(limit.soft <= limit.hard, "{limit:?}");
        assert!(ephemeral_ports() > 1000);
        assert!(bindable("127.0.0.1".parse().unwrap()).is_ok());
        assert!(bindable("192.0.2.77".parse().unwrap()).is_err());
    }
}
