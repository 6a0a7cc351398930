//! `results.json` is rewritten after every cell; a run killed at any moment (SIGKILL: no
//! handler runs) must leave either the previous whole file or the next one, never a part. A
//! child process (this test binary, in writer mode) rewrites a large report in a loop and is
//! killed at varied moments; after every kill the file left behind must parse.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::environment::Environment;
use common::results::{Cell, Report, Throughput};
use common::writer::ResultsDir;

const CHILD: &str = "FAIRBENCH_ATOMIC_WRITER_DIR";

/// Kills per test: a writer that truncates and rewrites in place was caught by the 8th and
/// by the 19th kill in two tries; 40 leave it little chance of passing.
const ATTEMPTS: usize = 40;

/// A report of a few megabytes, so that one write takes long enough to be interrupted.
fn large_report(generation: u64) -> Report {
    let mut report = Report::begin(
        "sql-bench",
        "0.0.0",
        "crud",
        "the atomic write test",
        serde_json::json!({"generation": generation}),
        Environment::default(),
    );
    report.cells = (0..4_000)
        .map(|i| {
            let mut cell = Cell::new(&format!("workload {i}"), "sqlite", "ops/s", 1, 5);
            cell.throughput = Throughput::from_rounds(vec![1_000.0 + i as f64; 5]);
            cell.reason = Some("x".repeat(512));
            cell
        })
        .collect();
    report
}

/// The child's loop: rewrite the report until killed (bounded: 60 s at most).
#[test]
#[ignore = "run by the_file_left_by_a_killed_writer_always_parses as its child"]
fn writer_child() {
    let Ok(dir) = std::env::var(CHILD) else {
        return;
    };
    let results = ResultsDir::create(Path::new(&dir)).unwrap();
    let began = Instant::now();
    let mut generation = 0;
    while began.elapsed() < Duration::from_secs(60) {
        results.write_results(&large_report(generation)).unwrap();
        generation += 1;
    }
}

#[test]
fn the_file_left_by_a_killed_writer_always_parses() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let mut seed = std::process::id() as u64 | 1;
    let mut kills_mid_run = 0;
    for attempt in 0..ATTEMPTS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "writer_child", "--ignored", "--quiet"])
            .env(CHILD, &folder)
            .spawn()
            .unwrap();
        // Let the first write land; later kills come at any moment (the file is there from
        // the runs before), moving within a write's length.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let first = if attempt == 0 { 600 } else { 30 };
        let after = Duration::from_millis(first + (seed >> 33) % 400);
        std::thread::sleep(after);
        if child.try_wait().unwrap().is_none() {
            kills_mid_run += 1;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let path = folder.join("results.json");
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let parsed: Result<Report, _> = serde_json::from_slice(&bytes);
        assert!(
            parsed.is_ok(),
            "attempt {attempt}: killed after {after:?}, {} holds {} bytes that do not parse: {:?}",
            path.display(),
            bytes.len(),
            parsed.err()
        );
    }
    assert!(
        kills_mid_run >= ATTEMPTS - 2,
        "the writer ended before it was killed ({kills_mid_run} of {ATTEMPTS})"
    );
    assert!(folder.join("results.json").exists(), "nothing was written");
}
