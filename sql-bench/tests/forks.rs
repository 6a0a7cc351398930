//! `--forks`: every fork is a process of its own (its PID neither the parent's nor another
//! fork's), the forks measure the systems in alternating order, and a fork that dies makes its
//! cells `error` with how it ended while what the other forks measured is kept.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::results::Status;
use common::testing::read_report;

#[test]
fn forks_are_processes_in_alternating_order_and_a_killed_fork_is_an_error_beside_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut parent = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args([
            "crud",
            "--target",
            "a=sqlite",
            "--target",
            "b=sqlite",
            "--workloads",
            "read-2c",
            "--connections",
            "2",
            "--duration",
            "300ms",
            "--warmup",
            "0",
            "--rounds",
            "2",
            "--forks",
            "3",
            "--output",
            out.to_str().unwrap(),
        ])
        .env_remove("FAIRBENCH_FORKS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let parent_pid = parent.id();
    let mut killed = None;
    for line in BufReader::new(parent.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("fork 3/3 · process ") {
            let pid = rest.split_whitespace().next().unwrap().to_owned();
            let status = Command::new("kill").args(["-9", &pid]).status().unwrap();
            assert!(status.success());
            killed = Some(pid.parse::<u32>().unwrap());
        }
    }
    let status = parent.wait().unwrap();
    assert_eq!(status.code(), Some(1), "a cell is not ok: {status:?}");
    let killed = killed.expect("the parent named fork 3's process");

    let report = read_report(&out);
    let pids: Vec<u32> = report.forks.iter().map(|f| f.pid).collect();
    assert_eq!(pids.len(), 3);
    assert!(!pids.contains(&parent_pid), "{pids:?} against {parent_pid}");
    assert!(pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2]);
    assert_eq!(pids[2], killed);
    assert_eq!(report.forks[2].ended, "killed by signal 9");
    assert!(out.join("forks/1/results.json").is_file());

    for cell in &report.cells {
        assert_eq!(cell.status, Status::Error, "{cell:?}");
        let reason = cell.reason.as_deref().unwrap();
        assert!(
            reason.contains("fork 3") && reason.contains("killed by signal 9"),
            "{reason}"
        );
        assert_eq!(cell.forks.len(), 3);
        for fork in &cell.forks[..2] {
            assert_eq!(fork.status, Status::Ok, "{fork:?}");
            assert!(fork.throughput.unwrap() > 0.0 && fork.rounds.len() == 2);
        }
        assert!(cell.forks[2].throughput.is_none());
    }

    // Fork 1 measures a then b in its first round, fork 2 b then a: the order alternates
    // across forks as it does across rounds.
    let opened = |system: &str| {
        let cell = report.cells.iter().find(|c| c.system == system).unwrap();
        cell.round_opened_at_ms.clone()
    };
    let (a, b) = (opened("a"), opened("b"));
    assert_eq!(
        (a.len(), b.len()),
        (4, 4),
        "two rounds in each of two forks"
    );
    assert!(a[0] < b[0] && b[1] < a[1], "fork 1: a b, b a: {a:?} {b:?}");
    assert!(b[2] < a[2] && a[3] < b[3], "fork 2: b a, a b: {a:?} {b:?}");
}
