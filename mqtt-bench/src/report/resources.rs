//! What each broker and mqtt-bench cost: CPU per message and peak memory over the measured
//! rounds, and the client's CPU per message against the broker's round by round, so a reader
//! sees how far the figure moved between rounds before reading anything into it.

use common::human::format_bytes;
use common::report::Table;
use common::results::{Cell, Report, median};

use super::{header, rows_per_system};

/// CPU per message of the broker and of mqtt-bench, and peak memory, per row and broker.
pub fn resources_table(report: &Report) -> Table {
    let rows = rows_per_system(report, |cell| {
        let ns = |v: Option<f64>| v.map_or("–".into(), |ns| format!("{ns:.0} ns"));
        let broker_cpu = ns(cell
            .extra
            .get("broker_cpu_ns_per_msg")
            .and_then(|v| v.as_f64()));
        let client_cpu = ns(cell.client_cpu_ns_per_op);
        let rss = |key: &str| {
            cell.extra
                .get(key)
                .and_then(|v| v.as_u64())
                .map_or("–".into(), format_bytes)
        };
        format!(
            "{broker_cpu} / {client_cpu} · {} / {}",
            rss("broker_peak_rss_bytes"),
            rss("client_peak_rss_bytes")
        )
    });
    Table {
        title: "CPU per message, broker / mqtt-bench · peak RSS, broker / mqtt-bench".into(),
        header: header(report, "scenario"),
        rows,
        numeric: true,
    }
}

/// A figure of each measured round (`extra.rounds[i][key]`), in the order measured; empty
/// when a round lacks it (a sweep's rounds keep theirs per step).
fn per_round(cell: &Cell, key: &str) -> Vec<f64> {
    let Some(rounds) = cell.extra.get("rounds").and_then(|r| r.as_array()) else {
        return Vec::new();
    };
    let values: Vec<f64> = rounds.iter().filter_map(|r| r[key].as_f64()).collect();
    if values.len() == rounds.len() {
        values
    } else {
        Vec::new()
    }
}

/// `median [lowest–highest]` of `values`, each formatted by `show` and the median followed by
/// `unit`; the median alone for one value.
fn spread(values: &[f64], unit: &str, show: impl Fn(f64) -> String) -> String {
    let Some(mid) = median(values) else {
        return "–".into();
    };
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() < 2 {
        format!("{}{unit}", show(mid))
    } else {
        format!("{}{unit} [{}–{}]", show(mid), show(low), show(high))
    }
}

/// One cell's client ÷ broker CPU per message with its spread over the rounds, then each side's.
fn cpu_rounds(cell: &Cell) -> String {
    let client = per_round(cell, "client_cpu_ns_per_msg");
    if client.is_empty() {
        return "–".into();
    }
    let broker = per_round(cell, "broker_cpu_ns_per_msg");
    let ratios: Vec<f64> = if broker.len() == client.len() {
        client
            .iter()
            .zip(&broker)
            .filter(|(_, b)| **b > 0.0)
            .map(|(c, b)| c / b)
            .collect()
    } else {
        Vec::new()
    };
    let ratio = if ratios.len() == client.len() {
        spread(&ratios, "×", |r| format!("{r:.2}"))
    } else {
        "–".into()
    };
    let ns = |v: f64| format!("{v:.0}");
    format!(
        "{ratio} · {} / {} ns",
        spread(&client, "", ns),
        spread(&broker, "", ns)
    )
}

/// mqtt-bench's CPU per message against the broker's, round by round: the ratio's median and
/// range over the measured rounds, then the client's and the broker's figures. Absent when no
/// cell kept a client figure per round.
pub fn cpu_rounds_table(report: &Report) -> Option<Table> {
    let any = report
        .cells
        .iter()
        .any(|c| !per_round(c, "client_cpu_ns_per_msg").is_empty());
    if !any {
        return None;
    }
    let rows = rows_per_system(report, cpu_rounds);
    Some(Table {
        title: "CPU per message round by round: mqtt-bench ÷ broker, median [lowest–highest] \
                over the measured rounds · mqtt-bench / broker ns"
            .into(),
        header: header(report, "scenario"),
        rows,
        numeric: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cell(rounds: serde_json::Value) -> Cell {
        let mut cell = Cell::new("fanout 1→50", "mosquitto", "msg/s", 51, 3);
        cell.extra.insert("rounds".into(), rounds);
        cell
    }

    #[test]
    fn the_ratio_is_taken_round_by_round_and_shown_with_its_range() {
        let cell = cell(json!([
            {"client_cpu_ns_per_msg": 900.0, "broker_cpu_ns_per_msg": 4_500.0},
            {"client_cpu_ns_per_msg": 1_600.0, "broker_cpu_ns_per_msg": 5_000.0},
            {"client_cpu_ns_per_msg": 1_000.0, "broker_cpu_ns_per_msg": 4_000.0},
        ]));
        // Rounds 0.20×, 0.32×, 0.25×: the median ratio is not the ratio of the medians (0.22×).
        assert_eq!(
            cpu_rounds(&cell),
            "0.25× [0.20–0.32] · 1000 [900–1600] / 4500 [4000–5000] ns"
        );
    }

    #[test]
    fn a_round_without_a_broker_figure_leaves_the_ratio_unknown() {
        let remote = cell(json!([
            {"client_cpu_ns_per_msg": 900.0, "broker_cpu_ns_per_msg": 4_500.0},
            {"client_cpu_ns_per_msg": 1_100.0, "broker_cpu_ns_per_msg": null},
        ]));
        assert_eq!(cpu_rounds(&remote), "– · 1000 [900–1100] / – ns");
        let sweep = cell(json!([{"steps": []}]));
        assert_eq!(cpu_rounds(&sweep), "–");
    }
}
