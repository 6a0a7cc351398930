//! The run protocol every tool follows: warm-up windows discarded, measured rounds interleaved
//! across systems in alternating order (ABBA…), and each window folded into its cell with the
//! status it earned.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::histogram::pool;
use crate::human::format_duration;
use crate::recorder::{encode_histogram, percentiles};
use crate::results::{Cell, Counts, Status, Throughput};
use crate::servercpu::ServerProcess;
use crate::window::WindowOutcome;

/// One pass over every system for one workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// 0-based over warm-up and measured rounds together.
    pub index: u32,
    /// 1-based number of the measured round; `None` for a warm-up.
    pub measured: Option<u32>,
}

impl Round {
    pub fn is_warmup(&self) -> bool {
        self.measured.is_none()
    }

    /// `warm-up 1/1` or `round 3/5`, for progress lines.
    pub fn label(&self, warmup: u32, rounds: u32) -> String {
        match self.measured {
            None => format!("warm-up {}/{warmup}", self.index + 1),
            Some(n) => format!("round {n}/{rounds}"),
        }
    }
}

/// The rounds of one workload: `warmup` discarded ones, then `rounds` measured ones.
pub fn rounds(warmup: u32, rounds: u32) -> impl Iterator<Item = Round> {
    (0..warmup + rounds).map(move |index| Round {
        index,
        measured: (index >= warmup).then(|| index - warmup + 1),
    })
}

/// Which fork of a run this process is (`--fork`; 0 when the run is one process).
static FORK: AtomicU32 = AtomicU32::new(0);

/// Sets this process's fork ([`round_order`] starts each even-numbered fork reversed).
pub fn set_fork(fork: u32) {
    FORK.store(fork, Ordering::Relaxed);
}

/// The order systems are measured in during round `index`: forward on even rounds, reversed on
/// odd ones, so no system is always first after the others (A B, B A, A B, …). The forks of a
/// run continue the alternation: fork 2 starts reversed (B A, A B, …), fork 3 forward again.
pub fn round_order(systems: usize, index: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..systems).collect();
    let shift = FORK.load(Ordering::Relaxed).saturating_sub(1);
    if !(index + shift).is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// One window of a run: which workload, which round, which system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub workload: usize,
    pub round: Round,
    pub system: usize,
}

/// Every window of a run in the order it is measured: workload by workload, each one's
/// warm-ups then measured rounds, the systems of each round in [`round_order`] (DESIGN rules
/// 2–4 in one place).
pub fn schedule(
    workloads: usize,
    systems: usize,
    warmup: u32,
    measured: u32,
) -> impl Iterator<Item = Step> {
    (0..workloads).flat_map(move |workload| {
        rounds(warmup, measured).flat_map(move |round| {
            round_order(systems, round.index)
                .into_iter()
                .map(move |system| Step {
                    workload,
                    round,
                    system,
                })
        })
    })
}

/// A client whose busiest lane was busy at least this share of a window was the limit of what
/// it measured: the cell is `client-limited`.
pub const CLIENT_LIMIT: f64 = 0.90;

/// The label of an open-loop cell whose schedule fell short while the client had time to spare:
/// the system could not take the offered rate (a result about the system, not a client defect).
pub const TARGET_NOT_REACHED: &str = "target not reached";

/// How bad a status is, for keeping the worst one a cell earned.
pub fn severity(status: Status) -> u8 {
    match status {
        Status::Ok => 0,
        Status::ClientLimited => 1,
        Status::Error => 2,
        Status::Timeout => 3,
        Status::Invalid => 4,
        Status::Refused => 5,
    }
}

/// Accumulates the windows of one workload × system into its cell.
#[derive(Debug, Clone)]
pub struct CellBuilder {
    cell: Cell,
    throughputs: Vec<f64>,
    round_latency: Vec<crate::results::Percentiles>,
    /// Each measured round's seconds, encoded as the cell stores them.
    round_seconds: Vec<Vec<String>>,
    /// When each measured round's window opened (ms since the Unix epoch).
    round_opened_at_ms: Vec<u64>,
    latency: Option<Histogram<u64>>,
    service: Option<Histogram<u64>>,
    lag: Option<Histogram<u64>>,
    missed_ticks: u64,
    started_ops: u64,
    measured_ns: u128,
    cpu_ns: u64,
    /// The busiest measured window's client share ([`WindowOutcome::client_busy`]), and its
    /// least busy thread's.
    client_busy: Option<f64>,
    client_busy_least: Option<f64>,
    /// The system's server, when the tool reads its CPU for this cell.
    server: Option<ServerProcess>,
    /// Its CPU over the measured windows it could be read in, and how many those were.
    server_cpu_ns: u64,
    server_rounds: usize,
    status: Status,
    reason: Option<String>,
    ceiling: Duration,
}

impl CellBuilder {
    pub fn new(cell: Cell, ceiling: Duration) -> CellBuilder {
        CellBuilder {
            cell,
            throughputs: Vec::new(),
            round_latency: Vec::new(),
            round_seconds: Vec::new(),
            round_opened_at_ms: Vec::new(),
            latency: None,
            service: None,
            lag: None,
            missed_ticks: 0,
            started_ops: 0,
            measured_ns: 0,
            cpu_ns: 0,
            client_busy: None,
            client_busy_least: None,
            server: None,
            server_cpu_ns: 0,
            server_rounds: 0,
            status: Status::Ok,
            reason: None,
            ceiling,
        }
    }

    pub fn workload(&self) -> &str {
        &self.cell.workload
    }

    pub fn system(&self) -> &str {
        &self.cell.system
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// Whether the cell can still be measured (nothing has ruled it out).
    pub fn is_live(&self) -> bool {
        matches!(self.status, Status::Ok | Status::ClientLimited)
    }

    /// Keeps the worse of the current status and `status`; on a tie the first reason stays.
    pub fn mark(&mut self, status: Status, reason: impl Into<String>) {
        if severity(status) > severity(self.status) {
            self.status = status;
            self.reason = Some(reason.into());
        }
    }

    pub fn add_label(&mut self, label: &str) {
        if !self.cell.labels.iter().any(|l| l == label) {
            self.cell.labels.push(label.to_owned());
        }
    }

    /// Folds one window in. A warm-up window only contributes its failures.
    pub fn add(&mut self, round: Round, outcome: &WindowOutcome) {
        let label = match round.measured {
            None => format!("warm-up {}", round.index + 1),
            Some(n) => format!("round {n}"),
        };
        let rec = &outcome.recorder;
        if outcome.stuck_workers > 0 {
            self.mark(
                Status::Timeout,
                format!(
                    "{label}: {} of {} workers still busy {} after the window closed",
                    outcome.stuck_workers,
                    outcome.workers,
                    format_duration(self.ceiling)
                ),
            );
        } else if let Some(fatal) = &rec.fatal {
            self.mark(Status::Error, format!("{label}: {fatal}"));
        } else if rec.counts.error > 0 {
            self.mark(
                Status::Error,
                format!(
                    "{label}: {} operations failed; first: {}",
                    rec.counts.error,
                    rec.first_error.as_deref().unwrap_or("unknown error")
                ),
            );
        }
        // Operations cancelled at the ceiling (stuck workers' are counted as timeouts too).
        let cancelled = rec
            .counts
            .timeout
            .saturating_sub(outcome.stuck_workers as u64);
        if cancelled > 0 {
            self.mark(
                Status::Timeout,
                format!(
                    "{label}: {cancelled} operations still running {} after they started were \
                     cancelled",
                    format_duration(self.ceiling)
                ),
            );
        }
        if round.is_warmup() {
            return;
        }
        self.judge_the_limit(&label, outcome);
        self.round_opened_at_ms.push(opened_at_ms(outcome.elapsed));
        self.throughputs.push(outcome.throughput());
        // A window's recorder is closed by its driver; a second left open is counted all the same.
        let latency = rec.latency_so_far();
        self.round_latency.extend(percentiles(&latency));
        if let Some(seconds) = &rec.per_second {
            self.round_seconds.push(seconds.encode());
        }
        pool(&mut self.latency, Some(&latency));
        pool(&mut self.service, rec.service.as_ref());
        pool(&mut self.lag, rec.lag.as_ref());
        self.missed_ticks += rec.missed_ticks;
        let counts = &mut self.cell.counts;
        counts.ok += rec.counts.ok;
        counts.error += rec.counts.error;
        counts.timeout += rec.counts.timeout;
        self.started_ops += rec.counts.ok + rec.counts.error + rec.counts.timeout;
        self.measured_ns += outcome.elapsed.as_nanos();
        self.cpu_ns += outcome.client_cpu_ns;
        self.cell.target_rate = outcome.target_rate;
    }

    /// Says where this cell's server runs, so its CPU is read beside the client's
    /// ([`CellBuilder::add_server_cpu`]).
    pub fn server(&mut self, server: &ServerProcess) {
        self.server = Some(server.clone());
    }

    /// The server's CPU time now, when this cell reads it: taken as its window opens.
    pub fn server_cpu_now(&self) -> Option<u64> {
        self.server.as_ref().and_then(ServerProcess::cpu_ns)
    }

    /// The server's CPU time since `before`: taken as the window closes, before anything else
    /// (a verification query) asks the server for more work.
    pub fn server_cpu_since(&self, before: Option<u64>) -> Option<u64> {
        self.server.as_ref().and_then(|s| s.cpu_since(before))
    }

    /// Folds in the server's CPU time over the window [`CellBuilder::add`] has just folded in
    /// (`None` when it could not be read); a warm-up's is discarded.
    pub fn add_server_cpu(&mut self, round: Round, cpu_ns: Option<u64>) {
        if let (Some(ns), false) = (cpu_ns, round.is_warmup()) {
            self.server_cpu_ns += ns;
            self.server_rounds += 1;
        }
    }

    /// The server's CPU per operation and in cores, when every measured round read it.
    fn server_cpu(&self, cell: &mut Cell, completed: u64) {
        let Some(server) = &self.server else {
            return;
        };
        let every_round = self.server_rounds == self.throughputs.len() && self.server_rounds > 0;
        cell.server_cpu_source = Some(match server {
            ServerProcess::Local(pid) if !every_round && !self.throughputs.is_empty() => {
                format!(
                    "not measured: the process tree of PID {pid} could not be read in every round"
                )
            }
            _ => server.source(),
        });
        // An in-process server's CPU is the client's own: it is never counted twice.
        if every_round && matches!(server, ServerProcess::Local(_)) {
            let ns = self.server_cpu_ns as f64;
            cell.server_cpu_ns_per_op = (completed > 0).then(|| ns / completed as f64);
            cell.server_cpu_cores = (self.measured_ns > 0).then(|| ns / self.measured_ns as f64);
        }
    }

    /// Names what limited a measured window (DESIGN rule 11): the client when its busiest lane
    /// was busy for [`CLIENT_LIMIT`] of it or more, the system when an open-loop schedule fell
    /// more than 5% short while the client had time to spare.
    fn judge_the_limit(&mut self, label: &str, outcome: &WindowOutcome) {
        if let Some(busy) = outcome.client_busy
            && self.client_busy.is_none_or(|b| busy > b)
        {
            self.client_busy = Some(busy);
            self.client_busy_least = outcome.client_busy_least;
        }
        let busy = outcome.client_busy.filter(|_| outcome.busy_is_the_clients);
        if let Some(busy) = busy.filter(|&b| b >= CLIENT_LIMIT) {
            self.mark(
                Status::ClientLimited,
                format!(
                    "{label}: the client's busiest lane was on a CPU {:.0}% of the window (the \
                     limit is {:.0}%): these figures are the client's, not the system's",
                    busy * 100.0,
                    CLIENT_LIMIT * 100.0
                ),
            );
            return;
        }
        if let Some(target) = outcome.target_rate
            && outcome.achieved_rate() < 0.95 * target
        {
            self.add_label(TARGET_NOT_REACHED);
        }
    }

    /// The cell as it stands; safe to call after every window (results are rewritten each time).
    pub fn to_cell(&self) -> Cell {
        let mut cell = self.cell.clone();
        cell.status = self.status;
        cell.reason.clone_from(&self.reason);
        let measured = self.throughputs.len() as u32;
        if measured < cell.rounds_planned && self.is_live() {
            cell.status = Status::Error;
            cell.reason = Some(format!(
                "incomplete: {measured} of {} rounds measured",
                cell.rounds_planned
            ));
        }
        cell.throughput = Throughput::from_rounds(self.throughputs.clone());
        cell.latency_ns = self.latency.as_ref().and_then(percentiles);
        // Latency is judged round by round only when every measured round has a figure.
        cell.latency_rounds_ns = if self.round_latency.len() == self.throughputs.len() {
            self.round_latency.clone()
        } else {
            Vec::new()
        };
        cell.service_time_ns = self.service.as_ref().and_then(percentiles);
        cell.schedule_lag_ns = self.lag.as_ref().and_then(percentiles);
        if cell.target_rate.is_some() {
            cell.missed_ticks = Some(self.missed_ticks);
            cell.achieved_rate = (self.measured_ns > 0)
                .then(|| self.started_ops as f64 * 1e9 / self.measured_ns as f64);
        }
        let completed = cell.counts.ok + cell.counts.error;
        cell.client_cpu_ns_per_op = (completed > 0).then(|| self.cpu_ns as f64 / completed as f64);
        cell.client_busy = self.client_busy;
        cell.client_busy_least = self.client_busy_least;
        self.server_cpu(&mut cell, completed);
        cell.histogram_b64 = self.latency.as_ref().map(encode_histogram);
        cell.service_histogram_b64 = self.service.as_ref().map(encode_histogram);
        // Like the round latencies: every measured round's seconds, or none.
        cell.latency_per_second_b64 = if self.round_seconds.len() == self.throughputs.len() {
            self.round_seconds.clone()
        } else {
            Vec::new()
        };
        cell.round_opened_at_ms.clone_from(&self.round_opened_at_ms);
        cell
    }

    /// The pooled operation counts so far.
    pub fn counts(&self) -> Counts {
        self.cell.counts
    }
}

/// When a window that has just closed after `elapsed` opened, in ms since the Unix epoch.
fn opened_at_ms(elapsed: Duration) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    now.saturating_sub(elapsed).as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;

    fn outcome(ok: u64, latency_us: u64) -> WindowOutcome {
        let mut recorder = Recorder::new(false);
        for _ in 0..ok {
            recorder.record_ok(
                Duration::from_micros(latency_us),
                Duration::from_micros(latency_us),
            );
        }
        WindowOutcome {
            recorder,
            workers: 2,
            elapsed: Duration::from_secs(1),
            stuck_workers: 0,
            client_cpu_ns: ok * 1_000,
            client_busy: None,
            client_busy_least: None,
            busy_is_the_clients: true,
            target_rate: None,
        }
    }

    fn builder(rounds: u32) -> CellBuilder {
        CellBuilder::new(
            Cell::new("read 16c", "pg", "ops/s", 16, rounds),
            Duration::from_secs(120),
        )
    }

    #[test]
    fn systems_alternate_which_goes_first() {
        assert_eq!(round_order(2, 0), vec![0, 1]);
        assert_eq!(round_order(2, 1), vec![1, 0]);
        assert_eq!(round_order(3, 2), vec![0, 1, 2]);
        let all: Vec<Round> = rounds(1, 2).collect();
        assert!(all[0].is_warmup());
        assert_eq!(all[1].measured, Some(1));
        assert_eq!(all[2].label(1, 2), "round 2/2");
        assert_eq!(all[0].label(1, 2), "warm-up 1/1");
    }

    #[test]
    fn the_schedule_interleaves_and_alternates() {
        let steps: Vec<(usize, Option<u32>, usize)> = schedule(2, 2, 1, 2)
            .map(|s| (s.workload, s.round.measured, s.system))
            .collect();
        assert_eq!(
            steps,
            [
                (0, None, 0),
                (0, None, 1),
                (0, Some(1), 1),
                (0, Some(1), 0),
                (0, Some(2), 0),
                (0, Some(2), 1),
                (1, None, 0),
                (1, None, 1),
                (1, Some(1), 1),
                (1, Some(1), 0),
                (1, Some(2), 0),
                (1, Some(2), 1),
            ]
        );
    }

    #[test]
    fn warmups_are_discarded_and_samples_pooled() {
        let mut b = builder(2);
        b.add(rounds(1, 2).next().unwrap(), &outcome(1_000_000, 1));
        let mut measured = rounds(1, 2).skip(1);
        b.add(measured.next().unwrap(), &outcome(100, 100));
        let partial = b.to_cell();
        assert_eq!(partial.status, Status::Error);
        assert!(partial.reason.as_deref().unwrap().contains("1 of 2 rounds"));
        b.add(measured.next().unwrap(), &outcome(300, 300));
        let cell = b.to_cell();
        assert_eq!(cell.status, Status::Ok);
        assert_eq!(cell.counts.ok, 400);
        let t = cell.throughput.as_ref().unwrap();
        assert_eq!(t.rounds, vec![100.0, 300.0]);
        assert_eq!(t.median, 200.0);
        // Pooled, not a median of medians: 3 of 4 samples are 300 µs.
        let p50 = cell.latency_ns.unwrap().p50;
        assert!((299_000..=301_000).contains(&p50), "{p50}");
        assert_eq!(cell.client_cpu_ns_per_op, Some(1_000.0));
        assert!(cell.histogram_b64.is_some());
    }

    #[test]
    fn the_servers_cpu_is_kept_beside_the_clients_over_measured_rounds() {
        let mut b = builder(2);
        b.server(&ServerProcess::Local(42));
        let all: Vec<Round> = rounds(1, 2).collect();
        for (round, ok) in all.iter().zip([1_000, 100, 300]) {
            b.add(*round, &outcome(ok, 10));
            b.add_server_cpu(*round, Some(ok * 5_000));
        }
        let cell = b.to_cell();
        assert_eq!(
            cell.server_cpu_source.as_deref(),
            Some("process tree of PID 42")
        );
        // The warm-up's 5 ms are not counted: 2 ms over 400 operations and 2 s of windows.
        assert_eq!(cell.server_cpu_ns_per_op, Some(5_000.0));
        assert_eq!(cell.server_cpu_cores, Some(0.001));
        let mut unread = builder(1);
        unread.server(&ServerProcess::Local(42));
        unread.add(all[1], &outcome(100, 10));
        unread.add_server_cpu(all[1], None);
        let cell = unread.to_cell();
        assert!(
            cell.server_cpu_source
                .unwrap()
                .contains("could not be read in every round")
        );
        assert_eq!(
            (cell.server_cpu_ns_per_op, cell.server_cpu_cores),
            (None, None)
        );
        let mut embedded = builder(1);
        embedded.server(&ServerProcess::InProcess);
        embedded.add(all[1], &outcome(100, 10));
        // Even when a tool reads an embedded engine's own threads, the cell does not count
        // them as a server's: they are in the client's CPU already.
        embedded.add_server_cpu(all[1], Some(1_000));
        let cell = embedded.to_cell();
        assert_eq!(cell.server_cpu_source.as_deref(), Some("in process"));
        assert_eq!(cell.server_cpu_ns_per_op, None);
        assert_eq!(builder(1).to_cell().server_cpu_source, None);
    }

    #[test]
    fn each_measured_round_keeps_its_seconds() {
        let origin = std::time::Instant::now();
        let window = |ops_per_second: &[u64]| {
            let mut recorder = Recorder::with_seconds(false, origin);
            for (second, &ops) in ops_per_second.iter().enumerate() {
                for i in 0..ops {
                    let ended = origin + Duration::from_millis(second as u64 * 1_000 + i);
                    let d = Duration::from_micros(100);
                    recorder.record_ok_at(ended, d, d);
                }
            }
            WindowOutcome {
                recorder,
                ..outcome(0, 1)
            }
        };
        let mut b = builder(2);
        let mut all = rounds(1, 2);
        b.add(all.next().unwrap(), &window(&[50]));
        b.add(all.next().unwrap(), &window(&[3, 4]));
        b.add(all.next().unwrap(), &window(&[5, 0, 6]));
        let cell = b.to_cell();
        let per_round: Vec<Vec<u64>> = cell
            .latency_per_second_b64
            .iter()
            .map(|round| {
                crate::seconds::decode_round(round)
                    .unwrap()
                    .iter()
                    .map(|h| h.len())
                    .collect()
            })
            .collect();
        assert_eq!(per_round, [vec![3, 4], vec![5, 0, 6]], "warm-up discarded");
        assert_eq!(cell.counts.ok, 18);
        let pooled = crate::recorder::decode_histogram(cell.histogram_b64.as_ref().unwrap());
        assert_eq!(
            pooled.unwrap().len(),
            18,
            "the open last second is in the pool"
        );
    }

    #[test]
    fn the_worst_status_wins_and_keeps_its_reason() {
        let mut b = builder(1);
        let mut failed = outcome(10, 10);
        failed.recorder.record_error("duplicate key");
        b.add(rounds(0, 1).next().unwrap(), &failed);
        assert_eq!(b.status(), Status::Error);
        b.mark(Status::Invalid, "wrote 10, found 9");
        b.mark(Status::Error, "later error");
        let cell = b.to_cell();
        assert_eq!(cell.status, Status::Invalid);
        assert_eq!(cell.reason.as_deref(), Some("wrote 10, found 9"));
        assert!(!b.is_live());
    }

    #[test]
    fn stuck_workers_make_a_timeout() {
        let mut b = builder(1);
        let mut stuck = outcome(10, 10);
        stuck.stuck_workers = 1;
        b.add(rounds(0, 1).next().unwrap(), &stuck);
        assert_eq!(b.status(), Status::Timeout);
        assert!(b.to_cell().reason.unwrap().contains("still busy 120s"));
    }

    #[test]
    fn a_short_rate_with_an_idle_client_is_the_systems_limit_and_a_busy_client_its_own() {
        let short = |busy| WindowOutcome {
            target_rate: Some(1_000.0),
            client_busy: Some(busy),
            client_busy_least: None,
            ..outcome(500, 10)
        };
        let mut b = builder(1);
        b.add(rounds(0, 1).next().unwrap(), &short(0.05));
        let cell = b.to_cell();
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
        assert_eq!(cell.labels, [TARGET_NOT_REACHED]);
        assert_eq!(cell.achieved_rate, Some(500.0));
        assert_eq!(cell.missed_ticks, Some(0));
        assert_eq!(cell.client_busy, Some(0.05));

        let mut b = builder(1);
        b.add(rounds(0, 1).next().unwrap(), &short(0.97));
        let cell = b.to_cell();
        assert_eq!(cell.status, Status::ClientLimited);
        assert!(cell.reason.unwrap().contains("on a CPU 97%"));
        assert!(cell.labels.is_empty());

        // Closed loop: a saturated client is named too; threads that may run an embedded
        // engine (blocking workers) are reported but name nothing.
        let mut b = builder(1);
        let mut busy = WindowOutcome {
            client_busy: Some(0.95),
            client_busy_least: None,
            ..outcome(500, 10)
        };
        b.add(rounds(0, 1).next().unwrap(), &busy);
        assert_eq!(b.status(), Status::ClientLimited);
        let mut b = builder(1);
        busy.busy_is_the_clients = false;
        b.add(rounds(0, 1).next().unwrap(), &busy);
        assert_eq!(b.status(), Status::Ok);
        assert_eq!(b.to_cell().client_busy, Some(0.95));
    }
}
