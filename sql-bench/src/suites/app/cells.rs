//! The app suite's cells, one per scenario × engine: every raw measurement pooled across rounds
//! (never a median of medians), each round's own figure for the verdicts (a write's
//! `throughput` is over its rounds, as in every tool; its batches' rates go to `extra`), the
//! rows the scenario must return, the evidence read from each engine, and the status each cell
//! earned.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::protocol::severity;
use common::recorder::{Recorder, encode_histogram, percentiles};
use common::results::{Cell, Report, Status, SystemInfo, Throughput};
use common::servercpu::ServerProcess;

use super::answer::Answer;
use super::data::Data;
use super::scenarios::Scenario;
use crate::opts::AppOpts;

/// One round's inserts: the timed batches (those after the warm-up) and the client's CPU time
/// over them. Held as histograms, so its size does not grow with the rows.
#[derive(Debug, Clone)]
pub struct Inserted {
    /// Each timed batch's time.
    pub batch_times: Recorder,
    /// Each timed batch's time per row: its rate's inverse, so the rates' median and range
    /// come from one histogram.
    pub row_times: Recorder,
    pub rows: u64,
    pub time: Duration,
    /// Rows of the warm-up batches, written and not timed.
    pub warmup_rows: u64,
    pub client_cpu_ns: u64,
    /// The server's CPU time from the first timed batch to the last, when it was read.
    pub server_cpu_ns: Option<u64>,
    /// The wall time of the same stretch (the batches and the client's work between them).
    pub server_wall: Duration,
}

impl Default for Inserted {
    fn default() -> Inserted {
        Inserted {
            batch_times: Recorder::new(false),
            row_times: Recorder::new(false),
            rows: 0,
            time: Duration::ZERO,
            warmup_rows: 0,
            client_cpu_ns: 0,
            server_cpu_ns: None,
            server_wall: Duration::ZERO,
        }
    }
}

impl Inserted {
    /// A timed batch of `rows` that took `time`.
    pub fn add_batch(&mut self, time: Duration, rows: u64) {
        self.batch_times.record_ok(time, time);
        let per_row = time / u32::try_from(rows.max(1)).unwrap_or(u32::MAX);
        self.row_times.record_ok(per_row, per_row);
        self.rows += rows;
        self.time += time;
    }

    /// The round's rate: its timed rows over the time their batches took.
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.time.as_secs_f64().max(1e-9)
    }
}

struct AppCell {
    scenario: Scenario,
    system: String,
    /// What the scenario must return (reads), from the generated data.
    expected: Option<Answer>,
    /// Rows the scenario returns (reads) or inserts per round (writes).
    rows: u64,
    /// Iteration times (reads) or timed batch times (writes), pooled over rounds.
    samples: Recorder,
    /// Reads: each round's median iteration time, ns. Writes: each round's rows/s.
    per_round: Vec<f64>,
    /// Writes: each timed batch's time per row, pooled over rounds.
    row_times: Recorder,
    /// Writes: rows per round written in the warm-up batches, not timed.
    warmup_rows: u64,
    /// Writes: the client's CPU time and the wall time over every batch.
    client_cpu_ns: u64,
    wall_ns: u64,
    status: Status,
    reason: Option<String>,
    labels: Vec<String>,
    rounds_planned: u32,
    /// How the engine answered, when its adapter had to emulate the request.
    answered_by: BTreeSet<String>,
    /// Where the engine's server runs, and its CPU over the timed part of each measured round
    /// (summed with the wall time and the operations of those rounds) in how many rounds.
    server: ServerProcess,
    server_cpu_ns: u64,
    server_wall_ns: u64,
    server_ops: u64,
    server_rounds: usize,
}

pub struct Cells {
    cells: Vec<AppCell>,
    systems: Vec<String>,
    evidence: BTreeMap<String, BTreeMap<String, String>>,
    /// In-process engines: the most memory each held at once, as it reports it.
    engine_heap_peak_bytes: BTreeMap<String, u64>,
    /// Where each system's server runs, in `systems`' order.
    servers: Vec<ServerProcess>,
}

fn median(values: &mut [u64]) -> f64 {
    values.sort_unstable();
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) as f64 / 2.0
    } else {
        values[mid] as f64
    }
}

impl Cells {
    /// A cell per scenario and system (each system with why it is refused, if it is).
    pub fn new(
        opts: &AppOpts,
        systems: &[(&SystemInfo, Option<&str>)],
        scenarios: &[Scenario],
        data: &Data,
    ) -> Cells {
        let servers: Vec<ServerProcess> = systems
            .iter()
            .map(|(info, _)| ServerProcess::locate(info, None))
            .collect();
        let mut cells = Vec::new();
        for scenario in scenarios {
            let answer = data.expected(*scenario);
            let rows = match scenario {
                Scenario::Fill => opts.rows,
                Scenario::Append => opts.append_rows(),
                _ => answer.map_or(0, |a| a.rows),
            };
            for ((info, refused), server) in systems.iter().zip(&servers) {
                let (status, reason) = match refused {
                    Some(reason) => (Status::Refused, Some((*reason).to_owned())),
                    None => (Status::Ok, None),
                };
                cells.push(AppCell {
                    scenario: *scenario,
                    system: info.name.clone(),
                    expected: answer,
                    rows,
                    samples: Recorder::new(false),
                    per_round: Vec::new(),
                    row_times: Recorder::new(false),
                    warmup_rows: 0,
                    client_cpu_ns: 0,
                    wall_ns: 0,
                    status,
                    reason,
                    labels: info.labels.clone(),
                    rounds_planned: opts.common.rounds,
                    answered_by: BTreeSet::new(),
                    server: server.clone(),
                    server_cpu_ns: 0,
                    server_wall_ns: 0,
                    server_ops: 0,
                    server_rounds: 0,
                });
            }
        }
        Cells {
            cells,
            systems: systems.iter().map(|(info, _)| info.name.clone()).collect(),
            evidence: BTreeMap::new(),
            engine_heap_peak_bytes: BTreeMap::new(),
            servers,
        }
    }

    /// Where system `system`'s server runs, for a timed phase to read its CPU.
    pub fn server(&self, system: usize) -> &ServerProcess {
        &self.servers[system]
    }

    /// The server's CPU over a round's timed part (`None`: not read), its wall time and the
    /// operations it held (iterations of a read, rows of a write).
    pub fn record_server_cpu(
        &mut self,
        scenario: Scenario,
        system: usize,
        cpu_ns: Option<u64>,
        wall: Duration,
        ops: u64,
    ) {
        let Some(cell) = self.cell(scenario, system) else {
            return;
        };
        if let Some(ns) = cpu_ns {
            cell.server_cpu_ns += ns;
            cell.server_wall_ns += wall.as_nanos() as u64;
            cell.server_ops += ops;
            cell.server_rounds += 1;
        }
    }

    fn cell(&mut self, scenario: Scenario, system: usize) -> Option<&mut AppCell> {
        let name = &self.systems[system];
        self.cells
            .iter_mut()
            .find(|c| c.scenario == scenario && &c.system == name)
    }

    /// What `scenario` must return, when it is a read.
    pub fn expected(&self, scenario: Scenario) -> Option<Answer> {
        self.cells
            .iter()
            .find(|c| c.scenario == scenario)
            .and_then(|c| c.expected)
    }

    /// Whether the cell is asked for and nothing has ruled it out yet.
    pub fn is_live(&self, scenario: Scenario, system: usize) -> bool {
        let name = &self.systems[system];
        self.cells
            .iter()
            .any(|c| c.scenario == scenario && &c.system == name && c.status == Status::Ok)
    }

    /// Keeps the worse status; on a tie the first reason stays.
    pub fn mark(&mut self, scenario: Scenario, system: usize, status: Status, reason: &str) {
        if let Some(cell) = self.cell(scenario, system)
            && severity(status) > severity(cell.status)
        {
            cell.status = status;
            cell.reason = Some(reason.to_owned());
        }
    }

    /// Marks every cell of `system` in `scenarios` that is still ok.
    pub fn mark_each(
        &mut self,
        scenarios: &[Scenario],
        system: usize,
        status: Status,
        reason: &str,
    ) {
        for scenario in scenarios {
            self.mark(*scenario, system, status, reason);
        }
    }

    /// One round's iterations of a read scenario, in nanoseconds.
    pub fn record_iterations(
        &mut self,
        scenario: Scenario,
        system: usize,
        mut samples_ns: Vec<u64>,
    ) {
        let Some(cell) = self.cell(scenario, system) else {
            return;
        };
        for ns in &samples_ns {
            let d = Duration::from_nanos(*ns);
            cell.samples.record_ok(d, d);
        }
        if !samples_ns.is_empty() {
            cell.per_round.push(median(&mut samples_ns));
        }
    }

    /// One round's insert batches.
    pub fn record_batches(&mut self, scenario: Scenario, system: usize, inserted: &Inserted) {
        let Some(cell) = self.cell(scenario, system) else {
            return;
        };
        cell.samples.merge(&inserted.batch_times);
        cell.row_times.merge(&inserted.row_times);
        cell.per_round.push(inserted.rows_per_s());
        cell.warmup_rows = inserted.warmup_rows;
        cell.client_cpu_ns += inserted.client_cpu_ns;
        cell.wall_ns += inserted.time.as_nanos() as u64;
        let (cpu, wall, rows) = (inserted.server_cpu_ns, inserted.server_wall, inserted.rows);
        self.record_server_cpu(scenario, system, cpu, wall, rows);
    }

    /// How the engine answered a scenario when its adapter emulated the request.
    pub fn add_answered_by(&mut self, scenario: Scenario, system: usize, how: String) {
        if let Some(cell) = self.cell(scenario, system) {
            cell.answered_by.insert(how);
        }
    }

    pub fn add_evidence(&mut self, system: usize, key: &str, value: String) {
        let name = self.systems[system].clone();
        self.evidence
            .entry(name)
            .or_default()
            .insert(key.to_owned(), value);
    }

    /// The most memory an in-process engine has held at once, as it reports it.
    pub fn note_engine_heap(&mut self, system: usize, bytes: u64) {
        let peak = self
            .engine_heap_peak_bytes
            .entry(self.systems[system].clone())
            .or_default();
        *peak = (*peak).max(bytes);
    }

    pub fn engine_heap_peak_bytes(&self) -> &BTreeMap<String, u64> {
        &self.engine_heap_peak_bytes
    }

    /// What was read from `system`'s catalog, for its `verified` settings.
    pub fn evidence(&self, system: &str) -> BTreeMap<String, String> {
        self.evidence.get(system).cloned().unwrap_or_default()
    }

    /// Puts every cell, as it stands, into the report.
    pub fn write_into(&self, report: &mut Report) {
        for cell in &self.cells {
            report.upsert_cell(cell.to_cell());
        }
    }
}

impl AppCell {
    fn to_cell(&self) -> Cell {
        let unit = if self.scenario.is_write() {
            "rows/s"
        } else {
            "iteration"
        };
        let mut cell = Cell::new(
            self.scenario.key(),
            &self.system,
            unit,
            1,
            self.rounds_planned,
        );
        cell.status = self.status;
        cell.reason.clone_from(&self.reason);
        cell.labels.clone_from(&self.labels);
        let measured = self.per_round.len() as u32;
        if measured < self.rounds_planned && self.status == Status::Ok {
            cell.status = Status::Error;
            cell.reason = Some(format!(
                "incomplete: {measured} of {} rounds measured",
                self.rounds_planned
            ));
        }
        cell.latency_ns = percentiles(&self.samples.latency);
        cell.counts = self.samples.counts;
        cell.histogram_b64 =
            (!self.samples.latency.is_empty()).then(|| encode_histogram(&self.samples.latency));
        cell.extra
            .insert("title".into(), self.scenario.title().into());
        if self.scenario.is_write() {
            if self.wall_ns > 0 {
                // The client's own CPU over the inserts, as a share of their wall time: the
                // seeding path must not be what limits the rate.
                let share = self.client_cpu_ns as f64 / self.wall_ns as f64;
                cell.extra.insert("client_cpu_share".into(), share.into());
            }
            // Median, min and max over the rounds, as every tool's `throughput` is.
            cell.throughput = Throughput::from_rounds(self.per_round.clone());
            if let Some(batches) = batch_rates(&self.row_times) {
                cell.extra.insert("batch_rows_per_s".into(), batches);
            }
            cell.extra
                .insert("warmup_rows".into(), self.warmup_rows.into());
        } else {
            cell.extra
                .insert("round_medians_ns".into(), self.per_round.clone().into());
        }
        cell.extra.insert("rows".into(), self.rows.into());
        if !self.answered_by.is_empty() {
            let how: Vec<String> = self.answered_by.iter().cloned().collect();
            cell.extra.insert("answered_by".into(), how.into());
        }
        if let Some(answer) = self.expected {
            cell.extra
                .insert("digest".into(), answer.digest_hex().into());
        }
        self.server_cpu(&mut cell);
        cell
    }

    /// The server's CPU per operation (iteration or row) and in cores over the timed part,
    /// when every measured round read it; as every tool's cells say it.
    fn server_cpu(&self, cell: &mut Cell) {
        let measured = self.per_round.len();
        let every_round = self.server_rounds == measured && measured > 0;
        cell.server_cpu_source = Some(match &self.server {
            ServerProcess::Local(pid) if !every_round && measured > 0 => format!(
                "not measured: the process tree of PID {pid} could not be read in every round"
            ),
            server => server.source(),
        });
        // An in-process engine's CPU is the client's own: it is never counted twice.
        if every_round && matches!(self.server, ServerProcess::Local(_)) {
            let ns = self.server_cpu_ns as f64;
            cell.server_cpu_ns_per_op = (self.server_ops > 0).then(|| ns / self.server_ops as f64);
            cell.server_cpu_cores =
                (self.server_wall_ns > 0).then(|| ns / self.server_wall_ns as f64);
        }
    }
}

/// The timed batches' rates (rows/s), from their times per row: median, min and max.
fn batch_rates(row_times: &Recorder) -> Option<serde_json::Value> {
    let h = &row_times.latency;
    if h.is_empty() {
        return None;
    }
    let rate = |ns: u64| 1e9 / ns.max(1) as f64;
    Some(serde_json::json!({
        "batches": h.len(),
        "median": rate(h.value_at_quantile(0.5)),
        "min": rate(h.max()),
        "max": rate(h.min()),
    }))
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3, 1, 2]), 2.0);
        assert_eq!(median(&mut [4, 1, 3, 2]), 2.5);
    }
}
