//! What the integration tests share: the brokers the test command started, a lock so tests
//! that load the machine do not run at once, Mosquitto instances of a test's own, and running
//! mqtt-bench in-process (also in a thread, against a broker the test kills).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{
    assert_matches_schema, lock_servers, on_server, on_servers, read_json,
    server_url as server_env, servers_required,
};

common::in_process_runs!("mqtt-bench", mqtt_bench);

/// Short windows and a short sweep, so a run takes seconds.
pub const QUICK: &str = "--duration 1s --rounds 2 --warmup 1 --sweep 5k,20k --latency-rate 2k \
                         --subscribers 20 --ceiling 30s";

/// `--output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    common::testing::quick_args(&[], output, &common::testing::words(QUICK), extra)
}

/// Starts a Mosquitto of the test's own and, in a thread of its own, mqtt-bench against it
/// (`--broker doomed=URL`, then `settings` on one line: `"--scenarios qos1 --rounds 3"`)
/// writing to `out`: for a test that kills the broker mid-run. `None` when Mosquitto is not
/// installed, outside CI.
pub fn run_against_doomed_broker(
    out: &Path,
    settings: &str,
) -> Option<(
    OwnMosquitto,
    JoinHandle<anyhow::Result<mqtt_bench::Summary>>,
)> {
    let broker = OwnMosquitto::start("")?;
    let url = format!("doomed={}", broker.url);
    let (out, settings) = (out.to_owned(), settings.to_owned());
    let runner = std::thread::spawn(move || {
        let mut extra = vec!["--broker", url.as_str()];
        extra.extend(common::testing::words(&settings));
        run(&args(&out, &extra))
    });
    Some((broker, runner))
}

/// Whether Mosquitto is installed (a skip outside CI says so; CI requires it).
pub fn mosquitto_installed() -> bool {
    if std::path::Path::new("/usr/sbin/mosquitto").exists() {
        return true;
    }
    assert!(
        !servers_required(),
        "Mosquitto is not installed (scripts/install-servers mosquitto)"
    );
    eprintln!("skipped: Mosquitto is not installed");
    false
}

/// A Mosquitto of a test's own on a free loopback port, killed when dropped.
pub struct OwnMosquitto {
    pub child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl OwnMosquitto {
    /// Starts `/usr/sbin/mosquitto` with `settings` added to a loopback listener; `None` when
    /// Mosquitto is not installed outside CI.
    pub fn start(settings: &str) -> Option<OwnMosquitto> {
        if !mosquitto_installed() {
            return None;
        }
        let port = common::testing::free_port();
        let config = format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n{settings}\n"
        );
        let dir = tempfile::tempdir().unwrap();
        Some(OwnMosquitto::launch(
            &config,
            ("127.0.0.1", port),
            "mqtt",
            dir,
        ))
    }

    /// Starts `/usr/sbin/mosquitto` with `config` (whole), whose first listener is on `at`
    /// (`scheme://HOST:PORT` is its URL), in `dir`.
    pub fn launch(
        config: &str,
        (host, port): (&str, u16),
        scheme: &str,
        dir: tempfile::TempDir,
    ) -> OwnMosquitto {
        let binary = PathBuf::from("/usr/sbin/mosquitto");
        let path = dir.path().join("mosquitto.conf");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(binary)
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect((host, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        OwnMosquitto {
            child,
            url: format!("{scheme}://{host}:{port}"),
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for OwnMosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
