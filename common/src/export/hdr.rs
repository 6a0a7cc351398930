//! HdrHistogram's own files, per cell: `hdr/<workload>--<system>.hgrm`, the percentile
//! distribution of the pooled histogram in the layout of HdrHistogram's
//! `outputPercentileDistribution` (what its plotters and `HistogramLogProcessor` print and
//! read; values in milliseconds, 5 ticks per half distance), and `hdr/<…>.hlog`, an interval
//! log of 1 s histograms written with the hdrhistogram crate's `interval_log` writer.
//!
//! Layout of an interval log: the measured rounds are laid end to end, round N (from 1)
//! starting at (N − 1) × S seconds, S the most seconds any round of the cell has; within a
//! round an interval starts at its offset from the opening of that round's window. Every
//! interval carries the tag `<workload>/<system>` (spaces and commas as `_`). Values are
//! nanoseconds; the interval maximum column is in milliseconds (`MaxValueDivisor`), as
//! HdrHistogram's Java writer does by default.

use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use crate::export::names::{cell_stems, hgrm_file, hlog_file};
use crate::export::{Export, Exporter};
use crate::recorder::decode_histogram;
use crate::results::{Cell, Report};
use crate::seconds::{INTERVAL, decode_round};

/// Nanoseconds per millisecond: `.hgrm` values are in milliseconds, as HdrHistogram's tools
/// print nanosecond histograms by default.
pub const MS: f64 = 1e6;

/// Decimals of a `.hgrm` value: HdrHistogram prints as many as the histogram's significant
/// digits (3, i.e. microseconds); three more keep nanoseconds, which embedded systems need.
const DECIMALS: usize = 6;

/// The `.hgrm` and `.hlog` of every cell that has the histograms for them.
pub struct Hdr;

impl Exporter for Hdr {
    fn export(&self, report: &Report) -> Vec<Export> {
        let mut files = Vec::new();
        for (cell, stem) in report.cells.iter().zip(cell_stems(report)) {
            if let Some(histogram) = cell
                .histogram_b64
                .as_deref()
                .and_then(|h| decode_histogram(h).ok())
                && !histogram.is_empty()
            {
                files.push(Export::new(
                    hgrm_file(&stem),
                    percentile_distribution(&histogram),
                ));
            }
            if let Some(log) = interval_log(report, cell) {
                files.push(Export::new(hlog_file(&stem), log));
            }
        }
        files
    }
}

/// The sub-bucket count HdrHistogram reports for a precision: the power of two at or above
/// 2 × 10^digits.
fn sub_buckets(significant_digits: u8) -> u64 {
    (2 * 10u64.pow(u32::from(significant_digits))).next_power_of_two()
}

/// What `outputPercentileDistribution(out, 5, 1e6)` prints for `histogram` (in ns), with
/// [`DECIMALS`] decimals.
pub fn percentile_distribution(histogram: &Histogram<u64>) -> String {
    let d = DECIMALS;
    let mut out = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for step in histogram.iter_quantiles(5) {
        total += step.count_since_last_iteration();
        let value = step.value_iterated_to() as f64 / MS;
        let q = step.quantile_iterated_to();
        if q < 1.0 {
            let inverse = 1.0 / (1.0 - q);
            out.push_str(&format!(
                "{value:12.d$} {q:2.12} {total:10} {inverse:14.2}\n"
            ));
        } else {
            out.push_str(&format!("{value:12.d$} {q:2.12} {total:10}\n"));
        }
    }
    out.push_str(&format!(
        "#[Mean    = {:12.d$}, StdDeviation   = {:12.d$}]\n",
        histogram.mean() / MS,
        histogram.stdev() / MS
    ));
    out.push_str(&format!(
        "#[Max     = {:12.d$}, Total count    = {:12}]\n",
        histogram.max() as f64 / MS,
        histogram.len()
    ));
    out.push_str(&format!(
        "#[Buckets = {:12}, SubBuckets     = {:12}]\n",
        histogram.buckets(),
        sub_buckets(histogram.sigfig())
    ));
    out
}

/// An interval log's tag may not hold spaces, commas or line breaks.
fn tag_text(cell: &Cell) -> String {
    let clean = |s: &str| s.replace([' ', ',', '\r', '\n', '/'], "_");
    format!("{}/{}", clean(&cell.workload), clean(&cell.system))
}

/// The cell's interval log, or `None` without per-second histograms.
pub fn interval_log(report: &Report, cell: &Cell) -> Option<String> {
    let rounds: Vec<Vec<Histogram<u64>>> = cell
        .latency_per_second_b64
        .iter()
        .map(|round| decode_round(round))
        .collect::<Result<_, _>>()
        .ok()?;
    let slot = rounds.iter().map(Vec::len).max().filter(|s| *s > 0)?;
    let tag = tag_text(cell);
    let mut bytes = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!(
            "fairbench {} {} ({}), run {}: latency of `{}` on `{}`, nanoseconds, 1 s intervals",
            report.tool, report.suite, report.section, report.run_id, cell.workload, cell.system
        ))
        .add_comment(&format!(
            "{} measured rounds laid end to end: round N starts at (N-1) x {slot} s; within a round, seconds from the opening of its window, each operation in the second it completed in",
            rounds.len()
        ))
        .add_comment("[Histogram log format version 1.3]")
        .with_max_value_divisor(MS);
    let mut writer = builder.begin_log_with(&mut bytes, &mut serializer).ok()?;
    for (r, round) in rounds.iter().enumerate() {
        for (i, second) in round.iter().enumerate() {
            let start = INTERVAL * u32::try_from(r * slot + i).ok()?;
            writer
                .write_histogram(second, start, Duration::from_secs(1), Tag::new(&tag))
                .ok()?;
        }
    }
    drop(writer);
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    /// (value ns, percentile, total count) of each distribution line.
    fn lines(hgrm: &str) -> Vec<(u64, f64, u64)> {
        hgrm.lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let ms: f64 = f[0].parse().unwrap();
                (
                    (ms * MS).round() as u64,
                    f[1].parse().unwrap(),
                    f[2].parse().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn the_hgrm_percentiles_are_the_cells() {
        let report = crate::export::fixture::report();
        for cell in report.cells.iter().filter(|c| c.histogram_b64.is_some()) {
            let histogram = decode_histogram(cell.histogram_b64.as_ref().unwrap()).unwrap();
            let hgrm = percentile_distribution(&histogram);
            assert!(
                hgrm.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n")
            );
            let lines = lines(&hgrm);
            let p = cell.latency_ns.unwrap();
            let last = lines.last().unwrap();
            assert_eq!((last.0, last.1, last.2), (p.max, 1.0, cell.counts.ok));
            // Each of the cell's percentiles sits where the file's cumulative counts put it:
            // above every line that counts clearly fewer operations than q·N, at or below every
            // line that counts clearly more. (Lines are HdrHistogram's ticks, whose quantiles
            // are accumulated in floating point, so a tick printed 0.95 may land one sample
            // past 0.95 · N: the check reads the counts, not the printed quantile.)
            let n = cell.counts.ok as f64;
            for (q, v) in [(0.5, p.p50), (0.95, p.p95), (0.99, p.p99), (0.999, p.p999)] {
                for line in &lines {
                    let total = line.2 as f64;
                    if total < q * n - 0.5 {
                        assert!(
                            line.0 < v,
                            "{q}: line {line:?} counts fewer but is not below {v}"
                        );
                    } else if total > q * n + 0.5 {
                        assert!(
                            line.0 >= v,
                            "{q}: line {line:?} counts more but is below {v}"
                        );
                    }
                }
            }
            assert!(
                lines
                    .windows(2)
                    .all(|w| w[0].0 <= w[1].0 && w[0].2 <= w[1].2)
            );
            assert!(hgrm.contains(&format!("Total count    = {:12}]", cell.counts.ok)));
            assert!(hgrm.contains("SubBuckets     =         2048]"));
        }
    }

    #[test]
    fn the_hlog_intervals_add_up_to_the_cells_histogram() {
        let report = crate::export::fixture::report();
        let cell = &report.cells[3];
        let log = interval_log(&report, cell).unwrap();
        let mut total = 0;
        let mut starts = Vec::new();
        for entry in IntervalLogIterator::new(log.as_bytes()) {
            if let LogEntry::Interval(interval) = entry.unwrap() {
                assert_eq!(interval.tag().map(|t| t.as_str()), Some("read_16c/sqlite"));
                assert_eq!(interval.duration(), Duration::from_secs(1));
                starts.push(interval.start_timestamp().as_secs());
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(interval.encoded_histogram())
                    .unwrap();
                let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                total += h.len();
            }
        }
        let pooled = decode_histogram(cell.histogram_b64.as_ref().unwrap()).unwrap();
        assert_eq!(total, pooled.len());
        assert_eq!(total, cell.counts.ok);
        // 5 rounds of 3 seconds, end to end.
        assert_eq!(starts, (0..15).collect::<Vec<u64>>());
        assert!(log.starts_with("#fairbench sql-bench crud"));
        assert!(log.contains("#[MaxValueDivisor: 1000000.000]"));
    }

    #[test]
    fn every_measured_cell_gets_both_files_under_a_safe_name() {
        let report = crate::export::fixture::report();
        let files: Vec<String> = Hdr.export(&report).into_iter().map(|f| f.file).collect();
        assert_eq!(files.len(), 2 * 8, "the invalid cell has neither");
        assert!(
            files.contains(&"hdr/read-16c--sqlite.hgrm".to_owned()),
            "{files:?}"
        );
        assert!(files.contains(&"hdr/read-16c--sqlite.hlog".to_owned()));
    }
}
