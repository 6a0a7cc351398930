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

/// Adds the workers' delivery accounting into `merged`, cell by cell.
pub fn merge_extras(parts: &[&Report], merged: &mut Report) {
    for (i, cell) in merged.cells.iter_mut().enumerate() {
        let cells: Vec<&Cell> = parts.iter().filter_map(|p| p.cells.get(i)).collect();
        merge_cell(&cells, cell);
    }
    if !merged.notes.iter().any(|n| n == NOTE) {
        merged.notes.push(NOTE.into());
    }
}

fn merge_cell(parts: &[&Cell], cell: &mut Cell) {
    let ledgers: Vec<Delivery> = parts
        .iter()
        .filter_map(|c| serde_json::from_value(c.extra.get("delivery")?.clone()).ok())
        .collect();
    if ledgers.len() != parts.len() {
        return;
    }
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
}
