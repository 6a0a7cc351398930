//! mqtt-bench as several client machines of one run (two or three workers' worth, in-process,
//! on loopback) against the real Mosquitto: every window opened by the barrier, the clients,
//! publishers, subscribers and topics shared out with no client id or topic of one worker
//! reaching another, every worker's ledgers clean, `merge` adding their figures exactly; a
//! worker that never comes stopping the others with the barrier's code; and a worker
//! interrupted (Ctrl-C) stopping every worker at the next meeting as an interrupted run stops.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::results::{Cell, Report, Status};
use common::testing::workers::{
    assert_exact_sum, assert_interrupted_and_unmerged, assert_stopped_and_unmerged, in_threads,
    merge_in_process, with_one_interrupted,
};
use support::*;

/// The scenarios of every test here but the interrupted one's, and their measured rounds.
const RUN: (&str, u32) = ("connect,idle,many-to-many", 3);

/// Runs workers `indexes` of `count` in threads of their own, `scenarios` for `rounds`
/// measured rounds each, worker `i` under the interrupt flag `flags[i]` (a flag of its own
/// that nothing sets when there is none); each result with its folder.
fn workers(
    root: &Path,
    broker: &str,
    (count, indexes): (u32, &[u32]),
    (scenarios, rounds): (&str, u32),
    flags: &[Arc<AtomicBool>],
) -> Vec<(PathBuf, anyhow::Result<mqtt_bench::Summary>)> {
    let settings = format!(
        "--broker mosquitto={broker} --scenarios {scenarios} --clients 40 \
         --connect-rate 2k --many-to-many 4x4 --topics 4 --backlog 100 --rounds {rounds} \
         --duration 300ms --barrier-timeout 3s"
    );
    in_threads(
        root,
        (count, indexes),
        "mqtt-test-1",
        &settings,
        flags,
        |out, a, flag| run_with(&args(out, a), flag),
    )
}

fn cell<'a>(report: &'a Report, prefix: &str) -> &'a Cell {
    report
        .cells
        .iter()
        .find(|c| c.workload.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} cell"))
}

#[test]
fn two_workers_make_one_run_whose_figures_are_the_exact_sum() {
    let Some((broker, dir)) = on_server("FAIRBENCH_TEST_MOSQUITTO_URL") else {
        return;
    };
    let parts = workers(dir.path(), &broker, (2, &[0, 1]), RUN, &[]);
    let mut reports = Vec::new();
    for (out, result) in &parts {
        let summary = result.as_ref().unwrap_or_else(|e| panic!("{e:#}"));
        assert_matches_schema(out);
        let barrier = summary.report.worker.as_ref().unwrap().barrier.clone();
        // 3 rows × (1 warm-up + 3 rounds), and the closing meeting.
        assert_eq!(barrier.unwrap().windows, 3 * 4 + 1);
        reports.push(summary.report.clone());
    }
    // One clock on one host: the windows opened together.
    common::testing::workers::assert_opened_together(&[&reports[0], &reports[1]]);
    for (prefix, each) in [("connect", 20), ("idle", 20), ("many-to-many", 4)] {
        let connections: Vec<u32> = reports
            .iter()
            .map(|r| cell(r, prefix).connections)
            .collect();
        assert_eq!(
            connections,
            [each, each],
            "{prefix}: the clients are shared"
        );
    }
    // Each worker's clients and topics are its own: no connection of one closed by a client
    // id of the other, no delivery from the other's publishers, every message owed accounted
    // for on the worker that sent it.
    for report in &reports {
        for c in &report.cells {
            assert_eq!(c.status, Status::Ok, "{}: {:?}", c.workload, c.reason);
        }
        let m2m = cell(report, "many-to-many");
        let delivery = &m2m.extra["delivery"];
        assert!(delivery["sent"].as_u64().unwrap() > 0, "{delivery}");
        assert_eq!(delivery["strays"], 0, "{delivery}");
        let n = |k: &str| delivery[k].as_u64().unwrap();
        assert_eq!(n("distinct") + n("lost"), n("sent"), "{delivery}");
        assert_eq!(m2m.counts.ok, n("distinct"));
    }
    let (merged_dir, merged) =
        merge_in_process(&parts, "mqtt-bench", &mqtt_bench::report::MqttReport);
    assert_matches_schema(&merged_dir);
    assert_eq!(merged.workers.len(), 2);
    for (i, c) in merged.cells.iter().enumerate() {
        let (a, b) = (&reports[0].cells[i], &reports[1].cells[i]);
        assert_exact_sum(c, &[a, b]);
        assert_eq!(
            c.throughput.as_ref().unwrap().rounds.len(),
            3,
            "{}",
            c.workload
        );
        // The delivery ledgers are added up too, not worker 0's alone.
        for key in ["sent", "distinct", "lost", "duplicates", "strays"] {
            let n = |c: &Cell| c.extra["delivery"][key].as_u64().unwrap();
            assert_eq!(n(c), n(a) + n(b), "{}: {key}", c.workload);
        }
    }
    assert_eq!(cell(&merged, "connect").connections, 40);
    assert_eq!(cell(&merged, "many-to-many").connections, 8);
}

#[test]
fn a_worker_that_never_comes_stops_the_others_with_the_barrier_code() {
    let Some((broker, dir)) = on_server("FAIRBENCH_TEST_MOSQUITTO_URL") else {
        return;
    };
    // Worker 2 of 3 is never started (its pod was killed before the barrier).
    let parts = workers(dir.path(), &broker, (3, &[0, 1]), RUN, &[]);
    assert_stopped_and_unmerged(
        &parts,
        "worker(s) 2",
        3,
        "mqtt-bench",
        &mqtt_bench::report::MqttReport,
    );
}

/// Worker 1 is interrupted once it has measured a round of many-to-many (a window of 300 ms; a
/// connection storm's window is its connects, shorter than the test's look at the results):
/// at the next meeting every worker stops as an interrupted run does, keeping what it
/// measured, and `merge` refuses the parts.
#[test]
fn a_worker_interrupted_stops_every_worker_as_an_interrupted_run_and_nothing_is_merged() {
    let Some((broker, dir)) = on_server("FAIRBENCH_TEST_MOSQUITTO_URL") else {
        return;
    };
    let watched = "many-to-many 4×4 over 4 topics, qos0";
    let (parts, seen) = with_one_interrupted(dir.path(), (2, 1), watched, |flags| {
        workers(
            dir.path(),
            &broker,
            (2, &[0, 1]),
            ("many-to-many", 40),
            flags,
        )
    });
    assert_interrupted_and_unmerged(&parts, &seen, "mqtt-bench", &mqtt_bench::report::MqttReport);
}
