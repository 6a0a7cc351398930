//! Processes a test starts (a worker, a server of its own): stderr to a file (a pipe nobody
//! reads while it runs could fill and stop it), a bounded wait for the exit, and killed (by
//! its PID) and reaped when dropped, whatever the test did.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A process the test started, with the file its stderr goes to.
pub struct Started(pub Child, pub PathBuf);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `command` started with its stdout discarded and its stderr in `log`.
pub fn start(command: &mut Command, log: PathBuf) -> Started {
    let file = std::fs::File::create(&log).unwrap();
    let child = command.stdout(Stdio::null()).stderr(file).spawn().unwrap();
    Started(child, log)
}

/// Waits for `process` at most `limit` (panics past it; the drop kills it): its exit status
/// and what it printed on stderr.
pub fn finish(mut process: Started, limit: Duration) -> (ExitStatus, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = process.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "a process of the test ran past {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status,
        std::fs::read_to_string(&process.1).unwrap_or_default(),
    )
}
