//! mqtt-bench's report, pure functions of a [`Report`]: the seed's table (scenario rows, one
//! column per system, the ratio against the reference; latency with its lost messages and
//! missed ticks beside it), the QoS 0 sweep, the QoS levels side by side per broker, the
//! connection storms, the scenarios' own figures, the delivery ledger (lost, duplicated, out
//! of order) and what each broker cost in CPU and memory, as the terminal summary and
//! `report.md` ([`MqttReport`]); the notes every run carries.

pub mod merged;
mod qos;
mod resources;
mod sweep;

pub use qos::{figures_table, qos_tables, storm_table};
pub use resources::{cpu_rounds_table, resources_table};
pub use sweep::{render_sweep_svg, sweep_table};

use std::time::Duration;

use common::export::ToolReport;
use common::human::{format_bytes, format_latency_ns, format_rate, format_thousands};
use common::report::{Table, judge, median_and_range, problems, run_line};
use common::results::{Cell, Metric, Report, Status, SystemInfo, VerdictKind};

use crate::opts::Opts;
use crate::os::FdLimit;

fn find<'a>(report: &'a Report, workload: &str, system: &str) -> Option<&'a Cell> {
    report
        .cells
        .iter()
        .find(|c| c.workload == workload && c.system == system)
}

fn workloads(report: &Report) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for cell in &report.cells {
        if !seen.contains(&cell.workload.as_str()) {
            seen.push(&cell.workload);
        }
    }
    seen
}

/// One row per scenario: its name, then `show` of each system's cell ("–" where it has none).
fn rows_per_system(report: &Report, show: impl Fn(&Cell) -> String) -> Vec<Vec<String>> {
    workloads(report)
        .into_iter()
        .map(|workload| {
            let mut row = vec![workload.to_owned()];
            row.extend(
                report
                    .systems
                    .iter()
                    .map(|s| find(report, workload, &s.name).map_or("–".into(), &show)),
            );
            row
        })
        .collect()
}

fn header(report: &Report, first: &str) -> Vec<String> {
    let mut header = vec![first.to_owned()];
    for s in &report.systems {
        let mut name = s.name.clone();
        if report.reference.as_deref() == Some(&s.name) && report.systems.len() > 1 {
            name.push_str(" (ref)");
        }
        for label in &s.labels {
            name.push_str(&format!(" [{label}]"));
        }
        header.push(name);
    }
    header
}

fn is_latency(cell: &Cell) -> bool {
    cell.workload.starts_with("latency")
}

/// A latency row's p50 / p99 / p99.9 over every message owed (a percentile the lost messages
/// reach is "lost"), with the lost messages and the publisher's missed ticks beside it.
fn latency_headline(cell: &Cell) -> String {
    let of_sent = cell.extra.get("latency_of_sent_ns");
    let at = |key: &str, fallback: Option<u64>| match of_sent.map(|v| &v[key]) {
        Some(serde_json::Value::Null) => "lost".to_owned(),
        Some(v) if v.is_u64() => format_latency_ns(v.as_u64().unwrap_or(0)),
        _ => fallback.map_or("–".into(), format_latency_ns),
    };
    let Some(l) = cell.latency_ns else {
        return "–".into();
    };
    format!(
        "{} / {} / {}",
        at("p50", Some(l.p50)),
        at("p99", Some(l.p99)),
        at("p999", Some(l.p999))
    )
}

/// What shaped a paced cell's figure over its measured rounds, whatever its status: the
/// messages lost (` · lost N`), and when sends started after their tick, how late as a
/// distribution (` · sent late p50 8 µs / p99 1.20 ms, 1,204 of 159,849 by more than their
/// interval`). At a high rate an interval is microseconds, so most sends can be "late" by more
/// than one while the rate is still met: the lateness, not the count, says whether that matters.
fn pacing_suffix(cell: &Cell) -> String {
    if cell.target_rate.is_none() {
        return String::new();
    }
    let lost = cell
        .extra
        .get("delivery")
        .and_then(|d| d["lost"].as_u64())
        .unwrap_or(0);
    let mut suffix = String::new();
    if lost > 0 {
        suffix.push_str(&format!(" · lost {lost}"));
    }
    let missed = cell.missed_ticks.unwrap_or(0);
    if missed > 0 {
        let sent = cell.extra.get("delivery").and_then(|d| d["sent"].as_u64());
        let of = sent.map_or(String::new(), |n| {
            format!(" of {}", format_thousands(n as f64))
        });
        let late = cell.schedule_lag_ns.map_or(String::new(), |lag| {
            format!(
                "p50 {} / p99 {}, ",
                format_latency_ns(lag.p50),
                format_latency_ns(lag.p99)
            )
        });
        suffix.push_str(&format!(
            " · sent late {late}{}{of} by more than their interval",
            format_thousands(missed as f64)
        ));
    }
    suffix
}

/// A cell's headline: the median rate with its round range, or for latency rows
/// p50 / p99 / p99.9; a cell that is not ok shows its status. A paced cell's lost messages
/// and missed ticks follow.
fn headline(cell: &Cell) -> String {
    let figure = if cell.status != Status::Ok {
        cell.status.as_str().to_owned()
    } else if is_latency(cell) {
        latency_headline(cell)
    } else {
        cell.usable_throughput()
            .map_or("–".into(), median_and_range)
    };
    format!("{figure}{}", pacing_suffix(cell))
}

/// The seed's table: scenario rows, one column per broker, and each broker's ratio against the
/// reference with the confidence interval of the ratio and the verdict it gives.
pub fn seed_table(report: &Report) -> Table {
    let judgement = judge(report);
    let reference = report.reference.clone().unwrap_or_default();
    let others: Vec<&SystemInfo> = report
        .systems
        .iter()
        .filter(|s| s.name != reference)
        .collect();
    let mut head = header(report, "scenario");
    for s in &others {
        head.push(format!("{} / {reference}", s.name));
    }
    let rows = workloads(report)
        .into_iter()
        .map(|workload| {
            let unit = report
                .cells
                .iter()
                .find(|c| c.workload == workload)
                .map_or("", |c| {
                    if is_latency(c) {
                        "p50 / p99 / p99.9"
                    } else {
                        c.unit.as_str()
                    }
                });
            let mut row = vec![format!("{workload} ({unit})")];
            row.extend(
                report
                    .systems
                    .iter()
                    .map(|s| find(report, workload, &s.name).map_or("–".into(), headline)),
            );
            for s in &others {
                let ratio = judgement
                    .verdicts
                    .iter()
                    .find(|v| {
                        v.workload == workload
                            && v.system == s.name
                            && v.metric == Metric::Throughput
                    })
                    .filter(|_| !workload.starts_with("latency"));
                let none = judgement.no_verdicts.iter().find(|v| {
                    v.workload == workload && v.system == s.name && v.metric == Metric::Throughput
                });
                row.push(match (ratio, none) {
                    (Some(v), _) => {
                        let word = match v.verdict {
                            VerdictKind::Faster => "higher",
                            VerdictKind::Slower => "lower",
                            VerdictKind::Parity => "parity",
                            VerdictKind::Inconclusive => "inconclusive",
                        };
                        format!(
                            "{:.2}× [{:.2}–{:.2}] {word}",
                            v.ratio, v.interval[0], v.interval[1]
                        )
                    }
                    (None, Some(n))
                        if !workload.starts_with("latency")
                            && find(report, workload, &s.name)
                                .is_some_and(|c| c.status == Status::Ok) =>
                    {
                        format!("no verdict: {}", n.reason)
                    }
                    _ => "—".into(),
                });
            }
            row
        })
        .collect();
    Table {
        title: "Scenarios (median of the measured rounds, min–max; latency from the intended send time)"
            .into(),
        header: head,
        rows,
        numeric: true,
    }
}

/// Every message accounted for: sent (per subscriber), lost, duplicated, out of order; and,
/// for a broker that keeps one (HiveMQ's metric), its own count of what it dropped.
pub fn delivery_table(report: &Report) -> Table {
    let broker_dropped = |cell: &common::results::Cell| {
        cell.extra
            .get("broker_dropped")
            .and_then(serde_json::Value::as_u64)
    };
    let any_dropped = report.cells.iter().any(|c| broker_dropped(c).is_some());
    let rows = rows_per_system(report, |cell| {
        let Some(d) = cell.extra.get("delivery") else {
            return "–".into();
        };
        let n = |k: &str| d[k].as_u64().unwrap_or(0);
        let dropped = broker_dropped(cell).map_or(String::new(), |n| format!(" · {n}"));
        format!(
            "{} / {} / {} / {}{dropped}",
            format_rate(n("sent") as f64),
            n("lost"),
            n("duplicates"),
            n("out_of_order")
        )
    });
    let title = "Delivery ledger over the measured rounds: owed / lost / duplicated / out of order";
    Table {
        title: if any_dropped {
            format!("{title} · dropped by the broker's own count")
        } else {
            title.into()
        },
        header: header(report, "scenario"),
        rows,
        numeric: true,
    }
}

fn tables(report: &Report) -> Vec<Table> {
    let mut tables = vec![seed_table(report)];
    tables.extend(sweep_table(report));
    tables.extend(qos_tables(report));
    tables.extend(storm_table(report));
    tables.extend(figures_table(report));
    tables.push(delivery_table(report));
    tables.push(resources_table(report));
    tables.extend(cpu_rounds_table(report));
    tables
}

fn footer(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for s in &report.systems {
        lines.push(format!("{}: {} at {}", s.name, s.version, s.url_redacted));
    }
    if let Some(brokers) = report.extra.get("brokers").and_then(|b| b.as_object()) {
        for (name, b) in brokers {
            if let Some(rss) = b["rss_after_run_bytes"].as_u64() {
                lines.push(format!("{name}: RSS after the run {}", format_bytes(rss)));
            }
        }
    }
    let env = &report.environment;
    lines.push(format!(
        "{} · {} cores · {} · load {:.2} at start{}",
        env.cpu_model,
        env.cores,
        format_bytes(env.memory_bytes),
        env.loadavg_start[0],
        env.loadavg_end
            .map_or(String::new(), |l| format!(", {:.2} at end", l[0]))
    ));
    lines
}

fn title(report: &Report) -> String {
    format!("{} · {}", report.tool, report.section)
}

/// Each of `lines` on a line of its own after `prefix`.
fn lines<T: std::fmt::Display>(prefix: &str, lines: impl IntoIterator<Item = T>) -> String {
    lines
        .into_iter()
        .map(|line| format!("{prefix}{line}\n"))
        .collect()
}

/// `heading`, then each of `items` after `bullet`, then a blank line; nothing without items.
fn block(heading: &str, bullet: &str, items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    format!("{heading}{}\n", lines(bullet, items))
}

/// How mqtt-bench's report is rendered: its own terminal summary and `report.md`; the verdicts
/// and the charts are the shared ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct MqttReport;

impl ToolReport for MqttReport {
    /// A merged run's delivery accounting: every worker's added up.
    fn merge_extras(&self, parts: &[&Report], merged: &mut Report) -> Result<(), String> {
        merged::merge_extras(parts, merged)
    }

    /// The broker's own chart: the QoS 0 sweep's delivered against offered rate.
    fn charts(&self, report: &Report) -> Vec<(String, String)> {
        render_sweep_svg(report)
            .map(|svg| ("delivered-vs-offered.svg".to_owned(), svg))
            .into_iter()
            .collect()
    }

    /// The terminal summary printed at the end of a run.
    fn terminal(&self, report: &Report) -> String {
        let tables: String = tables(report)
            .iter()
            .map(|t| format!("{}\n", t.to_text()))
            .collect();
        format!(
            "\n{}\n\n{tables}{}{}{}",
            title(report),
            block("Cells without a figure:\n", "  ", &problems(report)),
            lines("", footer(report)),
            lines("note: ", &report.notes)
        )
    }

    /// `report.md`: the same tables, the brokers' evidence, the environment and the notes.
    fn markdown(&self, report: &Report) -> String {
        let tables: String = tables(report)
            .iter()
            .map(|t| format!("{}\n", t.to_markdown()))
            .collect();
        let brokers = report.systems.iter().map(|s| {
            let verified: Vec<String> =
                s.verified.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{}: {} — {}", s.name, s.version, verified.join(", "))
        });
        let notes = if report.notes.is_empty() {
            String::new()
        } else {
            format!(
                "\n**What this run does not establish, and other notes**\n\n{}",
                lines("- ", &report.notes)
            )
        };
        format!(
            "# {}\n\n{}\n\n{tables}{}**Brokers (as each described itself)**\n\n{}\n**Environment**\n\n{}{notes}",
            title(report),
            run_line(report),
            block("**Cells without a figure**\n\n", "- ", &problems(report)),
            lines("- ", brokers),
            lines("- ", footer(report)),
        )
    }
}

/// How the windows read their sockets, in words: `--read-coalesce`, which
/// [`crate::engine::WindowSpec::idle_wait`] applies where every message goes to several subscribers.
fn coalesce_note(delay: Duration) -> String {
    if delay.is_zero() {
        return "Every window reads at once: a client lane sleeps on its sockets as soon as it has nothing to run (--read-coalesce 0).".to_owned();
    }
    format!(
        "Closed-loop windows where every message goes to several subscribers (fan-out, many-to-many) read in batches: a client lane with nothing to run waits {} µs before it sleeps on its sockets (--read-coalesce), so a message the broker writes to every subscriber wakes the client once, not once per subscriber, as subscribers on other machines would not wake the broker's host. Their deliveries are stamped up to that much late; every other window (latency, paced, shared groups, one subscriber) reads at once.",
        delay.as_micros()
    )
}

/// What a reader must know about how the figures were made.
pub fn notes(opts: &Opts, systems: &[SystemInfo], fd: &FdLimit) -> Vec<String> {
    let mut notes = vec![
        "mqtt-bench's own CPU is that of its client lanes (threads), read from the kernel in nanoseconds; it is reported per message beside each broker's.".to_owned(),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".to_owned(),
        format!(
            "QoS 0 1→1 is the highest delivered rate with loss ≤ {:.2}% at a publish rate mqtt-bench did not limit; a broker that slowed its publisher through TCP counts at the rate it delivered. Delivered rates are never compared with accepted ones.",
            opts.max_loss * 100.0
        ),
        format!(
            "Closed-loop publishers stay at most {} messages ahead of their slowest subscriber, so broker queues stay bounded; rates count to the last delivery (or acknowledgement).",
            opts.backlog
        ),
        coalesce_note(opts.read_coalesce),
        "A QoS 1/2 message lost, or a QoS 2 message delivered twice, makes its cell an error; QoS 0 loss is reported in the ledger, and beside each latency (a percentile the lost messages reach reads \"lost\").".to_owned(),
        "A paced publisher that fell short is client-limited only when its lane was on or waiting for a CPU 90% of the window; otherwise the broker did not take the target rate (\"target not reached\" in the round's detail).".to_owned(),
        format!(
            "Open files: the soft limit was {} and is {} (hard limit {}); {}.",
            fd.soft_before,
            fd.soft,
            fd.hard,
            fd.note.unwrap_or("")
        ),
    ];
    if systems
        .iter()
        .any(|s| s.location == common::results::Location::Remote)
    {
        notes.push("A broker on another host is reached over the network: its CPU and memory cannot be measured from here, and its latency includes the network's.".into());
    }
    for system in systems
        .iter()
        .filter(|s| s.location == common::results::Location::Remote)
    {
        notes.push(format!(
            "Not measured of {} (on another host): {}.",
            system.name,
            system.not_measured.join("; ")
        ));
    }
    if systems
        .iter()
        .any(|s| s.labels.iter().any(|l| l == "embedded"))
    {
        notes.push("The embedded broker runs inside mqtt-bench's process: its CPU is read from its own threads and subtracted from the client's; its memory cannot be told apart from the client's.".into());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::environment::Environment;
    use common::testing::synthetic_cell;
    use serde_json::json;

    fn cell(workload: &str, system: &str, rounds: &[f64]) -> Cell {
        let latency = [19_000, 25_000, 27_000, 90_000, 1_000_000];
        let mut cell = synthetic_cell((workload, system, "msg/s"), 2, rounds, latency, 20_000.0);
        cell.client_cpu_ns_per_op = Some(150.0);
        cell.extra.insert(
            "delivery".into(),
            json!({"sent": 1000, "distinct": 1000, "lost": 0, "duplicates": 0, "out_of_order": 0, "strays": 0}),
        );
        cell.extra
            .insert("broker_cpu_ns_per_msg".into(), json!(900.0));
        cell.extra
            .insert("broker_peak_rss_bytes".into(), json!(8_388_608));
        cell
    }

    pub fn sample() -> Report {
        let system = |name: &str, labels: &[&str]| SystemInfo {
            name: name.into(),
            kind: name.into(),
            url_redacted: format!("mqtt://127.0.0.1:1883/{name}"),
            version: format!("{name} 1.0"),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            ..SystemInfo::default()
        };
        let mut sweep = cell("qos0 delivered 1→1", "mosquitto", &[300_000.0, 302_000.0]);
        sweep.extra.insert(
            "rounds".into(),
            json!([{ "steps": [
                {"offered_per_s": 100000.0, "accepted_per_s": 99900.0, "delivered_per_s": 99800.0, "delivery": {"sent": 1000, "lost": 0}, "step": "ok"},
                {"offered_per_s": 400000.0, "accepted_per_s": 302000.0, "delivered_per_s": 301000.0, "delivery": {"sent": 1000, "lost": 0}, "step": "broker-limited"}
            ]}]),
        );
        let mut lossy = cell("qos1 acked publish, 64 in flight", "embedded", &[]);
        lossy.status = Status::Error;
        lossy.reason = Some("round 1: 3 QoS 1 messages lost".into());
        let mut report = Report::begin(
            "mqtt-bench",
            "0.1.0",
            "brokers",
            "64-byte payloads",
            json!({"rounds": 2}),
            Environment::default(),
        );
        // What the snapshots show must not depend on when, where or from which commit they run.
        report.run_id = "r".into();
        report.started_at = "2026-11-30T00:00:00Z".into();
        report.git_commit = None;
        report.reference = Some("mosquitto".into());
        report.systems = vec![
            system("mosquitto", &[]),
            system("embedded", &["embedded", "colocated"]),
        ];
        let qos1 = "qos1 acked publish, 64 in flight";
        let latency = "latency qos0 @ 10,000/s";
        let mut acked = cell(qos1, "mosquitto", &[130_000.0, 131_000.0]);
        acked.extra.insert(
            "rounds".into(),
            json!([
                {"client_cpu_ns_per_msg": 140.0, "broker_cpu_ns_per_msg": 880.0},
                {"client_cpu_ns_per_msg": 160.0, "broker_cpu_ns_per_msg": 920.0}
            ]),
        );
        report.cells = vec![
            acked,
            lossy,
            sweep,
            cell("qos0 delivered 1→1", "embedded", &[224_000.0, 226_000.0]),
            cell(latency, "mosquitto", &[10_000.0, 10_000.0]),
            cell(latency, "embedded", &[10_000.0, 10_000.0]),
        ];
        report.notes = vec!["all on one machine".into()];
        report
    }

    #[test]
    fn the_terminal_summary_and_report_md_match_their_snapshots() {
        let report = sample();
        insta::assert_snapshot!("terminal_report_snapshot", MqttReport.terminal(&report));
        insta::assert_snapshot!("markdown_report_snapshot", MqttReport.markdown(&report));
    }

    #[test]
    fn the_seed_table_puts_ratios_beside_the_figures_and_none_on_latency() {
        let table = seed_table(&sample());
        assert_eq!(table.header.last().unwrap(), "embedded / mosquitto");
        let qos0 = &table.rows[1];
        assert!(qos0[0].starts_with("qos0 delivered"), "{qos0:?}");
        // Two measured rounds a side give no verdict.
        assert_eq!(
            qos0[3],
            "no verdict: 2 measured rounds (a verdict needs 3 a side)"
        );
        assert_eq!(table.rows[0][2], "error");
        assert_eq!(table.rows[2][1], "19.0 µs / 27.0 µs / 90.0 µs");
        assert_eq!(table.rows[2][3], "—");
        let mut three = sample();
        for (cell, rounds) in three
            .cells
            .iter_mut()
            .filter(|c| c.workload == "qos0 delivered 1→1")
            .zip([
                [300_000.0, 302_000.0, 298_000.0],
                [224_000.0, 226_000.0, 222_000.0],
            ])
        {
            cell.throughput = common::results::Throughput::from_rounds(rounds.to_vec());
        }
        let qos0 = seed_table(&three).rows[1].clone();
        assert_eq!(qos0[3], "0.75× [0.74–0.76] lower");
    }
}
