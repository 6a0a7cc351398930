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

/// `BINARY merge --expect-workers EXPECT --output OUTPUT PARTS…` on the host, as the merge Job
/// of a run on several machines runs it (stderr beside `output`), bounded by `limit`.
pub fn merge(
    binary: &str,
    parts: &[PathBuf],
    expect: usize,
    output: &std::path::Path,
    limit: Duration,
) -> (ExitStatus, String) {
    let mut command = Command::new(binary);
    command
        .args(["merge", "--expect-workers", &expect.to_string(), "--output"])
        .arg(output)
        .args(parts);
    finish(start(&mut command, output.with_extension("stderr")), limit)
}

/// The barrier record of a worker's part.
pub fn barrier(report: &crate::results::Report) -> &crate::scale::BarrierRecord {
    report
        .worker
        .as_ref()
        .expect("a worker block")
        .barrier
        .as_ref()
        .expect("a barrier record")
}
