//! The tables beside the seed's: per broker, QoS 0, 1 and 2 side by side for every scenario
//! that takes a QoS (delivered rate, latency, CPU per message of client and broker, lost /
//! duplicated / reordered); the connection storms (connections per second, CONNACK latency,
//! memory per connection of the broker and of the client); and the scenarios' own figures
//! (shared-subscription balance, time to all retained messages, a resumed session's backlog).

use common::human::{format_bytes, format_latency_ns, format_rate};
use common::report::Table;
use common::results::{Cell, Report, Status};

fn qos_of(cell: &Cell) -> Option<u8> {
    let (_, qos) = cell.workload.rsplit_once("qos")?;
    qos.chars().next()?.to_digit(10).map(|q| q as u8)
}

/// A workload name without its QoS: the family a QoS table sets side by side.
fn family(workload: &str) -> String {
    match workload.rsplit_once(", qos") {
        Some((family, _)) => family.to_owned(),
        None => workload.replace("qos1", "qos*").replace("qos2", "qos*"),
    }
}

fn figure(cell: &Cell, key: &str) -> Option<f64> {
    cell.extra.get("figures")?.get(key)?.as_f64()
}

fn is_storm(cell: &Cell) -> bool {
    cell.workload.starts_with("connect ") || cell.workload.starts_with("idle ")
}

/// No broker holds a connection in fewer bytes than this: a smaller growth of its resident
/// memory means it reused memory kept from connections before the run.
const LEAST_BYTES_PER_CONNECTION: f64 = 64.0;

/// The broker's memory per connection, or why there is no figure: a broker that already held
/// connections before the run (an earlier run's) keeps their memory and hands it out again, so
/// its RSS barely grows; the figure is then a fresh broker's to give.
fn broker_rss_per_connection(bytes: f64) -> String {
    if bytes < LEAST_BYTES_PER_CONNECTION {
        format!(
            "did not grow ({}: memory kept from earlier connections; a fresh broker gives the figure)",
            format_bytes(bytes as u64)
        )
    } else {
        format_bytes(bytes as u64)
    }
}

fn ns(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{v:.0} ns"))
}

/// `lost / duplicated / reordered` of a cell that counted its deliveries; `–` and the cell's
/// status when it counted nothing (a cell that measured nothing lost nothing only in the sense
/// that it sent nothing).
fn delivery(c: &Cell) -> String {
    let counted = c.extra.get("delivery").filter(|d| d.is_object());
    let n = |k: &str| counted.and_then(|d| d[k].as_u64());
    let sent_something = n("sent").is_some_and(|sent| sent > 0) || c.status == Status::Ok;
    match (n("lost"), n("duplicates"), n("out_of_order")) {
        (Some(lost), Some(duplicates), Some(reordered)) if sent_something => {
            format!("{lost} / {duplicates} / {reordered}")
        }
        _ if c.status != Status::Ok => format!("– ({})", c.status.as_str()),
        _ => "–".into(),
    }
}

/// One broker's QoS table.
fn qos_table(report: &Report, system: &str) -> Option<Table> {
    let cells: Vec<&Cell> = report
        .cells
        .iter()
        .filter(|c| c.system == system && !is_storm(c) && qos_of(c).is_some())
        .collect();
    let mut families: Vec<String> = Vec::new();
    for c in &cells {
        let f = family(&c.workload);
        if !families.contains(&f) {
            families.push(f);
        }
    }
    let mut rows = Vec::new();
    for f in &families {
        let at = |qos: u8| {
            cells
                .iter()
                .find(|c| family(&c.workload) == *f && qos_of(c) == Some(qos))
        };
        let line = |what: &str, show: &dyn Fn(&Cell) -> String| {
            let mut row = vec![format!("{f}: {what}")];
            row.extend((0..=2).map(|q| at(q).map_or("–".into(), |c| show(c))));
            row
        };
        rows.push(line("figure", &|c| {
            if c.status != Status::Ok {
                return c.status.as_str().to_owned();
            }
            c.throughput.as_ref().map_or("–".into(), |t| {
                format!("{} {}", format_rate(t.median), c.unit)
            })
        }));
        rows.push(line("latency p50 / p99", &|c| {
            c.latency_ns.map_or("–".into(), |l| {
                format!(
                    "{} / {}",
                    format_latency_ns(l.p50),
                    format_latency_ns(l.p99)
                )
            })
        }));
        rows.push(line("CPU per message, client / broker", &|c| {
            let broker = c
                .extra
                .get("broker_cpu_ns_per_msg")
                .and_then(|v| v.as_f64());
            format!("{} / {}", ns(c.client_cpu_ns_per_op), ns(broker))
        }));
        rows.push(line("lost / duplicated / reordered", &|c| delivery(c)));
    }
    (!rows.is_empty()).then(|| Table {
        title: format!("{system}: QoS 0, 1 and 2 side by side (median of the measured rounds)"),
        header: ["scenario", "QoS 0", "QoS 1", "QoS 2"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: true,
    })
}

/// Per broker, the QoS levels as columns.
pub fn qos_tables(report: &Report) -> Vec<Table> {
    report
        .systems
        .iter()
        .filter_map(|s| qos_table(report, &s.name))
        .collect()
}

/// A row of the table: its label and how a cell shows it.
type Metric<'a> = (&'a str, &'a dyn Fn(&Cell) -> String);

/// The connection storms, one column per system.
pub fn storm_table(report: &Report) -> Option<Table> {
    let workloads: Vec<&str> = {
        let mut seen: Vec<&str> = Vec::new();
        for c in report.cells.iter().filter(|c| is_storm(c)) {
            if !seen.contains(&c.workload.as_str()) {
                seen.push(&c.workload);
            }
        }
        seen
    };
    if workloads.is_empty() {
        return None;
    }
    let metrics: [Metric; 7] = [
        ("connections/s sustained (held at the end, idle)", &|c| {
            if c.status == Status::Refused {
                return "refused".into();
            }
            c.throughput
                .as_ref()
                .map_or("–".into(), |t| format_rate(t.median))
        }),
        ("CONNACK p50 / p99 (idle: ping round trip)", &|c| {
            c.latency_ns.map_or("–".into(), |l| {
                format!(
                    "{} / {}",
                    format_latency_ns(l.p50),
                    format_latency_ns(l.p99)
                )
            })
        }),
        (
            "TLS handshake p50 / p99 (not in the CONNACK figures)",
            &|c| {
                let at = |k| figure(c, k).map(|v| format_latency_ns(v as u64));
                match (at("tls_handshake_p50_ns"), at("tls_handshake_p99_ns")) {
                    (Some(p50), Some(p99)) => format!("{p50} / {p99}"),
                    _ => "–".into(),
                }
            },
        ),
        ("broker RSS per connection", &|c| {
            figure(c, "broker_rss_per_conn_bytes").map_or("–".into(), broker_rss_per_connection)
        }),
        ("client RSS per connection", &|c| {
            figure(c, "client_rss_per_conn_bytes").map_or("–".into(), |b| format_bytes(b as u64))
        }),
        ("refused / timed out / failed / dropped", &|c| {
            let n = |k| figure(c, k).map_or("–".into(), |v| format!("{v:.0}"));
            format!(
                "{} / {} / {} / {}",
                n("refused"),
                n("timed_out"),
                n("failed"),
                n("dropped")
            )
        }),
        (
            "broker CPU per connection (idle: per connection-second)",
            &|c| ns(figure(c, "broker_cpu_ns_per_conn").or(figure(c, "broker_cpu_ns_per_conn_s"))),
        ),
    ];
    let mut rows = Vec::new();
    for w in &workloads {
        for (what, show) in &metrics {
            let mut row = vec![format!("{w}: {what}")];
            row.extend(report.systems.iter().map(|s| {
                report
                    .cells
                    .iter()
                    .find(|c| c.workload == *w && c.system == s.name)
                    .map_or("–".into(), show)
            }));
            rows.push(row);
        }
    }
    let mut header = vec!["connection storm".to_owned()];
    header.extend(report.systems.iter().map(|s| s.name.clone()));
    Some(Table {
        title: "Connection storms (median of the measured rounds; memory per connection over the system's memory before its first storm)".into(),
        header,
        rows,
        numeric: true,
    })
}

/// Each scenario's own figures, one column per system.
pub fn figures_table(report: &Report) -> Option<Table> {
    const SHOWN: [(&str, &str); 6] = [
        ("min_share", "smallest consumer's share"),
        ("max_share", "largest consumer's share"),
        ("time_to_all_s", "time to every retained message"),
        ("queued_while_away", "messages queued while away"),
        ("catch_up_s", "catch-up after resuming"),
        ("client_busy_share", "busiest client lane"),
    ];
    let mut rows = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for c in report.cells.iter().filter(|c| !is_storm(c)) {
        if seen.contains(&c.workload.as_str()) {
            continue;
        }
        seen.push(&c.workload);
        for (key, what) in SHOWN {
            let values: Vec<String> = report
                .systems
                .iter()
                .map(|s| {
                    report
                        .cells
                        .iter()
                        .find(|x| x.workload == c.workload && x.system == s.name)
                        .and_then(|x| figure(x, key))
                        .map_or("–".into(), |v| match key {
                            "min_share" | "max_share" | "client_busy_share" => {
                                format!("{:.0}%", v * 100.0)
                            }
                            "queued_while_away" => format!("{v:.0}"),
                            _ => format!("{v:.3} s"),
                        })
                })
                .collect();
            // The busiest lane is shown only where it says something: 90% or more.
            let worth = key != "client_busy_share"
                || report
                    .cells
                    .iter()
                    .filter(|x| x.workload == c.workload)
                    .any(|x| figure(x, key).is_some_and(|v| v >= 0.9));
            if worth && values.iter().any(|v| v != "–") {
                let mut row = vec![format!("{}: {what}", c.workload)];
                row.extend(values);
                rows.push(row);
            }
        }
    }
    let mut header = vec!["scenario".to_owned()];
    header.extend(report.systems.iter().map(|s| s.name.clone()));
    (!rows.is_empty()).then(|| Table {
        title: "Scenario figures (median of the measured rounds)".into(),
        header,
        rows,
        numeric: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_that_sent_nothing_shows_no_delivery_counts_but_its_status() {
        let mut cell = Cell::new("acked publish, qos1", "b", "msg/s", 1, 1);
        cell.status = Status::Error;
        cell.extra.insert(
            "delivery".into(),
            serde_json::json!({"sent": 0, "lost": 0, "duplicates": 0, "out_of_order": 0}),
        );
        assert_eq!(delivery(&cell), "– (error)");
        cell.extra.remove("delivery");
        assert_eq!(delivery(&cell), "– (error)");
        cell.status = Status::Ok;
        cell.extra.insert(
            "delivery".into(),
            serde_json::json!({"sent": 10, "lost": 1, "duplicates": 2, "out_of_order": 3}),
        );
        assert_eq!(delivery(&cell), "1 / 2 / 3");
    }

    #[test]
    fn a_broker_whose_memory_did_not_grow_gives_no_figure_per_connection() {
        assert_eq!(broker_rss_per_connection(713.0), "713 B");
        assert_eq!(
            broker_rss_per_connection(1.0),
            "did not grow (1 B: memory kept from earlier connections; a fresh broker gives the figure)"
        );
    }
}
