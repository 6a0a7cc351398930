//! The result model every tool writes to `results.json`: versioned, self-describing, and the
//! single input of every renderer and of later tools (compare, merge, HTML report).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::environment::Environment;

/// Bumped whenever a field is renamed or changes meaning; adding a field does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON Schema every tool's `results.json` validates against (checked in beside the code,
/// checked by every tool's tests): the core, then each tool's own fields, by URL.
pub const RESULTS_SCHEMA: [(&str, &str); 6] = [
    (
        "https://fairbench.dev/schema/results.schema.json",
        include_str!("../schema/results.schema.json"),
    ),
    (
        "https://fairbench.dev/schema/tools/sql-bench.schema.json",
        include_str!("../schema/tools/sql-bench.schema.json"),
    ),
    (
        "https://fairbench.dev/schema/tools/search-bench.schema.json",
        include_str!("../schema/tools/search-bench.schema.json"),
    ),
    (
        "https://fairbench.dev/schema/tools/vector-bench.schema.json",
        include_str!("../schema/tools/vector-bench.schema.json"),
    ),
    (
        "https://fairbench.dev/schema/tools/mqtt-bench.schema.json",
        include_str!("../schema/tools/mqtt-bench.schema.json"),
    ),
    (
        "https://fairbench.dev/schema/tools/geo-bench.schema.json",
        include_str!("../schema/tools/geo-bench.schema.json"),
    ),
];

/// One run: one measurement round, one section (DESIGN rule 10).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Report {
    pub schema_version: u32,
    pub tool: String,
    pub tool_version: String,
    pub git_commit: Option<String>,
    pub suite: String,
    /// The section title: what was held equal for every system in this run (for example the
    /// durability configuration). Never two sections in one report.
    pub section: String,
    pub run_id: String,
    /// The system every other is compared with (`--reference`, else the first).
    pub reference: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Every flag, as parsed (credentials redacted).
    pub options: serde_json::Value,
    pub environment: Environment,
    /// The generated data: seed, checksum and shape, identical for every system.
    pub data: Option<DataInfo>,
    pub systems: Vec<SystemInfo>,
    pub cells: Vec<Cell>,
    pub verdicts: Vec<Verdict>,
    /// The pairs that got no verdict, each with its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_verdicts: Vec<NoVerdict>,
    /// What the run does not establish, and anything else a reader must know.
    pub notes: Vec<String>,
    /// Tool-specific sections (a recall curve, a batch-size sweep, …), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
    /// One worker's part of a run of several (`--worker-count`): which, where, its barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerInfo>,
    /// A merged run: every worker's block and its own figures of each cell (the spread).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerPart>,
    /// A run of several `--forks`: each fork's process (each cell's `forks` has its figures).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks: Vec<ForkRun>,
}

impl Report {
    /// A report with no systems or cells yet, stamped with the tool, the time and the machine.
    pub fn begin(
        tool: &str,
        tool_version: &str,
        suite: &str,
        section: &str,
        options: serde_json::Value,
        environment: Environment,
    ) -> Report {
        let started_at = crate::clock::now_rfc3339();
        Report {
            schema_version: SCHEMA_VERSION,
            tool: tool.to_owned(),
            tool_version: tool_version.to_owned(),
            git_commit: crate::git_commit(),
            suite: suite.to_owned(),
            section: section.to_owned(),
            run_id: format!(
                "{tool}-{suite}-{}-{:x}",
                crate::clock::compact(&started_at),
                std::process::id()
            ),
            reference: None,
            started_at,
            finished_at: None,
            options,
            environment,
            data: None,
            systems: Vec::new(),
            cells: Vec::new(),
            verdicts: Vec::new(),
            no_verdicts: Vec::new(),
            notes: Vec::new(),
            extra: BTreeMap::new(),
            worker: None,
            workers: Vec::new(),
            forks: Vec::new(),
        }
    }

    /// Puts `cell` in place of the cell of the same workload and system, or appends it. A
    /// system whose certificate `--insecure-skip-verify` left unchecked labels every cell.
    pub fn upsert_cell(&mut self, mut cell: Cell) {
        let insecure = crate::tls::INSECURE_LABEL;
        if self
            .systems
            .iter()
            .any(|s| s.name == cell.system && s.labels.iter().any(|l| l == insecure))
            && !cell.labels.iter().any(|l| l == insecure)
        {
            cell.labels.push(insecure.to_owned());
        }
        match self
            .cells
            .iter_mut()
            .find(|c| c.workload == cell.workload && c.system == cell.system)
        {
            Some(slot) => *slot = cell,
            None => self.cells.push(cell),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DataInfo {
    pub seed: u64,
    /// FNV-1a 64 over the generated bytes, hex.
    pub checksum: String,
    pub description: String,
}

/// A measured system, described by what it reported about itself.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct SystemInfo {
    pub name: String,
    /// The engine family (`postgres`, `mariadb`, `sqlite`, …).
    pub kind: String,
    pub url_redacted: String,
    /// As the server reported it (`SELECT version()`, …), never typed by hand.
    pub version: String,
    /// Settings read back from the system and checked: setting → value.
    pub verified: BTreeMap<String, String>,
    /// Labels every cell of this system carries in every report (`unmatched durability`, …).
    pub labels: Vec<String>,
    /// Where the system keeps its data, when it is on this machine.
    pub data_dir: Option<String>,
    /// Median 4 KiB O_DSYNC write latency measured in `data_dir`.
    pub durable_write_floor_ns: Option<u64>,
    /// Where the system runs, as seen from the client.
    #[serde(default)]
    pub location: Location,
    /// What could not be measured of this system, and why (a remote server's disk, CPU, memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<String>,
}

/// Where a system runs, as seen from the client.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Location {
    /// Inside the client's own process: its CPU is the client's.
    Embedded,
    /// On this machine (loopback or a local socket): its disk and process can be read here.
    #[default]
    Local,
    /// On another host: only what its protocol reports can be read.
    Remote,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    /// A result that disagreed with the others or with what was written: no number is given.
    Invalid,
    Timeout,
    Error,
    /// The system was not measured: it did not match what the run requires.
    Refused,
    /// An open-loop run that fell more than 5% short of its target rate.
    ClientLimited,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Invalid => "invalid",
            Status::Timeout => "timeout",
            Status::Error => "error",
            Status::Refused => "refused",
            Status::ClientLimited => "client-limited",
        }
    }
}

/// One workload × system.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Cell {
    pub workload: String,
    pub system: String,
    pub status: Status,
    pub reason: Option<String>,
    /// Unit of the throughput figures (`ops/s`).
    pub unit: String,
    pub labels: Vec<String>,
    pub connections: u32,
    pub rounds_planned: u32,
    pub throughput: Option<Throughput>,
    pub latency_ns: Option<Percentiles>,
    /// The latency percentiles of each measured round, in the order measured (what latency
    /// verdicts are judged on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_rounds_ns: Vec<Percentiles>,
    /// Open loop only: time from the actual start of each operation to its end.
    pub service_time_ns: Option<Percentiles>,
    pub counts: Counts,
    pub target_rate: Option<f64>,
    pub achieved_rate: Option<f64>,
    /// Open loop only: how late operations started against their schedule.
    pub schedule_lag_ns: Option<Percentiles>,
    /// Open loop only: operations that started more than one interval late.
    pub missed_ticks: Option<u64>,
    /// The client's own CPU time (user + system) per completed operation, over measured rounds.
    pub client_cpu_ns_per_op: Option<f64>,
    /// The share (0–1) of the busiest measured window the client's busiest lane ran on a CPU
    /// (blocking workers: their threads together over the cores they could use); at 0.9 or more
    /// on a lane the cell is `client-limited`. Absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_busy: Option<f64>,
    /// The least busy lane's share in that window: the spread beside `client_busy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_busy_least: Option<f64>,
    /// How the server's CPU was read: `process tree of PID n` (a server on this machine, its
    /// process and every process below it), `in process` (an embedded engine: its CPU is the
    /// client's), `not measured: remote`, or why it was not read. Absent when the tool does not
    /// read it for this cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_source: Option<String>,
    /// The server's CPU time (user + system) per completed operation, over measured rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_ns_per_op: Option<f64>,
    /// The server's CPU time over the measured windows' wall time: the cores it kept busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_cores: Option<f64>,
    /// The pooled latency histogram of all measured rounds, HdrHistogram V2 + deflate, base64.
    pub histogram_b64: Option<String>,
    pub service_histogram_b64: Option<String>,
    /// The latency of each second of each measured round (HdrHistogram V2 + deflate, base64):
    /// one list per round in the order measured, one histogram per 1 s interval counted from
    /// the opening of that round's window, an operation in the second it completed in. Their
    /// counts add up to `histogram_b64`'s. Empty when the cell was not measured that way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_per_second_b64: Vec<Vec<String>>,
    /// When each measured round's window opened, in milliseconds since the Unix epoch on the
    /// client's clock, in the order measured: how the order the systems ran in each round (DESIGN
    /// rule 4) is read back from a run. Empty when the cell was not measured that way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_opened_at_ms: Vec<u64>,
    /// Tool-specific figures of this cell (recall, loss, batch size, …), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
    /// A run of several `--forks`: each fork's own figures of this cell, in fork order. With
    /// two or more, they (not the rounds) are the replicates every interval is computed over,
    /// and the cell's throughput median is the median of the forks' medians. Empty for a run
    /// in one process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks: Vec<ForkFigures>,
}

/// One fork's figures of one cell.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ForkFigures {
    /// 1 … --forks.
    pub fork: u32,
    pub status: Status,
    pub reason: Option<String>,
    /// The median of this fork's measured rounds.
    pub throughput: Option<f64>,
    /// This fork's latency percentiles over its measured rounds.
    pub latency_p50_ns: Option<u64>,
    pub latency_p99_ns: Option<u64>,
    /// Each of its measured rounds' throughput, in the order measured.
    pub rounds: Vec<f64>,
}

/// One fork of a run: its process, how it ended, and when.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ForkRun {
    pub fork: u32,
    pub pid: u32,
    /// `exit 0`, `exit 1`, `killed by signal 9`.
    pub ended: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Where its own results folder is.
    pub results: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::calibration::Calibration>,
}

impl Cell {
    pub fn new(workload: &str, system: &str, unit: &str, connections: u32, rounds: u32) -> Cell {
        Cell {
            workload: workload.to_owned(),
            system: system.to_owned(),
            status: Status::Ok,
            reason: None,
            unit: unit.to_owned(),
            labels: Vec::new(),
            connections,
            rounds_planned: rounds,
            throughput: None,
            latency_ns: None,
            latency_rounds_ns: Vec::new(),
            service_time_ns: None,
            counts: Counts::default(),
            target_rate: None,
            achieved_rate: None,
            schedule_lag_ns: None,
            missed_ticks: None,
            client_cpu_ns_per_op: None,
            client_busy: None,
            client_busy_least: None,
            server_cpu_source: None,
            server_cpu_ns_per_op: None,
            server_cpu_cores: None,
            histogram_b64: None,
            service_histogram_b64: None,
            latency_per_second_b64: Vec::new(),
            round_opened_at_ms: Vec::new(),
            extra: BTreeMap::new(),
            forks: Vec::new(),
        }
    }

    /// A cell that was never measured, with its reason.
    pub fn unmeasured(
        workload: &str,
        system: &str,
        unit: &str,
        status: Status,
        reason: &str,
    ) -> Cell {
        let mut cell = Cell::new(workload, system, unit, 0, 0);
        cell.status = status;
        cell.reason = Some(reason.to_owned());
        cell
    }

    /// The throughput a reader may use: only an `ok` cell has one.
    pub fn usable_throughput(&self) -> Option<&Throughput> {
        match self.status {
            Status::Ok => self.throughput.as_ref(),
            _ => None,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Throughput {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// One figure per measured round, in the order measured.
    pub rounds: Vec<f64>,
}

impl Throughput {
    pub fn from_rounds(rounds: Vec<f64>) -> Option<Throughput> {
        let median = median(&rounds)?;
        let (min, max) = rounds
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        Some(Throughput {
            median,
            min,
            max,
            rounds,
        })
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct Percentiles {
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub ok: u64,
    pub error: u64,
    pub timeout: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// The whole interval lies beyond the practical threshold, on the better side.
    Faster,
    /// The whole interval lies beyond the practical threshold, on the worse side.
    Slower,
    /// The whole interval lies inside the practical threshold.
    Parity,
    /// The interval reaches across the threshold: more rounds would decide.
    Inconclusive,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Faster => "faster",
            VerdictKind::Slower => "slower",
            VerdictKind::Parity => "parity",
            VerdictKind::Inconclusive => "inconclusive",
        }
    }
}

/// What a verdict compares.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The per-round throughputs (higher is better).
    #[default]
    Throughput,
    /// The per-round latency medians (lower is better).
    LatencyP50,
    /// The per-round latency 99th percentiles (lower is better).
    LatencyP99,
}

impl Metric {
    pub const ALL: [Metric; 3] = [Metric::Throughput, Metric::LatencyP50, Metric::LatencyP99];

    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::LatencyP50 => "latency_p50",
            Metric::LatencyP99 => "latency_p99",
        }
    }
}

/// A system against the reference on one metric, in one run: the ratio of medians of their
/// per-round figures, its confidence interval, and what the interval says at the threshold.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Verdict {
    pub workload: String,
    pub system: String,
    pub reference: String,
    #[serde(default)]
    pub metric: Metric,
    /// The system's median over the reference's (for latency, below 1 is faster).
    pub ratio: f64,
    /// The interval of the ratio, `[low, high]`.
    pub interval: [f64; 2],
    /// The coverage the interval achieves with these round counts.
    pub confidence: f64,
    pub verdict: VerdictKind,
}

/// A pair that got no verdict, and why (too few rounds, cells not comparable, no figure).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct NoVerdict {
    pub workload: String,
    pub system: String,
    pub reference: String,
    #[serde(default)]
    pub metric: Metric,
    pub reason: String,
}

/// The `worker` block of a worker's results.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkerInfo {
    pub index: u32,
    pub count: u32,
    pub run_id: String,
    /// The machine (pod) it ran on.
    pub host: String,
    /// FNV-1a 64 of the options every worker must share, hex.
    pub options_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier: Option<crate::scale::barrier::BarrierRecord>,
}

/// One worker in a merged run: its block, its machine, and its own figures of every cell.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkerPart {
    #[serde(flatten)]
    pub worker: WorkerInfo,
    pub cpu_model: String,
    pub cores: u32,
    pub loadavg_start: [f64; 3],
    pub started_at: String,
    pub finished_at: Option<String>,
    pub cells: Vec<WorkerCell>,
}

/// A worker's own figures of one cell: a worker that lagged shows here.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkerCell {
    pub workload: String,
    pub system: String,
    pub status: Status,
    pub connections: u32,
    pub throughput_rounds: Vec<f64>,
    pub ok: u64,
    pub latency_p99_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let t = Throughput::from_rounds(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((t.median, t.min, t.max), (2.5, 1.0, 4.0));
        assert_eq!(t.rounds, vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(Throughput::from_rounds(vec![7.0]).unwrap().median, 7.0);
        assert!(Throughput::from_rounds(vec![]).is_none());
    }

    #[test]
    fn statuses_serialize_as_the_contract_names() {
        let json = serde_json::to_string(&[Status::Ok, Status::ClientLimited]).unwrap();
        assert_eq!(json, r#"["ok","client-limited"]"#);
        assert_eq!(Status::ClientLimited.as_str(), "client-limited");
    }
}
