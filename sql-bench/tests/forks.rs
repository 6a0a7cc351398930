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

/// Preparation happens once: the first fork makes and verifies the tables, every later fork
/// opens the same data (an embedded engine's file in the run's folder, not the fork's),
/// writes keys of its own into it, and the last fork drops the tables.
#[test]
fn the_first_fork_prepares_the_later_ones_open_its_data_and_the_last_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args([
            "crud",
            "--workloads",
            "read-1c,write-1c",
            "--connections",
            "1",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            "--rounds",
            "1",
            "--forks",
            "3",
            "--output",
            out.to_str().unwrap(),
        ])
        .env_remove("FAIRBENCH_FORKS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");

    // What each fork said lies between the parent's line naming it and the next one.
    let said_by = |fork: usize| -> String {
        let start = stderr.find(&format!("fork {fork}/3 · process")).unwrap();
        let end = stderr[start + 1..]
            .find(&format!("fork {}/3 · process", fork + 1))
            .map_or(stderr.len(), |e| start + 1 + e);
        stderr[start..end].to_owned()
    };
    assert!(said_by(1).contains("— preparing"), "{stderr}");
    for fork in [2, 3] {
        assert!(
            !said_by(fork).contains("— preparing"),
            "fork {fork}: {stderr}"
        );
    }
    assert!(out.join("sqlite/fairbench.db").is_file());
    for fork in 1..=3 {
        assert!(!out.join(format!("forks/{fork}/sqlite")).exists());
        // Every fork verified the tables it measured, the later ones from the catalog.
        let part = read_report(&out.join(format!("forks/{fork}")));
        assert!(!part.systems[0].verified.is_empty(), "fork {fork}");
    }

    // Every fork's write window checked its own inserts against the shared table.
    let report = read_report(&out);
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
        assert_eq!(cell.forks.len(), 3);
    }
    let db = rusqlite::Connection::open(out.join("sqlite/fairbench.db")).unwrap();
    let left: i64 = db
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'crud%'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(left, 0, "the last fork drops the tables");
}
