//! The forks of a run made into one report: each cell's forks side by side (`Cell::forks`),
//! the median of the forks' medians as its throughput, the rounds of every fork in order, the
//! latency histograms added exactly, counts added, the worst status kept with the fork that
//! had it. A fork that ended before measuring a cell makes that cell `error`, saying which fork
//! and how it ended; what the other forks measured stays in `forks`.

use crate::calibration::{Calibration, Probe};
use crate::histogram::encode_histogram;
use crate::protocol::severity;
use crate::recorder::percentiles;
use crate::results::{Cell, ForkFigures, ForkRun, Report, Status, Throughput, median};

/// One fork as its parent saw it: its process, how it ended, and its report if it wrote one.
#[derive(Debug, Clone)]
pub struct Fork {
    pub run: ForkRun,
    pub report: Option<Report>,
}

/// The median of each probe over several (the forks' calibration probes).
fn median_of(probes: &[Probe]) -> Option<Probe> {
    let of = |f: fn(&Probe) -> f64| median(&probes.iter().map(f).collect::<Vec<f64>>());
    Some(Probe {
        cpu_ns_per_iter: of(|p| p.cpu_ns_per_iter)?,
        memory_ns_per_load: of(|p| p.memory_ns_per_load)?,
    })
}

/// One fork's figures of `cell`.
fn figures(fork: u32, cell: &Cell) -> ForkFigures {
    let throughput = cell.throughput.as_ref();
    ForkFigures {
        fork,
        status: cell.status,
        reason: cell.reason.clone(),
        throughput: throughput.map(|t| t.median),
        latency_p50_ns: cell.latency_ns.map(|p| p.p50),
        latency_p99_ns: cell.latency_ns.map(|p| p.p99),
        rounds: throughput.map(|t| t.rounds.clone()).unwrap_or_default(),
    }
}

/// The sum of the forks' histograms and its percentiles; neither when a fork has none or one
/// cannot be read.
fn added<'a>(
    encoded: impl Iterator<Item = Option<&'a String>> + Clone,
) -> (Option<String>, Option<crate::results::Percentiles>) {
    if encoded.clone().any(|text| text.is_none()) {
        return (None, None);
    }
    match crate::scale::merge::add_encoded(encoded) {
        Ok(Some(sum)) => (Some(encode_histogram(&sum)), percentiles(&sum)),
        _ => (None, None),
    }
}

/// The cell of the combined run from each fork's (`None`: the fork never measured it).
pub fn combine_cell(forks: &[(&ForkRun, Option<&Cell>)]) -> Cell {
    let present: Vec<(u32, &Cell)> = forks
        .iter()
        .filter_map(|(run, cell)| cell.map(|c| (run.fork, c)))
        .collect();
    let (_, first) = present[0];
    let mut cell = first.clone();
    cell.forks = forks
        .iter()
        .map(|(run, c)| match c {
            Some(c) => figures(run.fork, c),
            None => ForkFigures {
                fork: run.fork,
                status: Status::Error,
                reason: Some(format!(
                    "fork {} ({}) ended before measuring this cell",
                    run.fork, run.ended
                )),
                throughput: None,
                latency_p50_ns: None,
                latency_p99_ns: None,
                rounds: Vec::new(),
            },
        })
        .collect();
    if let Some(worst) = cell
        .forks
        .iter()
        .max_by_key(|f| (severity(f.status), std::cmp::Reverse(f.fork)))
        .filter(|f| severity(f.status) > 0)
    {
        cell.status = worst.status;
        cell.reason = Some(format!(
            "fork {}: {}",
            worst.fork,
            worst.reason.as_deref().unwrap_or(worst.status.as_str())
        ));
    }
    for (_, part) in &present[1..] {
        for label in &part.labels {
            if !cell.labels.contains(label) {
                cell.labels.push(label.clone());
            }
        }
    }
    let rounds: Vec<f64> = cell.forks.iter().flat_map(|f| f.rounds.clone()).collect();
    let medians: Vec<f64> = cell.forks.iter().filter_map(|f| f.throughput).collect();
    cell.throughput = Throughput::from_rounds(rounds).and_then(|mut t| {
        t.median = median(&medians)?;
        Some(t)
    });
    cell.rounds_planned = present.iter().map(|(_, c)| c.rounds_planned).sum();
    cell.latency_rounds_ns = present
        .iter()
        .flat_map(|(_, c)| c.latency_rounds_ns.clone())
        .collect();
    cell.latency_per_second_b64 = present
        .iter()
        .flat_map(|(_, c)| c.latency_per_second_b64.clone())
        .collect();
    // A tool's own per-round lists (`extra` keys starting `round_`) are laid end to end too.
    let lists: Vec<String> = cell
        .extra
        .keys()
        .filter(|k| k.starts_with("round_"))
        .cloned()
        .collect();
    for key in lists {
        let joined: Option<Vec<serde_json::Value>> = present
            .iter()
            .map(|(_, c)| c.extra.get(&key)?.as_array().cloned())
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.concat());
        match joined {
            Some(values) => cell.extra.insert(key, serde_json::Value::Array(values)),
            None => cell.extra.remove(&key),
        };
    }
    cell.round_opened_at_ms = present
        .iter()
        .flat_map(|(_, c)| c.round_opened_at_ms.clone())
        .collect();
    (cell.histogram_b64, cell.latency_ns) =
        added(present.iter().map(|(_, c)| c.histogram_b64.as_ref()));
    (cell.service_histogram_b64, cell.service_time_ns) = added(
        present
            .iter()
            .map(|(_, c)| c.service_histogram_b64.as_ref()),
    );
    cell.counts.ok = present.iter().map(|(_, c)| c.counts.ok).sum();
    cell.counts.error = present.iter().map(|(_, c)| c.counts.error).sum();
    cell.counts.timeout = present.iter().map(|(_, c)| c.counts.timeout).sum();
    cell.missed_ticks = present.iter().map(|(_, c)| c.missed_ticks).sum();
    let of = |f: fn(&Cell) -> Option<f64>| {
        let values: Vec<f64> = present.iter().filter_map(|(_, c)| f(c)).collect();
        median(&values)
    };
    cell.achieved_rate = of(|c| c.achieved_rate);
    cell.client_cpu_ns_per_op = of(|c| c.client_cpu_ns_per_op);
    cell.server_cpu_ns_per_op = of(|c| c.server_cpu_ns_per_op);
    cell.server_cpu_cores = of(|c| c.server_cpu_cores);
    cell.client_busy = present
        .iter()
        .filter_map(|(_, c)| c.client_busy)
        .reduce(f64::max);
    cell.client_busy_least = present
        .iter()
        .filter_map(|(_, c)| c.client_busy_least)
        .reduce(f64::min);
    cell
}

/// The report of the whole run from its forks (at least one of which wrote a report), each
/// cell in the order the first fork to write a report measured them.
pub fn combine(forks: &[Fork], planned: u32) -> Report {
    let written: Vec<&Report> = forks.iter().filter_map(|f| f.report.as_ref()).collect();
    let mut report = written[0].clone();
    let mut names: Vec<(String, String)> = Vec::new();
    for part in &written {
        for c in &part.cells {
            let name = (c.workload.clone(), c.system.clone());
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    report.cells = names
        .iter()
        .map(|(workload, system)| {
            let of: Vec<(&ForkRun, Option<&Cell>)> = forks
                .iter()
                .map(|f| {
                    let cell = f.report.as_ref().and_then(|r| {
                        r.cells
                            .iter()
                            .find(|c| &c.workload == workload && &c.system == system)
                    });
                    (&f.run, cell)
                })
                .collect();
            combine_cell(&of)
        })
        .collect();
    report.started_at = written
        .iter()
        .map(|r| r.started_at.clone())
        .min()
        .unwrap_or_default();
    report.finished_at = written.iter().filter_map(|r| r.finished_at.clone()).max();
    report.environment.loadavg_end = written.last().and_then(|r| r.environment.loadavg_end);
    let probes = |end: bool| -> Vec<Probe> {
        written
            .iter()
            .filter_map(|r| r.environment.calibration)
            .filter_map(|c| if end { c.end } else { Some(c.start) })
            .collect()
    };
    report.environment.calibration = median_of(&probes(false)).map(|start| Calibration {
        start,
        end: median_of(&probes(true)),
    });
    for part in &written[1..] {
        for note in &part.notes {
            if !report.notes.contains(note) {
                report.notes.push(note.clone());
            }
        }
    }
    report.verdicts.clear();
    report.no_verdicts.clear();
    report.forks = forks.iter().map(|f| f.run.clone()).collect();
    let measured = forks.iter().filter(|f| f.report.is_some()).count();
    report.notes.push(format!(
        "Measured in {measured} of {planned} forks, each a fresh process of the tool run one after another (systems in alternating order across forks) with its own connections and warm-up; the first fork prepared and verified the data and the later ones verified it and measured on it, except where preparing is itself measured (a YCSB load, a measured ingest, an index build) or held by one process (an embedded search index), which every fork does anew: every interval is computed over the forks' own figures, each cell's figure is the median of its forks' medians, and each fork's figures are under the cell's `forks`."
    ));
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Report;

    fn run(fork: u32, ended: &str) -> ForkRun {
        ForkRun {
            fork,
            pid: 100 + fork,
            ended: ended.into(),
            started_at: None,
            finished_at: None,
            results: format!("forks/{fork}"),
            calibration: None,
        }
    }

    fn cell(rounds: &[f64]) -> Cell {
        let mut cell = Cell::new("read 16c", "sqlite", "ops/s", 16, rounds.len() as u32);
        cell.throughput = Throughput::from_rounds(rounds.to_vec());
        cell
    }

    #[test]
    fn the_figure_is_the_median_of_the_forks_medians_and_every_round_is_kept() {
        let (a, b, c) = (
            cell(&[100.0, 102.0]),
            cell(&[60.0, 61.0]),
            cell(&[98.0, 99.0]),
        );
        let (r1, r2, r3) = (run(1, "exit 0"), run(2, "exit 0"), run(3, "exit 0"));
        let combined = combine_cell(&[(&r1, Some(&a)), (&r2, Some(&b)), (&r3, Some(&c))]);
        let t = combined.throughput.unwrap();
        assert_eq!(t.median, 98.5);
        assert_eq!(t.rounds.len(), 6);
        assert_eq!((t.min, t.max), (60.0, 102.0));
        assert_eq!(combined.forks.len(), 3);
        assert_eq!(combined.forks[1].throughput, Some(60.5));
    }

    #[test]
    fn a_fork_that_ended_early_makes_the_cell_an_error_and_keeps_the_others() {
        let a = cell(&[100.0, 102.0]);
        let (r1, r2) = (run(1, "exit 0"), run(2, "killed by signal 6"));
        let combined = combine_cell(&[(&r1, Some(&a)), (&r2, None)]);
        assert_eq!(combined.status, Status::Error);
        let reason = combined.reason.unwrap();
        assert!(reason.contains("killed by signal 6"), "{reason}");
        assert_eq!(combined.forks[0].throughput, Some(101.0));
    }

    #[test]
    fn the_report_lists_every_fork_and_says_how_it_was_measured() {
        let mut report =
            crate::testing::synthetic_report("sql-bench", "crud", "s", serde_json::json!({}));
        report.cells = vec![cell(&[1.0, 2.0])];
        let forks = vec![
            Fork {
                run: run(1, "exit 0"),
                report: Some(report.clone()),
            },
            Fork {
                run: run(2, "exit 0"),
                report: Some(report),
            },
        ];
        let combined: Report = combine(&forks, 2);
        assert_eq!(combined.forks.len(), 2);
        assert_eq!(combined.cells[0].forks.len(), 2);
        assert!(combined.notes.last().unwrap().contains("2 of 2 forks"));
    }
}
