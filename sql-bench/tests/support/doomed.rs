//! A PostgreSQL of one test's own, started by `scripts/services` in a temporary directory, for a
//! test that crashes it mid-run (the crash comes from a watcher thread once the run's
//! `results.json` shows what the test wants measured first) or that reaches it from network
//! namespaces (on the host side's address); the server is stopped when the test ends, whatever
//! happened.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{scripts_dir, servers_required};

pub struct DoomedPostgres {
    state: tempfile::TempDir,
    services: PathBuf,
    pub url: String,
}

impl DoomedPostgres {
    /// Starts it on `port`; `None` (the test is skipped) when PostgreSQL 15 is not installed
    /// and the test command does not require the servers.
    pub fn start(port: u16) -> Option<DoomedPostgres> {
        DoomedPostgres::start_on(None, port)
    }

    /// As [`DoomedPostgres::start`], listening on `address` (passwords accepted from its /24)
    /// instead of 127.0.0.1 when one is given.
    pub fn start_on(address: Option<std::net::Ipv4Addr>, port: u16) -> Option<DoomedPostgres> {
        if !Path::new("/usr/lib/postgresql/15/bin/initdb").exists() {
            assert!(
                !servers_required(),
                "PostgreSQL 15 is not installed: run scripts/test"
            );
            eprintln!("skipped: PostgreSQL 15 is not installed");
            return None;
        }
        let state = tempfile::tempdir().unwrap();
        let services = scripts_dir().join("services");
        let started = Command::new(&services)
            .args(["start", state.path().to_str().unwrap(), "postgres"])
            .env("FAIRBENCH_PG_PORT", port.to_string())
            .envs(address.map(|a| ("FAIRBENCH_PG_LISTEN", a.to_string())))
            .output()
            .unwrap();
        assert!(
            started.status.success(),
            "{}",
            String::from_utf8_lossy(&started.stderr)
        );
        let url = String::from_utf8(started.stdout)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("export FAIRBENCH_TEST_POSTGRES_URL="))
            .unwrap()
            .to_owned();
        Some(DoomedPostgres {
            state,
            services,
            url,
        })
    }

    /// Where the run under test writes its results.
    pub fn run_dir(&self) -> PathBuf {
        self.state.path().join("run")
    }

    /// Crashes the server (no shutdown: the process is killed) as soon as `ready` holds of the
    /// run's `results.json`, looking every 20 ms for at most `within`; the thread answers
    /// whether it crashed the server.
    pub fn crash_when(
        &self,
        within: Duration,
        ready: impl Fn(&Value) -> bool + Send + 'static,
    ) -> JoinHandle<bool> {
        let results = self.run_dir().join("results.json");
        let (services, state) = (self.services.clone(), self.state.path().to_owned());
        std::thread::spawn(move || {
            let deadline = Instant::now() + within;
            while Instant::now() < deadline {
                let measured = std::fs::read_to_string(&results)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .is_some_and(|r| ready(&r));
                if measured {
                    return Command::new(&services)
                        .args(["crash", state.to_str().unwrap(), "postgres"])
                        .status()
                        .is_ok_and(|s| s.success());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        })
    }
}

impl DoomedPostgres {
    /// Stops what is left of the server (its directory, and the run's in it, stay until the
    /// test ends).
    pub fn stop(&self) {
        let _ = Command::new(&self.services)
            .args(["stop", self.state.path().to_str().unwrap()])
            .status();
    }
}

impl Drop for DoomedPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether any cell of `system` and `workload` (any workload when `None`) in `results` matches
/// `measured`.
pub fn any_cell(
    results: &Value,
    system: &str,
    workload: Option<&str>,
    measured: impl Fn(&Value) -> bool,
) -> bool {
    results["cells"].as_array().is_some_and(|cells| {
        cells.iter().any(|c| {
            c["system"] == system && workload.is_none_or(|w| c["workload"] == w) && measured(c)
        })
    })
}
