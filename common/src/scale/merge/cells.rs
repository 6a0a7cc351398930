//! One cell of a merged run from the same cell of every worker: throughput summed round by
//! round (then median, min, max), HDR histograms added (every percentile recomputed from the
//! sum, never averaged), counts, connections, rates and client CPU summed, the worst status
//! kept with the worker that had it.

use hdrhistogram::Histogram;

use crate::histogram::{add, decode_histogram, encode_histogram, new_histogram};
use crate::protocol::severity;
use crate::recorder::percentiles;
use crate::results::{Cell, Percentiles, Throughput};

/// Adds the encoded histograms; `None` when no part has one.
pub(crate) fn add_encoded<'a>(
    encoded: impl Iterator<Item = Option<&'a String>>,
) -> Result<Option<Histogram<u64>>, String> {
    let mut sum: Option<Histogram<u64>> = None;
    for text in encoded.flatten() {
        let histogram = decode_histogram(text)?;
        add(sum.get_or_insert_with(new_histogram), &histogram);
    }
    Ok(sum)
}

/// Round by round and second by second, the workers' per-second histograms added; `None`
/// unless every worker kept them for every round.
fn add_seconds(
    parts: &[(u32, &Cell)],
    rounds: usize,
) -> Result<Option<Vec<Vec<Histogram<u64>>>>, String> {
    if parts
        .iter()
        .any(|(_, c)| c.latency_per_second_b64.len() != rounds)
        || rounds == 0
    {
        return Ok(None);
    }
    let mut merged: Vec<Vec<Histogram<u64>>> = vec![Vec::new(); rounds];
    for (_, cell) in parts {
        for (round, seconds) in cell.latency_per_second_b64.iter().enumerate() {
            let slot = &mut merged[round];
            for (second, text) in seconds.iter().enumerate() {
                if slot.len() <= second {
                    slot.push(new_histogram());
                }
                add(&mut slot[second], &decode_histogram(text)?);
            }
        }
    }
    Ok(Some(merged))
}

/// The element-wise worst of the workers' percentiles (for figures no histogram was kept of).
fn worst(values: impl Iterator<Item = Option<Percentiles>>) -> Option<Percentiles> {
    values.flatten().reduce(|a, b| Percentiles {
        p50: a.p50.max(b.p50),
        p95: a.p95.max(b.p95),
        p99: a.p99.max(b.p99),
        p999: a.p999.max(b.p999),
        max: a.max.max(b.max),
        mean: a.mean.max(b.mean),
    })
}

fn sum_options(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.sum::<Option<f64>>()
}

/// The cell of the merged run. `parts` are (worker index, that worker's cell), in index order.
pub fn merge_cell(parts: &[(u32, &Cell)]) -> Result<Cell, String> {
    let (_, first) = parts[0];
    let mut cell = first.clone();
    let (worst_index, worst_cell) = parts
        .iter()
        .copied()
        .max_by_key(|(i, c)| (severity(c.status), std::cmp::Reverse(*i)))
        .expect("a merge has parts");
    cell.status = worst_cell.status;
    cell.reason = worst_cell
        .reason
        .as_ref()
        .map(|r| format!("worker {worst_index}: {r}"));
    for (_, part) in parts {
        for label in &part.labels {
            if !cell.labels.contains(label) {
                cell.labels.push(label.clone());
            }
        }
    }
    cell.connections = parts.iter().map(|(_, c)| c.connections).sum();
    cell.counts.ok = parts.iter().map(|(_, c)| c.counts.ok).sum();
    cell.counts.error = parts.iter().map(|(_, c)| c.counts.error).sum();
    cell.counts.timeout = parts.iter().map(|(_, c)| c.counts.timeout).sum();
    cell.target_rate = sum_options(parts.iter().map(|(_, c)| c.target_rate));
    cell.achieved_rate = sum_options(parts.iter().map(|(_, c)| c.achieved_rate));
    cell.missed_ticks = parts
        .iter()
        .map(|(_, c)| c.missed_ticks)
        .sum::<Option<u64>>();
    let completed = |c: &Cell| (c.counts.ok + c.counts.error) as f64;
    let cpu_ns: Option<f64> = parts
        .iter()
        .map(|(_, c)| c.client_cpu_ns_per_op.map(|per_op| per_op * completed(c)))
        .sum();
    let all_completed: f64 = parts.iter().map(|(_, c)| completed(c)).sum();
    cell.client_cpu_ns_per_op = cpu_ns
        .filter(|_| all_completed > 0.0)
        .map(|t| t / all_completed);
    cell.throughput = sum_rounds(parts, &mut cell);
    let latency = add_encoded(parts.iter().map(|(_, c)| c.histogram_b64.as_ref()))?;
    cell.latency_ns = latency.as_ref().and_then(percentiles);
    cell.histogram_b64 = latency.as_ref().map(encode_histogram);
    let service = add_encoded(parts.iter().map(|(_, c)| c.service_histogram_b64.as_ref()))?;
    cell.service_time_ns = service.as_ref().and_then(percentiles);
    cell.service_histogram_b64 = service.as_ref().map(encode_histogram);
    cell.schedule_lag_ns = worst(parts.iter().map(|(_, c)| c.schedule_lag_ns));
    merge_extra_histograms(parts, &mut cell)?;
    let rounds = cell.throughput.as_ref().map_or(0, |t| t.rounds.len());
    match add_seconds(parts, rounds)? {
        Some(seconds) => {
            cell.latency_rounds_ns = seconds
                .iter()
                .map(|round| {
                    let mut whole = new_histogram();
                    round.iter().for_each(|s| add(&mut whole, s));
                    percentiles(&whole).unwrap_or_default()
                })
                .collect();
            cell.latency_per_second_b64 = seconds
                .iter()
                .map(|round| round.iter().map(encode_histogram).collect())
                .collect();
        }
        None => {
            cell.latency_rounds_ns.clear();
            cell.latency_per_second_b64.clear();
        }
    }
    Ok(cell)
}

/// A tool's own histograms in a cell's `extra` (keys ending `_histogram_b64`, such as
/// vector-bench's latency at --connections) are added like the cell's: the sum replaces worker
/// 0's, and the percentiles beside it (the same stem ending `_ns`) are recomputed from it.
fn merge_extra_histograms(parts: &[(u32, &Cell)], cell: &mut Cell) -> Result<(), String> {
    let keys: Vec<String> = cell
        .extra
        .keys()
        .filter(|k| k.ends_with("_histogram_b64"))
        .cloned()
        .collect();
    for key in keys {
        let encoded = parts
            .iter()
            .map(|(_, c)| c.extra.get(&key).and_then(serde_json::Value::as_str));
        let texts: Vec<Option<String>> = encoded.map(|t| t.map(str::to_owned)).collect();
        let sum = add_encoded(texts.iter().map(Option::as_ref))?;
        let stem = key.trim_end_matches("_histogram_b64");
        cell.extra.insert(
            key.clone(),
            serde_json::json!(sum.as_ref().map(encode_histogram)),
        );
        let beside = format!("{stem}_ns");
        if cell.extra.contains_key(&beside) {
            cell.extra.insert(
                beside,
                serde_json::json!(sum.as_ref().and_then(percentiles)),
            );
        }
    }
    Ok(())
}

/// Every worker's figure of round r added, for each r; a cell whose workers measured
/// different numbers of rounds gets none, and says so.
fn sum_rounds(parts: &[(u32, &Cell)], cell: &mut Cell) -> Option<Throughput> {
    let lengths: Vec<usize> = parts
        .iter()
        .map(|(_, c)| c.throughput.as_ref().map_or(0, |t| t.rounds.len()))
        .collect();
    if lengths.iter().all(|&n| n == 0) {
        return None;
    }
    if lengths.iter().any(|&n| n != lengths[0]) {
        let spread: Vec<String> = parts
            .iter()
            .zip(&lengths)
            .map(|((i, _), n)| format!("worker {i}: {n}"))
            .collect();
        cell.status = crate::results::Status::Error;
        cell.reason = Some(format!(
            "the workers measured different numbers of rounds ({}): no round can be summed",
            spread.join(", ")
        ));
        return None;
    }
    let mut sums = vec![0.0; lengths[0]];
    for (_, part) in parts {
        if let Some(t) = &part.throughput {
            for (sum, v) in sums.iter_mut().zip(&t.rounds) {
                *sum += v;
            }
        }
    }
    Throughput::from_rounds(sums)
}
