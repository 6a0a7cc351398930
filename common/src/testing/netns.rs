//! Linux network namespaces for the tests that run workers as separate machines would: N
//! namespaces, each joined by a veth pair to one bridge on the host side, which carries the
//! host's address for them (a server the test starts there, bound to it). Everything made is
//! removed when the [`Namespaces`] is dropped, on a panic too; what a killed test process left
//! behind is removed by the next one. Needs root (`ip netns`); [`Namespaces::create`] says why
//! it skips otherwise. Load goes only to the namespaces and the bridge made here (fairbench's
//! rule: loopback, or network namespaces the test creates).

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// Names of what a test process makes start with this, then its PID.
const PREFIX: &str = "fbns";

/// One set of namespaces per test process at a time (their names carry only the PID).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// N namespaces joined to the host by one bridge; removed on drop.
pub struct Namespaces {
    pid: u32,
    subnet: u8,
    count: usize,
    _one: MutexGuard<'static, ()>,
}

impl Namespaces {
    /// Makes `count` namespaces (1 ≤ count ≤ 200) on a /24 of 10.219.0.0/16 no interface of
    /// the host uses yet. `None`, with the reason on stderr, when not root or when `ip` is
    /// missing (a failure under the test command, which requires both); panics when a step
    /// fails (what was made so far is removed first).
    pub fn create(count: usize) -> Option<Namespaces> {
        assert!(
            (1..=200).contains(&count),
            "1 to 200 namespaces, not {count}"
        );
        let missing = if !is_root() {
            Some("root (`ip netns add`)")
        } else if Command::new("ip").arg("-V").output().is_err() {
            Some("`ip` (iproute2)")
        } else {
            None
        };
        if let Some(missing) = missing {
            assert!(
                !super::servers_required(),
                "the network-namespace test needs {missing}, and the test command requires it"
            );
            eprintln!("skipped: the network-namespace test needs {missing}; read it as not run");
            return None;
        }
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        remove_abandoned();
        let pid = std::process::id();
        let namespaces = Namespaces {
            pid,
            subnet: free_subnet(pid),
            count,
            _one: one,
        };
        namespaces.build();
        Some(namespaces)
    }

    /// The host side's address, on the bridge: where a server for the namespaces listens.
    pub fn host_address(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 219, self.subnet, 1)
    }

    /// Namespace `i`'s address (its `eth0`).
    pub fn address(&self, i: usize) -> Ipv4Addr {
        assert!(i < self.count);
        Ipv4Addr::new(10, 219, self.subnet, 2 + i as u8)
    }

    /// Namespace `i`'s name (for `ip netns exec`).
    pub fn name(&self, i: usize) -> String {
        format!("{PREFIX}{}-{i}", self.pid)
    }

    /// `program` to be run inside namespace `i` (`ip netns exec NAME program`); the
    /// environment is passed on as usual.
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name(i)]).arg(program);
        command
    }

    /// Removes everything made now, and panics when a namespace is left behind.
    pub fn remove_and_check(self) {
        let names: Vec<String> = (0..self.count).map(|i| self.name(i)).collect();
        drop(self);
        let left = ip_output(&["netns", "list"]);
        assert!(
            names.iter().all(|n| !left.contains(n.as_str())),
            "namespaces left behind: {left}"
        );
    }

    fn bridge(&self) -> String {
        format!("{PREFIX}{}b", self.pid)
    }

    fn host_end(&self, i: usize) -> String {
        format!("{PREFIX}{}h{i}", self.pid)
    }

    fn build(&self) {
        let bridge = self.bridge();
        let host = format!("{}/24", self.host_address());
        let mut steps: Vec<Vec<String>> = vec![
            words(&format!("link add {bridge} type bridge")),
            words(&format!("addr add {host} dev {bridge}")),
            words(&format!("link set {bridge} up")),
        ];
        for i in 0..self.count {
            let (ns, end) = (self.name(i), self.host_end(i));
            let address = format!("{}/24", self.address(i));
            steps.extend([
                words(&format!("netns add {ns}")),
                words(&format!("-n {ns} link set lo up")),
                words(&format!(
                    "link add {end} type veth peer name eth0 netns {ns}"
                )),
                words(&format!("link set {end} master {bridge} up")),
                words(&format!("-n {ns} addr add {address} dev eth0")),
                words(&format!("-n {ns} link set eth0 up")),
            ]);
        }
        for step in steps {
            if let Err(error) = ip(&step) {
                remove(self.pid);
                panic!("cannot set up the test's network namespaces: {error}");
            }
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        remove(self.pid);
    }
}

/// The namespaces and links test process `pid` made, whatever of them exists.
fn remove(pid: u32) {
    // Deleting the host end of a veth pair deletes both ends; deleting a namespace deletes
    // what is left in it. Errors are of what was never made.
    let links = ip_output(&["-o", "link", "show"]);
    for line in links.lines() {
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        if owner(name, 'h') == Some(pid) {
            let _ = ip(&words(&format!("link del {name}")));
        }
    }
    for ns in ip_output(&["netns", "list"]).lines() {
        let ns = ns.split_whitespace().next().unwrap_or("");
        if ns
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
            == Some(pid)
        {
            let _ = ip(&words(&format!("netns del {ns}")));
        }
    }
    let _ = ip(&words(&format!("link del {PREFIX}{pid}b")));
}

/// What test processes no longer running left behind (a test killed before its drop).
fn remove_abandoned() {
    let mut pids: Vec<u32> = ip_output(&["netns", "list"])
        .lines()
        .filter_map(|ns| {
            let rest = ns.split_whitespace().next()?.strip_prefix(PREFIX)?;
            rest.split('-').next()?.parse().ok()
        })
        .chain(
            ip_output(&["-o", "link", "show"])
                .lines()
                .filter_map(|line| owner(line.split(": ").nth(1)?, 'b')),
        )
        .collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove(pid);
        }
    }
}

/// The PID in a link name `fbns<pid><kind>…` (kind `b` bridge, `h` host end of a veth).
fn owner(name: &str, kind: char) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[digits..].starts_with(kind).then_some(())?;
    rest[..digits].parse().ok()
}

/// A /24 of 10.219.0.0/16 no address of the host is on (from one derived from the PID, so
/// two test processes at once take different ones).
fn free_subnet(pid: u32) -> u8 {
    let taken = ip_output(&["-4", "-o", "addr", "show"]);
    let start = (pid % 200) as u8;
    (0..200u8)
        .map(|k| 20 + (start + k) % 200)
        .find(|s| !taken.contains(&format!("10.219.{s}.")))
        .expect("every /24 of 10.219.20-219.0 is taken on this host")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

fn ip(args: &[String]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn ip_output(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_give_their_process_back() {
        assert_eq!(owner("fbns123b", 'b'), Some(123));
        assert_eq!(owner("fbns123h0", 'h'), Some(123));
        assert_eq!(owner("fbns123h0", 'b'), None);
        assert_eq!(owner("eth0", 'h'), None);
    }

    #[test]
    fn namespaces_are_made_and_removed() {
        let Some(net) = Namespaces::create(2) else {
            return;
        };
        let name = net.name(1);
        assert!(ip_output(&["netns", "list"]).contains(&name));
        let inside = net
            .command(1, "ip")
            .args(["-4", "-o", "addr", "show", "dev", "eth0"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&inside.stdout).contains(&net.address(1).to_string()),
            "{inside:?}"
        );
        drop(net);
        assert!(!ip_output(&["netns", "list"]).contains(&name));
        assert!(
            !ip_output(&["-o", "link", "show"])
                .contains(&format!("{PREFIX}{}", std::process::id()))
        );
    }
}
