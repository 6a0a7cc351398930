//! The app suite's report, in seed 003's shape (one row per scenario with the rows it returns,
//! each engine's median and p95, the factor against the reference) and seed 004's summary
//! (scenarios won, lost and at parity: verdicts only, no ranking of medians). Pure functions
//! of the report.

use serde::Serialize;

use common::export::ToolReport;
use common::human::{format_latency_ns, format_rate, format_thousands};
use common::report::{Table, cpu_table, environment_markdown, markdown_head, terminal_frame};
use common::results::{
    Cell, Location, Metric, NoVerdict, Report, Status, SystemInfo, Verdict, VerdictKind,
};
use common::verdict::{Direction, Judgement, judge_rounds, threshold_of};

use crate::opts::AppOpts;
use crate::suites::app::cells::Cells;
use crate::suites::app::scenarios::Scenario;

/// `sql-bench app`'s verdicts, terminal summary and `report.md`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppReport;

impl ToolReport for AppReport {
    fn judge(&self, report: &Report) -> Judgement {
        judge(report)
    }

    fn terminal(&self, report: &Report) -> String {
        render_terminal(report)
    }

    fn markdown(&self, report: &Report) -> String {
        render_markdown(report)
    }

    /// None: the scenarios are times per iteration beside rows/s, which one throughput chart
    /// would put on a single axis.
    fn charts(&self, _: &Report) -> Vec<(String, String)> {
        Vec::new()
    }
}

fn scenario_of(cell: &Cell) -> Option<Scenario> {
    Scenario::parse(&cell.workload).ok()
}

/// The figure cells are compared by, and whether more is better: a write's median rows/s over
/// its rounds, a read's median iteration time.
fn figure(cell: &Cell) -> Option<(f64, bool)> {
    if cell.status != Status::Ok {
        return None;
    }
    if scenario_of(cell)?.is_write() {
        cell.throughput.as_ref().map(|t| (t.median, true))
    } else {
        cell.latency_ns.map(|l| (l.p50 as f64, false))
    }
}

/// Each round's own figure, from which the verdicts' intervals come: a write's rows/s per
/// round (`throughput.rounds`, whose median is the figure shown), a read's median iteration
/// time per round.
/// With two or more forks, each fork's own figure instead (the process is the unit of
/// replication): its median rows/s, or its median iteration time.
fn per_round(cell: &Cell) -> Vec<f64> {
    if cell.forks.len() >= 2 {
        let write = scenario_of(cell).is_some_and(|s| s.is_write());
        return cell
            .forks
            .iter()
            .filter_map(|f| match write {
                true => f.throughput,
                false => f.latency_p50_ns.map(|ns| ns as f64),
            })
            .collect();
    }
    match scenario_of(cell) {
        Some(s) if s.is_write() => cell
            .throughput
            .as_ref()
            .map(|t| t.rounds.clone())
            .unwrap_or_default(),
        _ => cell
            .extra
            .get("round_medians_ns")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default(),
    }
}

fn find<'a>(report: &'a Report, scenario: &str, system: &str) -> Option<&'a Cell> {
    report
        .cells
        .iter()
        .find(|c| c.workload == scenario && c.system == system)
}

fn scenarios(report: &Report) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for cell in &report.cells {
        if !seen.contains(&cell.workload) {
            seen.push(cell.workload.clone());
        }
    }
    seen
}

/// Every engine against the reference, per scenario. The ratio is the speed-up (above 1 when the
/// engine is faster: rows/s for the fill, the inverse of time for the rest), with the confidence
/// interval of the per-round figures and the verdict it gives (common's rule: three rounds a
/// side, parity within the threshold).
pub fn judge(report: &Report) -> Judgement {
    let mut judgement = Judgement::default();
    let Some(reference) = report.reference.as_deref() else {
        return judgement;
    };
    let threshold = threshold_of(report);
    for scenario in scenarios(report) {
        let Some(base) = find(report, &scenario, reference) else {
            continue;
        };
        let Some((base_figure, more_is_better)) = figure(base) else {
            continue;
        };
        for system in report.systems.iter().filter(|s| s.name != reference) {
            let Some(other) = find(report, &scenario, &system.name) else {
                continue;
            };
            let Some((other_figure, _)) = figure(other) else {
                continue;
            };
            if base_figure <= 0.0 || other_figure <= 0.0 {
                continue;
            }
            let (base_rounds, other_rounds) = (per_round(base), per_round(other));
            // A speed-up in both cases: for times, the reference's over the engine's.
            let (faster, slower) = if more_is_better {
                (&other_rounds, &base_rounds)
            } else {
                (&base_rounds, &other_rounds)
            };
            // The one comparability check every suite goes through (durability, mode, index
            // set): cells that mean different things get no ratio.
            let judged = match common::verdict::incomparable(other, base) {
                Some(reason) => Err(reason),
                None => judge_rounds(faster, slower, threshold, Direction::HigherIsBetter),
            };
            match judged {
                Ok((ratio, interval, verdict)) => judgement.verdicts.push(Verdict {
                    workload: scenario.clone(),
                    system: system.name.clone(),
                    reference: reference.to_owned(),
                    metric: Metric::Throughput,
                    ratio,
                    interval: [interval.low, interval.high],
                    confidence: interval.confidence,
                    verdict,
                }),
                Err(reason) => judgement.no_verdicts.push(NoVerdict {
                    workload: scenario.clone(),
                    system: system.name.clone(),
                    reference: reference.to_owned(),
                    metric: Metric::Throughput,
                    reason,
                }),
            }
        }
    }
    judgement
}

/// One engine's record over the scenarios (the append excluded: it is reported on its own).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    pub system: String,
    pub won: u32,
    pub lost: u32,
    pub parity: u32,
}

/// Each engine's verdicts against the reference. No ranking is made of the medians (a
/// "fastest" count or an average placement would order engines on point estimates, from one
/// round even): only the verdicts, each from an interval, are counted.
pub fn summary(report: &Report) -> Vec<Standing> {
    report
        .systems
        .iter()
        .map(|system| {
            let mine = |kind| {
                report
                    .verdicts
                    .iter()
                    .filter(|v| {
                        v.system == system.name
                            && v.verdict == kind
                            && v.workload != Scenario::Append.key()
                    })
                    .count() as u32
            };
            Standing {
                system: system.name.clone(),
                won: mine(VerdictKind::Faster),
                lost: mine(VerdictKind::Slower),
                parity: mine(VerdictKind::Parity),
            }
        })
        .collect()
}

fn cell_text(report: &Report, cell: &Cell) -> String {
    let Some((_, more_is_better)) = figure(cell) else {
        return cell.status.as_str().to_owned();
    };
    let mut text = if more_is_better {
        format!(
            "{} rows/s",
            format_rate(cell.throughput.as_ref().map_or(0.0, |t| t.median))
        )
    } else {
        let l = cell.latency_ns.unwrap_or_default();
        format!(
            "{} / {}",
            format_latency_ns(l.p50),
            format_latency_ns(l.p95)
        )
    };
    if let Some(v) = report
        .verdicts
        .iter()
        .find(|v| v.workload == cell.workload && v.system == cell.system)
    {
        text.push_str(&format!(" · {}", common::verdict::describe(v)));
    }
    text
}

fn scenario_table(report: &Report) -> Table {
    let reference = report.reference.clone().unwrap_or_default();
    let mut header = vec!["scenario".to_owned(), "rows".to_owned()];
    for system in &report.systems {
        let mut column = system.name.clone();
        if system.name == reference && report.systems.len() > 1 {
            column.push_str(" (ref)");
        }
        for label in &system.labels {
            column.push_str(&format!(" [{label}]"));
        }
        header.push(column);
    }
    let rows = scenarios(report)
        .iter()
        .map(|scenario| {
            let any = find(report, scenario, &report.systems[0].name);
            let title = any
                .and_then(|c| c.extra.get("title"))
                .and_then(|t| t.as_str())
                .unwrap_or(scenario)
                .to_owned();
            let rows = any
                .and_then(|c| c.extra.get("rows"))
                .and_then(serde_json::Value::as_u64)
                .map_or_else(String::new, |n| format_thousands(n as f64));
            let mut row = vec![title, rows];
            row.extend(report.systems.iter().map(|s| {
                find(report, scenario, &s.name)
                    .map_or_else(|| "–".to_owned(), |c| cell_text(report, c))
            }));
            row
        })
        .collect();
    Table {
        title: "Per scenario: median / p95 per iteration (writes: median rows/s over the rounds), factor against the reference".to_owned(),
        header,
        rows,
        numeric: true,
    }
}

fn summary_table(report: &Report) -> Table {
    let reference = report.reference.clone().unwrap_or_default();
    let standings = summary(report);
    let rows = standings
        .iter()
        .map(|s| {
            let against = |n: u32| {
                if s.system == reference {
                    "—".to_owned()
                } else {
                    n.to_string()
                }
            };
            vec![
                s.system.clone(),
                against(s.won),
                against(s.lost),
                against(s.parity),
            ]
        })
        .collect();
    Table {
        title: format!(
            "Verdicts against {reference} (the append excluded; each from the interval of its ratio, see the table)"
        ),
        header: ["engine", "won", "lost", "parity"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: true,
    }
}

fn method_line(report: &Report) -> String {
    let get = |key: &str| report.options.get(key).cloned().unwrap_or_default();
    format!(
        "{} measured iterations per scenario after {} warm-ups, {} rounds each re-seeded from empty, engines interleaved in alternating order; medians and p95 pool every iteration of every round; writes in batches of {}, the first {} of every fill and append written untimed, each round's rate its timed rows over their batches' time.",
        get("iterations"),
        get("warmup"),
        get("rounds"),
        get("batch"),
        get("warmup"),
    )
}

pub fn render_terminal(report: &Report) -> String {
    let line = |s: &SystemInfo| format!("{}: {}", s.name, s.version);
    terminal_frame(report, &method_line(report), &tables(report), &line)
}

pub fn render_markdown(report: &Report) -> String {
    let mut out = markdown_head(report, &method_line(report), &tables(report));
    out.push_str(&environment_markdown(report));
    out.push_str("\n**What this run does not establish**\n\n");
    for note in &report.notes {
        out.push_str(&format!("- {note}\n"));
    }
    out
}

/// The scenario table, the summary and, when it was read, the CPU table.
fn tables(report: &Report) -> Vec<Table> {
    let mut tables = vec![scenario_table(report), summary_table(report)];
    tables.extend(cpu_table(report));
    tables
}

/// What a reader must know, as seed 003's "what this run does not establish".
pub fn notes(opts: &AppOpts, report: &Report, cells: &Cells) -> Vec<String> {
    let mut notes = vec![
        "Every request was sequential: nothing here says anything about behaviour under concurrency.".to_owned(),
        "One node each, with the client on this same machine beside every server: no engine had an isolated host, and the client's CPU time is taken from the servers'.".to_owned(),
        "Drop-in mode: every engine stores one JSON document per record and answers through the same data layer; an engine-optimized (typed-column) run would be a separate table.".to_owned(),
        "The fill writes into an empty collection and the append into a populated one: they measure different work and are not read against each other.".to_owned(),
    ];
    let mut extra_found = false;
    for system in &report.systems {
        let evidence = cells.evidence(&system.name);
        if let Some(extra) = evidence.get("app_records.extra_indexes")
            && extra != "none"
        {
            extra_found = true;
            notes.push(format!(
                "{} carries indexes beyond the declared six and its primary key: {extra}.",
                system.name
            ));
        }
    }
    if !extra_found && !report.systems.is_empty() {
        notes.push("No engine carries an index beyond its primary key and the six declared ones (read from each catalog).".into());
    }
    for s in report
        .systems
        .iter()
        .filter(|s| s.location == Location::Embedded)
    {
        notes.push(format!("{} answers inside the client process: a request is a function call, with no socket and no round trip.", s.name));
    }
    if let Some(line) = memory_note(report) {
        notes.push(line);
    }
    for cell in &report.cells {
        if let Some(share) = cell
            .extra
            .get("client_cpu_share")
            .and_then(serde_json::Value::as_f64)
        {
            notes.push(format!(
                "{} · {}: the client's own CPU time was {} of the inserts' wall time{}.",
                cell.system,
                cell.workload,
                percent(share),
                if report
                    .systems
                    .iter()
                    .any(|s| s.name == cell.system && s.location == Location::Embedded)
                {
                    " (the engine runs in the client, so this includes the engine's work)"
                } else {
                    ""
                }
            ));
        }
    }
    for cell in &report.cells {
        let how = cell
            .extra
            .get("answered_by")
            .and_then(serde_json::Value::as_array);
        for line in how
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
        {
            notes.push(format!("{} · {}: {line}.", cell.system, cell.workload));
        }
    }
    if (opts.common.rounds as usize) < common::verdict::MIN_ROUNDS {
        notes.push(format!(
            "With fewer than {} rounds a side there is no confidence interval, so no engine is called faster, slower or at parity.",
            common::verdict::MIN_ROUNDS
        ));
    }
    notes
}

/// The client's peak resident memory, with what in-process engines held inside it.
fn memory_note(report: &Report) -> Option<String> {
    let memory = report.extra.get("client_memory")?;
    let peak = memory.get("peak_rss_bytes")?.as_u64()?;
    let mib = |bytes: u64| format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0));
    let engines: Vec<String> = memory
        .get("engine_heap_peak_bytes")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, bytes)| Some(format!("{name} {}", mib(bytes.as_u64()?))))
        .collect();
    Some(format!(
        "The client's peak resident memory was {}{}; records are generated, written and checked as streams, so it does not grow with --rows.",
        mib(peak),
        if engines.is_empty() {
            String::new()
        } else {
            format!(
                ", of which the engines running inside it held at most: {}",
                engines.join(", ")
            )
        }
    ))
}

/// A share as a percentage, with one decimal below 10% (a client at 0.4% is not at "0%").
fn percent(share: f64) -> String {
    let percent = share * 100.0;
    if percent < 10.0 {
        format!("{percent:.1}%")
    } else {
        format!("{percent:.0}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::environment::Environment;
    use common::results::{Percentiles, SystemInfo, Throughput};

    #[test]
    fn a_small_share_keeps_a_decimal() {
        assert_eq!(percent(0.0044), "0.4%");
        assert_eq!(percent(0.39), "39%");
    }

    fn read(system: &str, scenario: &str, p50_ms: f64, rounds_ms: &[f64]) -> Cell {
        let mut cell = Cell::new(scenario, system, "iteration", 1, rounds_ms.len() as u32);
        cell.latency_ns = Some(Percentiles {
            p50: (p50_ms * 1e6) as u64,
            p95: (p50_ms * 1.2e6) as u64,
            ..Percentiles::default()
        });
        let rounds: Vec<f64> = rounds_ms.iter().map(|m| m * 1e6).collect();
        cell.extra.insert("round_medians_ns".into(), rounds.into());
        cell.extra.insert("rows".into(), 494.into());
        cell
    }

    fn report() -> Report {
        let mut fill = Cell::new("fill", "a", "rows/s", 1, 3);
        fill.throughput = Throughput::from_rounds(vec![10_000.0, 11_000.0, 10_500.0]);
        let mut fill_b = Cell::new("fill", "b", "rows/s", 1, 3);
        fill_b.throughput = Throughput::from_rounds(vec![20_000.0, 21_000.0, 20_500.0]);
        let mut refused = read("b", "first-page", 1.0, &[1.0, 1.0, 1.0]);
        refused.status = Status::Refused;
        let system = |name: &str| SystemInfo {
            name: name.into(),
            kind: name.into(),
            ..SystemInfo::default()
        };
        let options =
            serde_json::json!({"iterations": 10, "warmup": 2, "rounds": 3, "batch": 5000});
        let mut report = Report::begin(
            "sql-bench",
            "0",
            "app",
            "drop-in",
            options,
            Environment::default(),
        );
        report.run_id = "RUN".into();
        report.started_at = "2026-11-30T00:00:00Z".into();
        report.git_commit = None;
        report.systems = vec![system("a"), system("b")];
        report.reference = Some("a".into());
        report.cells = vec![
            fill,
            fill_b,
            read("a", "inspection", 8.0, &[7.9, 8.0, 8.1]),
            read("b", "inspection", 4.0, &[3.9, 4.0, 4.1]),
            read("a", "first-page", 3.0, &[2.9, 3.0, 3.2]),
            refused,
            read("a", "count", 10.0, &[10.0, 10.1, 9.9]),
            read("b", "count", 10.05, &[10.05, 10.0, 10.1]),
        ];
        report.verdicts = judge(&report).verdicts;
        report
    }

    #[test]
    fn lower_latency_and_higher_throughput_are_both_faster() {
        let report = report();
        let verdict = |w: &str| report.verdicts.iter().find(|v| v.workload == w).unwrap();
        assert_eq!(verdict("fill").verdict, VerdictKind::Faster);
        assert!((verdict("fill").ratio - 20_500.0 / 10_500.0).abs() < 1e-9);
        assert_eq!(verdict("inspection").verdict, VerdictKind::Faster);
        assert!((verdict("inspection").ratio - 2.0).abs() < 1e-9);
        assert_eq!(verdict("count").verdict, VerdictKind::Parity);
        assert!(report.verdicts.iter().all(|v| v.workload != "first-page"));
    }

    #[test]
    fn the_summary_counts_verdicts_only() {
        let standings = summary(&report());
        let b = standings.iter().find(|s| s.system == "b").unwrap();
        assert_eq!((b.won, b.lost, b.parity), (2, 0, 1));
        let text = serde_json::to_string(&standings).unwrap();
        assert!(
            !text.contains("placement") && !text.contains("fastest"),
            "{text}"
        );
    }

    /// Write cells as the suite builds them: each round one quick and one slow batch, so the
    /// batches' rates (pooled) and the rounds' rates have different medians.
    fn measured_writes() -> Report {
        use crate::suites::app::Data;
        use crate::suites::app::cells::{Cells, Inserted};
        use clap::Parser;
        use std::time::Duration;
        let crate::opts::Suite::App(opts) = crate::opts::Opts::try_parse_from([
            "sql-bench",
            "app",
            "--rows",
            "200",
            "--batch",
            "100",
            "--rounds",
            "3",
        ])
        .unwrap()
        .suite
        else {
            unreachable!("the app suite")
        };
        let data = Data::prepare(1, 200, 200);
        let systems: Vec<SystemInfo> = ["a", "b"]
            .map(|name| SystemInfo {
                name: name.into(),
                kind: name.into(),
                ..SystemInfo::default()
            })
            .to_vec();
        let named: Vec<(&SystemInfo, Option<&str>)> = systems.iter().map(|s| (s, None)).collect();
        let mut cells = Cells::new(&opts, &named, &[Scenario::Fill], &data);
        for round in 0..3u64 {
            // b takes half of a's time on every batch: twice the rate.
            for (system, divisor) in [(0, 1), (1, 2)] {
                let mut inserted = Inserted::default();
                inserted.add_batch(Duration::from_millis(10) / divisor, 100);
                inserted.add_batch(Duration::from_millis(90 + round) / divisor, 100);
                cells.record_batches(Scenario::Fill, system, &inserted);
            }
        }
        let mut report = report();
        report.systems = systems;
        report.cells.clear();
        cells.write_into(&mut report);
        report
    }

    #[test]
    fn a_write_cell_s_throughput_is_over_its_rounds_and_its_verdict_is_the_ratio_shown() {
        let report = measured_writes();
        let a = find(&report, "fill", "a").unwrap();
        let throughput = a.throughput.as_ref().unwrap();
        // Each round: 200 rows in 100–102 ms.
        let rounds: Vec<f64> = (0..3).map(|r| 200.0 / (0.100 + r as f64 * 0.001)).collect();
        assert_eq!(throughput.rounds.len(), 3);
        for (got, want) in throughput.rounds.iter().zip(&rounds) {
            assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
        }
        let near = |got: f64, want: f64| (got / want - 1.0).abs() < 1e-9;
        assert!(near(throughput.median, rounds[1]), "{throughput:?}");
        assert!(near(throughput.min, rounds[2]) && near(throughput.max, rounds[0]));
        // The batches' rates (10,000 and about 1,100 rows/s) are in `extra`, apart.
        let batches = &a.extra["batch_rows_per_s"];
        assert_eq!(batches["batches"], 6);
        assert!((batches["max"].as_f64().unwrap() / 10_000.0 - 1.0).abs() < 0.01);
        assert!((batches["min"].as_f64().unwrap() / (100.0 / 0.092) - 1.0).abs() < 0.01);
        assert_eq!(a.extra["warmup_rows"], 0);
        let verdicts = judge(&report).verdicts;
        let b = find(&report, "fill", "b")
            .unwrap()
            .throughput
            .as_ref()
            .unwrap();
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].verdict, VerdictKind::Faster);
        assert!((verdicts[0].ratio - b.median / throughput.median).abs() < 1e-9);
        assert!((verdicts[0].ratio - 2.0).abs() < 1e-6);
        assert!(verdicts[0].interval[0] <= 2.0 + 1e-6 && verdicts[0].interval[1] >= 2.0 - 1e-6);
    }

    #[test]
    fn an_engine_with_unmatched_durability_gets_no_verdict_against_a_durable_one() {
        let mut report = report();
        let fill_b = report
            .cells
            .iter_mut()
            .find(|c| c.workload == "fill" && c.system == "b")
            .unwrap();
        fill_b.labels.push("unmatched durability".into());
        let judged = judge(&report);
        assert!(!judged.verdicts.iter().any(|v| v.workload == "fill"));
        let none = judged
            .no_verdicts
            .iter()
            .find(|n| n.workload == "fill")
            .unwrap();
        assert!(none.reason.starts_with("not comparable"), "{none:?}");
    }

    #[test]
    fn with_forks_the_verdict_is_over_each_forks_figure() {
        let mut report = report();
        for cell in report
            .cells
            .iter_mut()
            .filter(|c| c.workload == "inspection")
        {
            let p50 = cell.latency_ns.unwrap().p50 as f64;
            // Each fork's median: one of three forks of b twice as slow as the others.
            let spread: [f64; 3] = if cell.system == "b" {
                [1.0, 2.0, 1.0]
            } else {
                [1.0; 3]
            };
            cell.forks = spread
                .iter()
                .enumerate()
                .map(|(i, k)| common::results::ForkFigures {
                    fork: i as u32 + 1,
                    status: Status::Ok,
                    reason: None,
                    throughput: None,
                    latency_p50_ns: Some((p50 * k) as u64),
                    latency_p99_ns: None,
                    rounds: Vec::new(),
                })
                .collect();
        }
        let verdict = judge(&report)
            .verdicts
            .into_iter()
            .find(|v| v.workload == "inspection")
            .unwrap();
        // Over the rounds (3.9–4.1 ms against 7.9–8.1 ms) b is twice as fast; over the forks one
        // of which is as slow as a, the interval reaches 1.
        assert_eq!(verdict.verdict, VerdictKind::Inconclusive, "{verdict:?}");
    }

    #[test]
    fn markdown_snapshot() {
        insta::assert_snapshot!(render_markdown(&report()));
    }
}
