//! A run as a Kubernetes Indexed Job makes it, on one machine: worker processes each in a
//! network namespace of its own ([`Namespaces`]), told their index by `JOB_COMPLETION_INDEX`
//! and worker 0's barrier by its namespace address, each writing its part to
//! `ROOT/worker-INDEX`; the merge Job's `merge` on the host; and what a test of them asserts
//! of every tool (the parts, the barrier's skew, a worker killed before the barrier).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use super::netns::Namespaces;
use super::process::{self, Started, barrier, start};
use crate::results::{Report, Status};

/// One tool's Indexed Job in the test's namespaces.
pub struct Job<'a> {
    pub net: &'a Namespaces,
    /// The tool's binary (`env!("CARGO_BIN_EXE_…")`).
    pub binary: &'a str,
    /// Where worker 0 listens, in its own namespace (where every port is free).
    pub barrier_port: u16,
    /// `--run-id`, the same for every worker.
    pub run_id: &'a str,
    /// No process of the test runs longer than this (the load loops are bounded by their
    /// windows).
    pub limit: Duration,
    /// The folder the parts (`worker-INDEX`) and the merged run (`merged`) go to.
    pub root: &'a Path,
}

impl Job<'_> {
    /// Worker 0's barrier address, as every worker is told it.
    pub fn barrier(&self) -> String {
        format!("{}:{}", self.net.address(0), self.barrier_port)
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
            .args([
                "--worker-count",
                &count.to_string(),
                "--run-id",
                self.run_id,
            ])
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

/// How far apart the workers' starts of one window were at the most, in ns, over every
/// window of `parts` (one clock for every namespace of one host: the starts are comparable),
/// after checking that every worker but 0 measured its round trip to worker 0 and that every
/// worker met as often.
pub fn barrier_skew_ns(parts: &[Report]) -> u64 {
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
