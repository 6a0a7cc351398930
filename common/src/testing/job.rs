//! A run as a Kubernetes Indexed Job makes it, on one machine: worker processes each in a
//! network namespace of its own ([`Namespaces`]), told their index by `JOB_COMPLETION_INDEX`
//! and worker 0's barrier by its namespace address, each writing its part to
//! `ROOT/worker-INDEX`; the merge Job's `merge` on the host; and what a test of them asserts
//! of every tool (the parts, the barrier's skew, the merged run, a worker killed before the
//! barrier).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use super::netns::Namespaces;
use super::process::{self, Started, barrier, start};
use crate::results::{Report, Status};

/// Where worker 0 listens, in its own namespace (where every port is free).
const BARRIER_PORT: u16 = 7519;
/// `--run-id`, the same for every worker.
const RUN_ID: &str = "netns-1";

/// One tool's Indexed Job in the test's namespaces.
pub struct Job<'a> {
    net: &'a Namespaces,
    binary: &'a str,
    limit: Duration,
    root: &'a Path,
}

impl<'a> Job<'a> {
    /// The Job of the tool `binary` (`env!("CARGO_BIN_EXE_…")`) in `net`, its parts
    /// (`worker-INDEX`) and merged run (`merged`) under `root`; no process of the test runs
    /// longer than `limit` (the load loops are bounded by their windows).
    pub fn new(net: &'a Namespaces, binary: &'a str, root: &'a Path, limit: Duration) -> Job<'a> {
        Job {
            net,
            binary,
            limit,
            root,
        }
    }
    /// Worker 0's barrier address, as every worker is told it.
    pub fn barrier(&self) -> String {
        format!("{}:{BARRIER_PORT}", self.net.address(0))
    }

    /// Worker `index`'s part (its results folder).
    pub fn part(&self, index: usize) -> PathBuf {
        self.root.join(format!("worker-{index}"))
    }

    /// Worker `index` of `count`, started in namespace `index` with the tool's `settings` (on
    /// one line: `"--target redis://… --rounds 1"`) and the worker flags, its stderr in
    /// `ROOT/worker-INDEX.stderr`.
    pub fn worker(
        &self,
        (index, count): (usize, usize),
        settings: &str,
        barrier_timeout: &str,
    ) -> Started {
        let mut command = self.net.command(index, self.binary);
        command
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .args(settings.split_whitespace())
            .args(["--worker-count", &count.to_string(), "--run-id", RUN_ID])
            .args([
                "--barrier",
                &self.barrier(),
                "--barrier-timeout",
                barrier_timeout,
            ])
            .arg("--output")
            .arg(self.part(index));
        start(
            &mut command,
            self.root.join(format!("worker-{index}.stderr")),
        )
    }

    /// Waits for a process of the test, bounded: its exit status and what it printed on
    /// stderr.
    pub fn finish(&self, process: Started) -> (ExitStatus, String) {
        process::finish(process, self.limit)
    }

    /// `merge` of `parts` on the host into `ROOT/merged`, as the merge Job runs it.
    pub fn merge(&self, parts: &[PathBuf], expect: usize) -> (ExitStatus, String) {
        process::merge(self.binary, parts, expect, &self.merged(), self.limit)
    }

    /// Where [`Job::merge`] writes.
    pub fn merged(&self) -> PathBuf {
        self.root.join("merged")
    }

    /// `merge` of the parts of workers `order` (in that order: nothing orders a merge Job's
    /// arguments), which succeeds and writes a merged run that matches the schema, with its
    /// report.md: that run.
    #[cfg(feature = "schema")]
    pub fn merge_and_read(&self, order: &[usize]) -> Report {
        let parts: Vec<PathBuf> = order.iter().map(|&i| self.part(i)).collect();
        let (status, stderr) = self.merge(&parts, order.len());
        assert!(status.success(), "merge: {status}: {stderr}");
        let merged = self.merged();
        super::assert_matches_schema(&merged);
        assert!(merged.join("report.md").is_file());
        super::read_report(&merged)
    }

    /// Waits for every worker of `processes` (worker `i` at `i`) and reads its part: each
    /// exited 0 (its cells that are not ok named otherwise), matches the schema, and carries
    /// the index `JOB_COMPLETION_INDEX` gave it.
    #[cfg(feature = "schema")]
    pub fn finish_parts(&self, processes: Vec<Started>) -> Vec<Report> {
        let count = processes.len();
        let mut reports = Vec::new();
        for (i, started) in processes.into_iter().enumerate() {
            let (status, stderr) = self.finish(started);
            let report = super::read_report(&self.part(i));
            assert!(
                status.success(),
                "worker {i}: {status}: {stderr}{:#?}",
                not_ok(&report)
            );
            super::assert_matches_schema(&self.part(i));
            let info = report.worker.as_ref().expect("a worker block");
            assert_eq!(
                (info.index, info.count),
                (i as u32, count as u32),
                "JOB_COMPLETION_INDEX"
            );
            reports.push(report);
        }
        reports
    }

    /// Starts workers 0 and 1 of 2 with `settings` and kills worker 1 at once (its pod dies;
    /// whether before or just after its hello, worker 0 is left alone at a barrier of two):
    /// worker 0 exits with the barrier's code, every cell of its part an error, and `merge`
    /// of both parts refuses (exit 2) with nothing merged. Worker 0's part, for the test's
    /// own checks.
    pub fn assert_a_killed_worker_stops_the_other(
        &self,
        settings: &str,
        barrier_timeout: &str,
    ) -> Report {
        let first = self.worker((0, 2), settings, barrier_timeout);
        let mut second = self.worker((1, 2), settings, barrier_timeout);
        second.0.kill().unwrap();
        second.0.wait().unwrap();
        let (status, stderr) = self.finish(first);
        assert_eq!(
            status.code(),
            Some(i32::from(crate::scale::BARRIER_EXIT)),
            "{stderr}"
        );
        let report = super::read_report(&self.part(0));
        assert!(
            report.cells.iter().all(|c| c.status == Status::Error),
            "every cell says the run stopped: {:#?}",
            not_ok(&report)
        );
        let (status, stderr) = self.merge(&[self.part(0), self.part(1)], 2);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(!self.merged().exists(), "nothing merged");
        report
    }
}

/// The cells of `report` that are not ok, each with its workload, status and reason.
pub fn not_ok(report: &Report) -> Vec<String> {
    report
        .cells
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| format!("{}: {:?} {:?}", c.workload, c.status, c.reason))
        .collect()
}

/// Fails the test unless the workers of `parts` opened every window within 50 ms of each
/// other ([`barrier_skew_ns`]); prints the largest skew.
pub fn assert_opened_within_50ms(parts: &[Report]) {
    let skew_ns = barrier_skew_ns(parts);
    assert!(skew_ns < 50_000_000, "windows started {skew_ns} ns apart");
    eprintln!(
        "barrier skew across {} namespaces: at most {skew_ns} ns",
        parts.len()
    );
}

/// How far apart the workers' starts of one window were at the most, in ns, over every
/// window of `parts` (one clock for every namespace of one host: the starts are comparable),
/// after checking that every worker but 0 measured its round trip to worker 0 and that every
/// worker met as often.
fn barrier_skew_ns(parts: &[Report]) -> u64 {
    let records: Vec<_> = parts.iter().map(barrier).collect();
    assert!(
        records[1..].iter().all(|b| b.rtt_ns > 0),
        "every worker measured its round trip to worker 0"
    );
    assert!(
        records.iter().all(|b| b.windows == records[0].windows
            && b.start_unix_ns.len() == records[0].start_unix_ns.len()),
        "{records:?}"
    );
    (0..records[0].start_unix_ns.len())
        .map(|w| {
            let starts = records.iter().map(|b| b.start_unix_ns[w]);
            starts.clone().max().unwrap_or(0) - starts.min().unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}
