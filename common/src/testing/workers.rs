//! What every tool's tests of several workers do and assert: the workers of one run in threads
//! of one test process ([`in_threads`]); that the parts opened their windows together, that a
//! merged cell is the exact sum of the parts' same cell, that a run whose worker never came
//! stopped every other with the barrier's error and merges into nothing, and that a worker
//! interrupted (Ctrl-C) stopped every worker at the next meeting as an interrupted run
//! ([`with_one_interrupted`], [`assert_interrupted_and_unmerged`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::exit::Exit;
use crate::export::ToolReport;
use crate::histogram::decode_histogram;
use crate::results::{Cell, Report, Status};
use crate::run::Summary;
use crate::scale::merge::MergeArgs;

use super::process::barrier;

/// Runs workers `indexes` of `count` of one run in threads of their own, as the processes of
/// several client machines: each through `run(folder, args, interrupt)`, with `settings` (on
/// one line: `"--target redis://… --rounds 3"`), then the worker flags (`--worker-count`,
/// `--worker-index`, `--run-id RUN_ID`, `--barrier` on a free loopback port), its own results
/// folder `ROOT/worker-INDEX` and, as its Ctrl-C flag, `flags[INDEX]` (a flag nothing sets
/// when `flags` has none for it). Each result with its folder, in the order of `indexes`.
pub fn in_threads<S: Send>(
    root: &Path,
    (count, indexes): (u32, &[u32]),
    run_id: &str,
    settings: &str,
    flags: &[Arc<AtomicBool>],
    run: impl Fn(&Path, &[&str], Arc<AtomicBool>) -> anyhow::Result<S> + Sync,
) -> Vec<(PathBuf, anyhow::Result<S>)> {
    let barrier = format!("127.0.0.1:{}", super::free_port());
    let count = count.to_string();
    let run = &run;
    std::thread::scope(|scope| {
        let handles: Vec<_> = indexes
            .iter()
            .map(|&i| {
                let out = root.join(format!("worker-{i}"));
                let (count, barrier) = (&count, &barrier);
                scope.spawn(move || {
                    let index = i.to_string();
                    let mut args = super::words(settings);
                    args.extend(["--worker-count", count, "--worker-index", &index]);
                    args.extend(["--run-id", run_id, "--barrier", barrier]);
                    let flag = flags.get(i as usize).cloned().unwrap_or_default();
                    let result = run(&out, &args, flag);
                    (out, result)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Checks that the workers' parts opened their windows together: every window's starts (each
/// worker's clock; one host in a test) within 50 ms of each other but for at most one, and
/// the median window within 10 ms. Workers that are threads of one test process share 2 busy
/// cores with builds and servers here: a thread sometimes wakes 130–300 ms late (seen in 2 of 8
/// runs at load 5), and under the whole suite the median spread of three ycsb workers reached
/// 5 ms (windows 3–10 ms apart); a missing or misplaced barrier puts every window apart by the
/// workers' own set-up. Returns the largest spread, in ns, for the test to print.
pub fn assert_opened_together(parts: &[&crate::results::Report]) -> u64 {
    let starts: Vec<&Vec<u64>> = parts.iter().map(|r| &barrier(r).start_unix_ns).collect();
    assert!(
        starts.iter().all(|s| s.len() == starts[0].len()),
        "every worker opened as many windows"
    );
    let mut spread_ns: Vec<u64> = (0..starts[0].len())
        .map(|w| {
            let at = starts.iter().map(|s| s[w]);
            at.clone().max().unwrap_or(0) - at.min().unwrap_or(0)
        })
        .collect();
    let ms: Vec<u64> = spread_ns.iter().map(|ns| ns / 1_000_000).collect();
    assert!(
        ms.iter().filter(|&&m| m >= 50).count() <= 1,
        "window starts apart (ms): {ms:?}"
    );
    spread_ns.sort_unstable();
    assert!(
        spread_ns.get(spread_ns.len() / 2).copied().unwrap_or(0) < 10_000_000,
        "window starts apart (ms): {ms:?}"
    );
    spread_ns.last().copied().unwrap_or(0)
}

/// `merged` is the exact sum of `parts` (one worker's same cell each): status ok, counts and
/// connections summed, the HDR histogram (where the parts keep one) the exact sum with the p99
/// read from it, and the throughput summed round by round (to the last bit JSON keeps).
pub fn assert_exact_sum(merged: &Cell, parts: &[&Cell]) {
    let w = format!("{} · {}", merged.workload, merged.system);
    assert_eq!(merged.status, Status::Ok, "{w}: {:?}", merged.reason);
    let ok: u64 = parts.iter().map(|c| c.counts.ok).sum();
    assert_eq!(merged.counts.ok, ok, "{w}");
    let connections: u32 = parts.iter().map(|c| c.connections).sum();
    assert_eq!(merged.connections, connections, "{w}");
    if parts[0].histogram_b64.is_some() {
        let histogram = |c: &Cell| decode_histogram(c.histogram_b64.as_ref().expect("a histogram"));
        let mut expected = histogram(parts[0]).unwrap();
        expected.auto(true);
        for part in &parts[1..] {
            expected.add(histogram(part).unwrap()).unwrap();
        }
        assert_eq!(histogram(merged).unwrap(), expected, "{w}: the exact sum");
        if let Some(latency) = merged.latency_ns {
            assert_eq!(latency.p99, expected.value_at_quantile(0.99), "{w}");
        }
    }
    let rounds = |c: &Cell| c.throughput.as_ref().expect("throughput").rounds.clone();
    assert_eq!(rounds(merged).len(), rounds(parts[0]).len(), "{w}");
    for (r, m) in rounds(merged).iter().enumerate() {
        let sum: f64 = parts.iter().map(|c| rounds(c)[r]).sum();
        assert!(
            (m - sum).abs() <= 1e-9 * sum.abs(),
            "{w}: round {r}: {m} vs {sum}"
        );
    }
}

/// Every worker of `parts` (folder, result) stopped at the barrier because `missing` never
/// came ("worker(s) 2"), every cell of its results says so, and `merge` of the parts refuses
/// with nothing written.
pub fn assert_stopped_and_unmerged<S>(
    parts: &[(PathBuf, anyhow::Result<S>)],
    missing: &str,
    expect_workers: u32,
    tool: &str,
    report: &dyn ToolReport,
) {
    for (out, result) in parts {
        let Err(error) = result.as_ref() else {
            panic!("the run was to stop at the barrier")
        };
        assert!(
            error.downcast_ref::<crate::scale::BarrierError>().is_some(),
            "{error:#}"
        );
        let never = format!("{missing} never arrived");
        assert!(format!("{error:#}").contains(&never), "{error:#}");
        let part: Report = super::read_report(out);
        assert!(!part.cells.is_empty());
        assert!(
            part.cells.iter().all(|c| c.status == Status::Error
                && c.reason.as_deref().unwrap_or("").contains("never arrived")),
            "{:#?}",
            part.cells.iter().map(|c| &c.reason).collect::<Vec<_>>()
        );
    }
    let output = parts[0].0.with_file_name("merged");
    let merge = MergeArgs {
        parts: parts.iter().map(|(p, _)| p.clone()).collect(),
        expect_workers,
        output: output.clone(),
        wait: None,
    };
    let error = crate::scale::merge::run(&merge, tool, report)
        .unwrap_err()
        .to_string();
    assert!(error.contains("stopped at the barrier"), "{error}");
    assert!(!output.exists(), "nothing merged as if complete");
}

/// `merge` of every worker's part (listed last first, as nothing orders a merge Job's
/// arguments), in process, into `merged/` beside them: its folder and the merged run, once
/// report.md and report.html are there.
pub fn merge_in_process<S>(
    parts: &[(PathBuf, anyhow::Result<S>)],
    tool: &str,
    report: &dyn ToolReport,
) -> (PathBuf, Report) {
    let output = parts[0].0.with_file_name("merged");
    let merge = MergeArgs {
        parts: parts.iter().rev().map(|(p, _)| p.clone()).collect(),
        expect_workers: parts.len() as u32,
        output: output.clone(),
        wait: None,
    };
    crate::scale::merge::run(&merge, tool, report).unwrap();
    assert!(output.join("report.md").is_file() && output.join("report.html").is_file());
    let merged = super::read_report(&output);
    assert_eq!(merged.workers.len(), parts.len());
    (output, merged)
}

/// What a test saw of a worker's results when it interrupted that worker: the worker, the
/// cell it watched, that cell's measured rounds and the meetings the worker had passed.
#[derive(Debug, Clone)]
pub struct Interruption {
    pub worker: u32,
    pub workload: String,
    pub rounds: usize,
    pub meetings: u64,
}

/// The measured rounds of the first cell of `workload` in `report`, if it has any.
fn measured_rounds(report: &Report, workload: &str) -> usize {
    report
        .cells
        .iter()
        .find(|c| c.workload == workload)
        .and_then(|c| c.throughput.as_ref())
        .map_or(0, |t| t.rounds.len())
}

/// Ctrl-C on worker `worker` (its `flag`), from a thread of its own, once its results.json in
/// `root/worker-INDEX` shows a measured round of `workload` (at most 60 s): what the results
/// said then, or `None` when they never showed one.
fn interrupt_once_measured(
    root: &Path,
    worker: u32,
    workload: &str,
    flag: Arc<AtomicBool>,
) -> JoinHandle<Option<Interruption>> {
    let watched = root.join(format!("worker-{worker}")).join("results.json");
    let workload = workload.to_owned();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let report = std::fs::read_to_string(&watched)
                .ok()
                .and_then(|t| serde_json::from_str::<Report>(&t).ok());
            if let Some(report) = report {
                let rounds = measured_rounds(&report, &workload);
                if rounds > 0 {
                    flag.store(true, Ordering::SeqCst);
                    let meetings = report
                        .worker
                        .and_then(|w| w.barrier)
                        .map_or(0, |b| b.windows);
                    return Some(Interruption {
                        worker,
                        workload,
                        rounds,
                        meetings,
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    })
}

/// Runs the workers of one run (`run`, given each worker's interrupt flag, `count` of them,
/// worker `i` at `i`), interrupting worker `worker` once its results in `root/worker-INDEX`
/// show a measured round of `workload` ([`interrupt_once_measured`]): what `run` returned,
/// and what the test saw when it interrupted. Fails the test when the worker never measured
/// a round.
pub fn with_one_interrupted<P>(
    root: &Path,
    (count, worker): (usize, u32),
    workload: &str,
    run: impl FnOnce(&[Arc<AtomicBool>]) -> P,
) -> (P, Interruption) {
    let flags: Vec<Arc<AtomicBool>> = (0..count).map(|_| Arc::default()).collect();
    let watcher = interrupt_once_measured(root, worker, workload, flags[worker as usize].clone());
    let parts = run(&flags);
    let seen = watcher
        .join()
        .unwrap()
        .unwrap_or_else(|| panic!("worker {worker} measured no round of {workload}"));
    (parts, seen)
}

/// Every worker of `parts` (folder, result) stopped at the same meeting, at most two past the
/// ones `seen` counted (the flag, set during a window, is read at the meeting after it; the
/// worker may have passed one more meeting between the test reading its results and setting
/// it), as an interrupted run does: no error; results.json written, parsed and finished, its
/// note naming the interrupted worker, its `worker` block saying why it stopped; the rounds of
/// the watched cell measured before kept, no cell marked stopped; the exit code its cells'
/// (not the barrier's); every export written. `merge` of the parts refuses them with one line
/// and writes nothing.
pub fn assert_interrupted_and_unmerged(
    parts: &[(PathBuf, anyhow::Result<Summary>)],
    seen: &Interruption,
    tool: &str,
    report: &dyn ToolReport,
) {
    let who = seen.worker;
    let failure = format!("worker {who} was interrupted (Ctrl-C)");
    let note = format!("The run was interrupted: {failure} and stopped every worker");
    let mut meetings = Vec::new();
    for (i, (out, result)) in parts.iter().enumerate() {
        let summary = result
            .as_ref()
            .unwrap_or_else(|e| panic!("worker {i}: {e:#}"));
        let part: Report = super::read_report(out);
        assert!(part.finished_at.is_some(), "worker {i} finished its run");
        assert!(
            part.notes.iter().any(|n| n.starts_with(&note)),
            "worker {i}: {:#?}",
            part.notes
        );
        let barrier = part
            .worker
            .as_ref()
            .and_then(|w| w.barrier.as_ref())
            .unwrap_or_else(|| panic!("worker {i}: a worker block with the barrier"));
        assert_eq!(
            barrier.failure.as_deref(),
            Some(failure.as_str()),
            "worker {i}"
        );
        meetings.push(barrier.windows);
        let rounds = measured_rounds(&part, &seen.workload);
        assert!(
            rounds >= seen.rounds,
            "worker {i}: {} kept {rounds} rounds, {} were measured",
            seen.workload,
            seen.rounds
        );
        for c in &part.cells {
            let reason = c.reason.as_deref().unwrap_or("");
            assert!(!reason.contains("stopped:"), "worker {i}: {reason}");
        }
        assert_eq!(
            summary.exit,
            Exit::of(&part),
            "worker {i}: the cells' exit code"
        );
        assert_eq!(summary.report.notes, part.notes, "worker {i}");
        assert!(out.join("report.md").is_file() && out.join("report.html").is_file());
    }
    eprintln!(
        "worker {who} interrupted after meeting {}; every worker stopped after meeting {meetings:?}",
        seen.meetings
    );
    assert!(
        meetings.iter().all(|&m| m == meetings[0]),
        "every worker stopped at the same meeting: {meetings:?}"
    );
    assert!(
        meetings[0] <= seen.meetings + 2,
        "stopped at meeting {} though worker {who} was interrupted after {}",
        meetings[0],
        seen.meetings
    );
    let output = parts[0].0.with_file_name("merged");
    let merge = MergeArgs {
        parts: parts.iter().map(|(p, _)| p.clone()).collect(),
        expect_workers: parts.len() as u32,
        output: output.clone(),
        wait: None,
    };
    let error = crate::scale::merge::run(&merge, tool, report).unwrap_err();
    let error = format!("{error:#}");
    assert!(
        error.contains(&format!(
            "stopped at the barrier: {failure}; the run is incomplete"
        )),
        "{error}"
    );
    assert!(!error.contains('\n'), "one line: {error}");
    assert!(!output.exists(), "nothing merged as if complete");
}
