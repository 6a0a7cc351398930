//! `sql-bench merge` of a ycsb run: each cell's per-operation figures are every worker's added
//! up (counts, throughput, the HDR histogram with its percentiles recomputed, the measured
//! shares from the summed counts) and so are the key chooser's draws; what a cell says it
//! verified (`records_counted`, the sample) stays worker 0's, who counted the whole table.

use common::histogram::{add, decode_histogram, encode_histogram, new_histogram};
use common::recorder::percentiles;
use common::results::{Cell, Report};
use serde_json::{Map, Value, json};

/// The note a merged ycsb run carries about its cell figures.
pub const NOTE: &str = "sql-bench ycsb: each operation's counts, throughput and latency (its histograms added) and the key chooser's draws are every worker's added up, the shares recomputed from the sums; the records counted and the sample verified are worker 0's, who counted the whole table.";

/// Adds the workers' per-operation figures into `merged`, cell by cell; an operation's histogram
/// a worker kept but that cannot be read refuses the merge, naming it (as the cell merge does).
pub fn merge_extras(parts: &[&Report], merged: &mut Report) -> Result<(), String> {
    for (i, cell) in merged.cells.iter_mut().enumerate() {
        let cells: Vec<&Cell> = parts.iter().filter_map(|p| p.cells.get(i)).collect();
        if cells.len() == parts.len() && cell.extra.contains_key("operations") {
            merge_operations(&cells, cell).map_err(|e| {
                format!(
                    "{} · {}: {e}; nothing was merged",
                    cell.workload, cell.system
                )
            })?;
            merge_keys(&cells, cell);
        }
    }
    if !merged.notes.iter().any(|n| n == NOTE) {
        merged.notes.push(NOTE.into());
    }
    Ok(())
}

fn number(value: &Value, key: &str) -> f64 {
    value.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn count(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn merge_operations(parts: &[&Cell], cell: &mut Cell) -> Result<(), String> {
    let Some(Value::Object(operations)) = cell.extra.get("operations").cloned() else {
        return Ok(());
    };
    let of = |kind: &str| -> Vec<&Value> {
        parts
            .iter()
            .filter_map(|c| c.extra.get("operations")?.get(kind))
            .collect()
    };
    let total: u64 = operations
        .keys()
        .flat_map(|kind| of(kind))
        .map(|op| count(op, "ok") + count(op, "error"))
        .sum();
    let mut merged = Map::new();
    for (kind, first) in operations {
        let ops = of(&kind);
        let mut op = first.clone();
        let (ok, error) = (
            ops.iter().map(|o| count(o, "ok")).sum::<u64>(),
            ops.iter().map(|o| count(o, "error")).sum::<u64>(),
        );
        op["ok"] = json!(ok);
        op["error"] = json!(error);
        op["share"] = json!((ok + error) as f64 / total.max(1) as f64);
        let throughput: f64 = ops.iter().map(|o| number(o, "throughput_per_s")).sum();
        op["throughput_per_s"] = json!(throughput);
        let raced: u64 = ops.iter().map(|o| count(o, "raced_delete")).sum();
        if raced > 0 {
            op["raced_delete"] = json!(raced);
        }
        let mut latency = None;
        for (worker, text) in ops
            .iter()
            .enumerate()
            .filter_map(|(w, o)| Some((w, o.get("histogram_b64")?.as_str()?)))
        {
            let h = decode_histogram(text)
                .map_err(|e| format!("worker {worker}'s {kind} histogram cannot be read ({e})"))?;
            add(latency.get_or_insert_with(new_histogram), &h);
        }
        if let Some(h) = latency {
            op["latency_ns"] = json!(percentiles(&h));
            op["histogram_b64"] = json!(encode_histogram(&h));
        }
        merged.insert(kind, op);
    }
    cell.extra
        .insert("operations".into(), Value::Object(merged));
    Ok(())
}

/// The chooser's draws summed, and each share it reports recomputed from the summed counts.
fn merge_keys(parts: &[&Cell], cell: &mut Cell) {
    let Some(mut keys) = cell.extra.get("keys").cloned() else {
        return;
    };
    let all: Vec<&Value> = parts.iter().filter_map(|c| c.extra.get("keys")).collect();
    let chosen: u64 = all.iter().map(|k| count(k, "chosen")).sum();
    keys["chosen"] = json!(chosen);
    for share in ["newest_share", "inserted_by_run_share", "hottest_share"] {
        if keys.get(share).is_none() {
            continue;
        }
        // Each worker's share of its own draws, back to a count (exact after rounding).
        let hits: f64 = all
            .iter()
            .map(|k| (number(k, share) * count(k, "chosen") as f64).round())
            .sum();
        let value = if chosen > 0 {
            hits / chosen as f64
        } else {
            0.0
        };
        keys[share] = json!(value);
    }
    cell.extra.insert("keys".into(), keys);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(histogram: &str) -> Report {
        let mut report = common::testing::synthetic_report("sql-bench", "ycsb", "s", json!({}));
        let mut cell = Cell::new("a", "sqlite", "ops/s", 1, 1);
        cell.extra.insert(
            "operations".into(),
            json!({"read": {"ok": 10, "error": 0, "throughput_per_s": 5.0, "histogram_b64": histogram}}),
        );
        report.cells.push(cell);
        report
    }

    #[test]
    fn a_histogram_a_worker_kept_but_that_cannot_be_read_refuses_the_merge() {
        let mut h = new_histogram();
        h.record(1_000).unwrap();
        let good = encode_histogram(&h);
        let (a, b) = (part(&good), part("not a histogram"));
        let mut merged = a.clone();
        let error = merge_extras(&[&a, &b], &mut merged).unwrap_err();
        assert!(
            error.contains("worker 1's read histogram cannot be read"),
            "{error}"
        );
        let mut merged = a.clone();
        merge_extras(&[&a, &a], &mut merged).unwrap();
        assert_eq!(merged.cells[0].extra["operations"]["read"]["ok"], 20);
    }
}
