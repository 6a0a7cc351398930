//! `mqtt-bench merge`: the delivery accounting of a merged run is every worker's added up
//! (each worker's ledgers hold its own topics, whose publishers and subscribers are all its
//! own), the latency of every message sent recomputed from the added histograms; the rounds'
//! detail and the scenarios' named figures stay worker 0's.

use common::histogram::decode_histogram;
use common::results::{Cell, Report};
use serde_json::json;

use crate::measure::latency_of_sent;
use crate::message::Delivery;

/// The note a merged run carries about its cell figures.
pub const NOTE: &str = "mqtt-bench: each cell's delivery ledger (owed, delivered, lost, duplicated, out of order, stray), loss fraction and message count are every worker's added up, and the latency of every message sent is recomputed from the added histograms; each round's detail and the scenarios' named figures (medians) are worker 0's.";

/// Adds the workers' delivery accounting into `merged`, cell by cell; a cell some workers kept a
/// ledger of and others did not (or kept one that cannot be read) is refused, naming the worker:
/// a sum of some workers' ledgers would read as the whole run's.
pub fn merge_extras(parts: &[&Report], merged: &mut Report) -> Result<(), String> {
    for (i, cell) in merged.cells.iter_mut().enumerate() {
        let cells: Vec<&Cell> = parts.iter().filter_map(|p| p.cells.get(i)).collect();
        merge_cell(&cells, cell).map_err(|e| {
            format!(
                "{} · {}: {e}; nothing was merged",
                cell.workload, cell.system
            )
        })?;
    }
    if !merged.notes.iter().any(|n| n == NOTE) {
        merged.notes.push(NOTE.into());
    }
    Ok(())
}

fn merge_cell(parts: &[&Cell], cell: &mut Cell) -> Result<(), String> {
    let kept: Vec<Option<&serde_json::Value>> =
        parts.iter().map(|c| c.extra.get("delivery")).collect();
    if kept.iter().all(Option::is_none) {
        return Ok(());
    }
    let ledgers: Vec<Delivery> = kept
        .iter()
        .enumerate()
        .map(|(worker, ledger)| match ledger {
            None => Err(format!(
                "worker {worker} kept no delivery ledger where the others did"
            )),
            Some(value) => serde_json::from_value((*value).clone())
                .map_err(|e| format!("worker {worker}'s delivery ledger cannot be read ({e})")),
        })
        .collect::<Result<_, _>>()?;
    let mut delivery = Delivery::default();
    ledgers.iter().for_each(|d| delivery.add(d));
    let messages: u64 = parts
        .iter()
        .filter_map(|c| c.extra.get("messages")?.as_u64())
        .sum();
    let latency = cell
        .histogram_b64
        .as_ref()
        .and_then(|h| decode_histogram(h).ok());
    cell.extra.insert("delivery".into(), json!(delivery));
    cell.extra
        .insert("loss_fraction".into(), json!(delivery.loss_fraction()));
    cell.extra.insert("messages".into(), json!(messages));
    cell.extra.insert(
        "latency_of_sent_ns".into(),
        latency_of_sent(latency.as_ref(), &delivery),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(ledger: Option<serde_json::Value>) -> Report {
        let mut report = common::testing::synthetic_report("mqtt-bench", "mqtt", "s", json!({}));
        let mut cell = Cell::new("acked publish, qos1", "b", "msg/s", 1, 1);
        if let Some(ledger) = ledger {
            cell.extra.insert("delivery".into(), ledger);
        }
        report.cells.push(cell);
        report
    }

    #[test]
    fn a_worker_without_a_ledger_where_the_others_kept_one_refuses_the_merge() {
        let ledger = json!(Delivery {
            sent: 10,
            distinct: 10,
            ..Delivery::default()
        });
        let (a, b) = (part(Some(ledger)), part(None));
        let mut merged = a.clone();
        let error = merge_extras(&[&a, &b], &mut merged).unwrap_err();
        assert!(
            error.contains("worker 1 kept no delivery ledger"),
            "{error}"
        );
        let mut merged = a.clone();
        merge_extras(&[&a, &a], &mut merged).unwrap();
        assert_eq!(merged.cells[0].extra["delivery"]["sent"], 20);
        let (c, d) = (part(None), part(None));
        let mut merged = c.clone();
        merge_extras(&[&c, &d], &mut merged).unwrap();
    }
}
