//! The server's CPU beside the client's: where a system's server runs (on this machine, inside
//! the client's process, on another host), and its CPU time read when a measured window opens
//! and when it closes: for a local server the whole process tree, since an engine that forks
//! per connection (PostgreSQL) does its work in the children.

use crate::procstat::{listening_pid, tree_cpu_ns};
use crate::results::{Location, SystemInfo};
use crate::urlparts::host_port;

/// What a cell says of a server's CPU when it runs inside the client's process.
pub const IN_PROCESS: &str = "in process";
/// What a cell says of a server's CPU when it runs on another host.
pub const REMOTE: &str = "not measured: remote";

/// Where a system's server runs, as far as its CPU can be read from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerProcess {
    /// On this machine: this process and every process below it.
    Local(u32),
    /// An embedded engine: its CPU is the client's own and already counted there.
    InProcess,
    /// On another host.
    Remote,
    /// Not read, and why (no readable process listens on its port, several workers…).
    Unseen(String),
}

impl ServerProcess {
    /// The server of `system`: the process `given` (a tool's pid flag), or the one listening
    /// on the port of its URL when it is on this machine.
    pub fn locate(system: &SystemInfo, given: Option<u32>) -> ServerProcess {
        match (system.location, given) {
            (Location::Embedded, _) => ServerProcess::InProcess,
            (_, Some(pid)) => ServerProcess::Local(pid),
            (Location::Remote, None) => ServerProcess::Remote,
            (Location::Local, None) => {
                let port = host_port(&system.url_redacted).and_then(|(_, port)| port);
                match port {
                    Some(port) => listening_pid(port).map_or_else(
                        || {
                            ServerProcess::Unseen(format!(
                                "not measured: no process of this user listens on port {port}"
                            ))
                        },
                        ServerProcess::Local,
                    ),
                    None => ServerProcess::Unseen(
                        "not measured: the URL names no TCP port to find the server by".into(),
                    ),
                }
            }
        }
    }

    /// What one of `workers` workers reads: each would read the whole server's CPU against
    /// its share of the work, so a local server is read only by a run alone.
    pub fn shared_by(self, workers: u32) -> ServerProcess {
        match self {
            ServerProcess::Local(_) if workers > 1 => ServerProcess::Unseen(
                "not measured: one of several workers (each would read the whole server's CPU \
                 against its share of the work)"
                    .into(),
            ),
            other => other,
        }
    }

    /// The server's CPU time now (user + system, its process tree), when it can be read.
    pub fn cpu_ns(&self) -> Option<u64> {
        match self {
            ServerProcess::Local(pid) => tree_cpu_ns(*pid),
            _ => None,
        }
    }

    /// The server's CPU time spent since `before` (a [`ServerProcess::cpu_ns`] reading).
    pub fn cpu_since(&self, before: Option<u64>) -> Option<u64> {
        before
            .zip(self.cpu_ns())
            .map(|(before, after)| after.saturating_sub(before))
    }

    /// How a cell says its server's CPU was read: `process tree of PID n`, `in process`,
    /// `not measured: remote`, or why it was not.
    pub fn source(&self) -> String {
        match self {
            ServerProcess::Local(pid) => format!("process tree of PID {pid}"),
            ServerProcess::InProcess => IN_PROCESS.into(),
            ServerProcess::Remote => REMOTE.into(),
            ServerProcess::Unseen(why) => why.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system(location: Location, url: &str) -> SystemInfo {
        SystemInfo {
            location,
            url_redacted: url.into(),
            ..SystemInfo::default()
        }
    }

    #[test]
    fn a_local_server_is_found_by_its_port_and_read_as_a_tree() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let found = ServerProcess::locate(
            &system(Location::Local, &format!("pg://u:***@127.0.0.1:{port}/db")),
            None,
        );
        assert_eq!(found, ServerProcess::Local(std::process::id()));
        let before = found.cpu_ns();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(found.cpu_since(before).unwrap() > 0, "{x}");
        assert!(found.source().starts_with("process tree of PID"));
        drop(listener);
        let gone = ServerProcess::locate(
            &system(Location::Local, &format!("pg://127.0.0.1:{port}/db")),
            None,
        );
        assert!(gone.source().contains(&format!("listens on port {port}")));
        assert_eq!(gone.cpu_since(Some(0)), None);
    }

    #[test]
    fn embedded_and_remote_servers_are_named_not_read() {
        let embedded = ServerProcess::locate(&system(Location::Embedded, "sqlite:x.db"), None);
        assert_eq!(
            (embedded.source().as_str(), embedded.cpu_ns()),
            ("in process", None)
        );
        let far = system(Location::Remote, "pg://db.example.com:5432/x");
        assert_eq!(ServerProcess::locate(&far, None).source(), REMOTE);
        assert_eq!(
            ServerProcess::locate(&far, Some(7)),
            ServerProcess::Local(7)
        );
        assert_eq!(
            ServerProcess::Local(7).shared_by(1),
            ServerProcess::Local(7)
        );
        assert!(
            ServerProcess::Local(7)
                .shared_by(2)
                .source()
                .contains("several workers")
        );
        assert_eq!(
            ServerProcess::InProcess.shared_by(2),
            ServerProcess::InProcess
        );
        let socket = ServerProcess::locate(&system(Location::Local, "pg:///db"), None);
        assert!(socket.source().contains("no TCP port"));
    }
}
