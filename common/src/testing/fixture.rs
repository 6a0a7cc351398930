//! How a test against the test command's servers begins: their URLs from the environment,
//! then the servers held for that test alone and a scratch folder of its own, until it ends.

use std::path::Path;
use std::sync::MutexGuard;

use super::{lock_servers, server_url, server_urls};

/// What a test against the servers holds while it runs: the servers, to itself (the next
/// test waits in [`lock_servers`]), and a scratch folder. Both go when it is dropped at the
/// end of the test: the folder first, then the servers.
pub struct OnServers {
    // Fields drop in this order: the folder is removed before the next test gets the servers.
    dir: tempfile::TempDir,
    _servers: MutexGuard<'static, ()>,
}

impl OnServers {
    /// The servers (once the URLs are known: a test that skips never waits for them), and a
    /// new scratch folder.
    fn hold() -> OnServers {
        let servers = lock_servers();
        OnServers {
            dir: tempfile::tempdir().expect("a scratch folder in the temporary directory"),
            _servers: servers,
        }
    }

    /// The test's scratch folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The URL in `variable` (as [`server_url`] has it: `None` with a note on stderr, or a panic
/// when the servers are required) and the servers and a folder for the rest of the test:
/// `let Some((url, dir)) = on_server("FAIRBENCH_TEST_…_URL") else { return };`.
pub fn on_server(variable: &str) -> Option<(String, OnServers)> {
    let url = server_url(variable)?;
    Some((url, OnServers::hold()))
}

/// The URLs in `variables` (as [`server_urls`] has them) and the servers and a folder for the
/// rest of the test: `let Some(([a, b], dir)) = on_servers([A, B]) else { return };`.
pub fn on_servers<const N: usize>(variables: [&str; N]) -> Option<([String; N], OnServers)> {
    let urls = server_urls(variables)?;
    Some((urls, OnServers::hold()))
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::testing::servers_required;

    /// A variable no test command sets.
    const UNSET: &str = "FAIRBENCH_TEST_NO_SUCH_SERVER_URL";

    #[test]
    fn a_missing_server_is_a_skip_or_a_failure_when_servers_are_required() {
        let lookup = std::panic::catch_unwind(|| on_server(UNSET).is_none());
        if servers_required() {
            assert!(
                lookup.is_err(),
                "a required server that is missing fails the test"
            );
        } else {
            assert!(lookup.unwrap(), "a missing server skips the test");
        }
        let both = std::panic::catch_unwind(|| on_servers(["PATH", UNSET]).is_none());
        assert_eq!(both.is_err(), servers_required());
    }

    #[test]
    fn the_servers_and_the_folder_are_the_tests_until_it_ends() {
        // PATH stands for a server's variable: every test process has it (setting one of our
        // own would take `unsafe` in this edition).
        let (url, dir) = on_server("PATH").expect("PATH is set");
        assert_eq!(url, std::env::var("PATH").unwrap());
        let folder = dir.path().to_owned();
        assert!(folder.is_dir(), "{}", folder.display());

        let (locked, waiting) = mpsc::channel();
        let other_test = std::thread::spawn(move || {
            let _servers = lock_servers();
            locked.send(()).unwrap();
        });
        assert_eq!(
            waiting.recv_timeout(Duration::from_millis(300)),
            Err(mpsc::RecvTimeoutError::Timeout),
            "another test got the servers while this one held them"
        );
        drop(dir);
        assert!(!folder.exists(), "{} is left behind", folder.display());
        waiting
            .recv_timeout(Duration::from_secs(30))
            .expect("the servers are let go with the fixture");
        other_test.join().unwrap();
    }
}
