//! Verdicts that hold (DESIGN rule 11): a system against the reference from an exact,
//! distribution-free confidence interval of the ratio of their per-round figures — faster or
//! slower only when the whole interval lies beyond the practical threshold, parity when it lies
//! inside it, inconclusive otherwise — and no ratio at all between cells that differ in
//! durability, index set or mode, or that have too few rounds.
//!
//! The interval is the Hodges–Lehmann interval of the shift between the logarithms of the two
//! samples (the Mann–Whitney inversion): the `k`-th smallest and largest of the `m·n` pairwise
//! log ratios, `k` from the exact null distribution of the Mann–Whitney statistic. It assumes
//! only that rounds are independent and that the two systems' round figures differ by a factor;
//! it needs no seed and gives the same answer every time. With few rounds the achievable
//! confidence is below the target (3 rounds a side: 90%), and the interval says so.

use serde::{Deserialize, Serialize};

use crate::results::{Cell, Metric, NoVerdict, Report, Verdict, VerdictKind, median};

/// The fewest measured rounds a side needs for a verdict.
pub const MIN_ROUNDS: usize = 3;

/// The confidence the interval aims for; the exact method reaches at least this when the
/// rounds allow it.
pub const CONFIDENCE: f64 = 0.95;

/// Labels that change what a figure means: cells that differ in any of them are never put into
/// one ratio (DESIGN rules 11 and 12). A label is its kind, one of these, and may say what it
/// means after it in parentheses (`unmatched durability (synchronous_commit=off (needs on))`):
/// a label compares only with the same label, meaning included.
pub const INCOMPARABLE_LABELS: &[&str] =
    &[UNMATCHED_DURABILITY, "durable", "not durable", "volatile"];

/// The kind of label a system measured although its durability does not match gets.
pub const UNMATCHED_DURABILITY: &str = "unmatched durability";

/// The label of a system measured with durability that does not match, naming each setting
/// and its value: two such systems are comparable only when they are unmatched the same way.
pub fn unmatched_durability(mismatches: &[String]) -> String {
    if mismatches.is_empty() {
        return UNMATCHED_DURABILITY.to_owned();
    }
    format!("{UNMATCHED_DURABILITY} ({})", mismatches.join("; "))
}

/// A label's kind: its text before what it says it means (` (…)`).
pub fn label_kind(label: &str) -> &str {
    label.split_once(" (").map_or(label, |(kind, _)| kind)
}

/// A confidence interval of a ratio.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// The coverage the exact method achieves with these round counts.
    pub confidence: f64,
}

/// Whether a bigger figure is better (throughput) or worse (latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
}

/// Every pair of (system, reference) of a report, judged or said why not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judgement {
    pub verdicts: Vec<Verdict>,
    pub no_verdicts: Vec<NoVerdict>,
}

/// How many arrangements of `m` + `n` ranks give each value of the Mann–Whitney statistic `U`
/// (the number of pairs in which the first sample's value is the larger), `U` from 0 to `m·n`.
fn mann_whitney_counts(m: usize, n: usize) -> Vec<f64> {
    // counts[j][u] for the first sample of size i (rolling over i) and a second of size j.
    let mut previous: Vec<Vec<f64>> = (0..=n)
        .map(|_| {
            let mut row = vec![0.0; m * n + 1];
            row[0] = 1.0;
            row
        })
        .collect();
    for i in 1..=m {
        let mut current: Vec<Vec<f64>> = vec![vec![0.0; m * n + 1]; n + 1];
        current[0][0] = 1.0;
        for j in 1..=n {
            for u in 0..=i * j {
                // The largest of all i + j values is either in the first sample (it beats all
                // j of the second) or in the second (it beats none of the first).
                let from_first = if u >= j { previous[j][u - j] } else { 0.0 };
                current[j][u] = from_first + current[j - 1][u];
            }
        }
        previous = current;
    }
    previous.swap_remove(n)
}

/// The exact interval of `candidate / reference` (per-round figures, all positive): the
/// Hodges–Lehmann interval of the log shift, at [`CONFIDENCE`] when the round counts allow it,
/// else at the widest interval's own coverage. `None` with fewer than 2 values a side or a
/// figure that is not positive.
pub fn ratio_interval(candidate: &[f64], reference: &[f64]) -> Option<Interval> {
    let (m, n) = (candidate.len(), reference.len());
    let positive = |v: &[f64]| v.iter().all(|x| x.is_finite() && *x > 0.0);
    if m < 2 || n < 2 || !positive(candidate) || !positive(reference) {
        return None;
    }
    let mut differences: Vec<f64> = candidate
        .iter()
        .flat_map(|c| reference.iter().map(move |r| c.ln() - r.ln()))
        .collect();
    differences.sort_by(f64::total_cmp);
    let counts = mann_whitney_counts(m, n);
    let total: f64 = counts.iter().sum();
    // coverage(k) = 1 − 2·P(U ≤ k − 1); the widest interval is k = 1.
    let mut k = 1;
    let mut below = counts[0] / total;
    let mut coverage = 1.0 - 2.0 * below;
    while k < differences.len() / 2 {
        let next_below = below + counts[k] / total;
        let next_coverage = 1.0 - 2.0 * next_below;
        if next_coverage < CONFIDENCE {
            break;
        }
        k += 1;
        below = next_below;
        coverage = next_coverage;
    }
    Some(Interval {
        low: differences[k - 1].exp(),
        high: differences[differences.len() - k].exp(),
        confidence: coverage,
    })
}

/// The verdict an interval of `candidate / reference` gives at a practical `threshold`
/// (0.05: within 5% either way is parity).
pub fn judge(interval: Interval, threshold: f64, direction: Direction) -> VerdictKind {
    let (up, down) = (1.0 + threshold, 1.0 / (1.0 + threshold));
    let better_if_above = direction == Direction::HigherIsBetter;
    if interval.low > up {
        if better_if_above {
            VerdictKind::Faster
        } else {
            VerdictKind::Slower
        }
    } else if interval.high < down {
        if better_if_above {
            VerdictKind::Slower
        } else {
            VerdictKind::Faster
        }
    } else if interval.low >= down && interval.high <= up {
        VerdictKind::Parity
    } else {
        VerdictKind::Inconclusive
    }
}

/// The labels of `cell` that change what its figures mean.
fn meaning_labels(cell: &Cell) -> Vec<&str> {
    let mut labels: Vec<&str> = cell
        .labels
        .iter()
        .map(String::as_str)
        .filter(|l| INCOMPARABLE_LABELS.contains(&label_kind(l)))
        .collect();
    labels.sort_unstable();
    labels
}

/// Why `cell` and `base` cannot be put into one ratio, if they cannot.
pub fn incomparable(cell: &Cell, base: &Cell) -> Option<String> {
    let (mine, theirs) = (meaning_labels(cell), meaning_labels(base));
    if mine == theirs {
        return None;
    }
    let differing: Vec<&str> = mine
        .iter()
        .filter(|l| !theirs.contains(l))
        .chain(theirs.iter().filter(|l| !mine.contains(l)))
        .copied()
        .collect();
    Some(format!("not comparable: {}", differing.join(" vs ")))
}

/// The replicates of `metric` in an `ok` cell: each fork's figure when the cell was measured in
/// two or more forks (the process, not the round, is the unit of replication), else each
/// measured round's.
pub fn round_figures(cell: &Cell, metric: Metric) -> Option<Vec<f64>> {
    let throughput = cell.usable_throughput()?;
    if cell.forks.len() >= 2 {
        let figures: Option<Vec<f64>> = cell
            .forks
            .iter()
            .map(|f| match metric {
                Metric::Throughput => f.throughput,
                Metric::LatencyP50 => f.latency_p50_ns.map(|v| v as f64),
                Metric::LatencyP99 => f.latency_p99_ns.map(|v| v as f64),
            })
            .collect();
        return figures;
    }
    match metric {
        Metric::Throughput => Some(throughput.rounds.clone()),
        Metric::LatencyP50 | Metric::LatencyP99 => {
            let figures: Vec<f64> = cell
                .latency_rounds_ns
                .iter()
                .map(|p| match metric {
                    Metric::LatencyP50 => p.p50 as f64,
                    _ => p.p99 as f64,
                })
                .collect();
            (!figures.is_empty()).then_some(figures)
        }
    }
}

/// The ratio of medians of `candidate` over `reference` (per-round figures), its interval, and
/// the verdict at `threshold`; or why there is none (too few rounds, a figure of zero).
pub fn judge_rounds(
    candidate: &[f64],
    reference: &[f64],
    threshold: f64,
    direction: Direction,
) -> Result<(f64, Interval, VerdictKind), String> {
    let fewest = candidate.len().min(reference.len());
    if fewest < MIN_ROUNDS {
        return Err(format!(
            "{fewest} measured round{} (a verdict needs {MIN_ROUNDS} a side)",
            if fewest == 1 { "" } else { "s" }
        ));
    }
    let (Some(a), Some(b)) = (median(candidate), median(reference)) else {
        return Err("no rounds".into());
    };
    let Some(interval) = ratio_interval(candidate, reference).filter(|_| b > 0.0) else {
        return Err("a figure of zero".into());
    };
    Ok((a / b, interval, judge(interval, threshold, direction)))
}

/// One pair's verdict on one metric, or why there is none.
pub fn compare(
    cell: &Cell,
    base: &Cell,
    metric: Metric,
    threshold: f64,
) -> Result<Verdict, NoVerdict> {
    let no = |reason: String| NoVerdict {
        workload: cell.workload.clone(),
        system: cell.system.clone(),
        reference: base.system.clone(),
        metric,
        reason,
    };
    if let Some(reason) = incomparable(cell, base) {
        return Err(no(reason));
    }
    let (Some(mine), Some(theirs)) = (round_figures(cell, metric), round_figures(base, metric))
    else {
        return Err(no(format!("no {} figure on both sides", metric.as_str())));
    };
    let direction = match metric {
        Metric::Throughput => Direction::HigherIsBetter,
        Metric::LatencyP50 | Metric::LatencyP99 => Direction::LowerIsBetter,
    };
    let (ratio, interval, verdict) =
        judge_rounds(&mine, &theirs, threshold, direction).map_err(no)?;
    Ok(Verdict {
        workload: cell.workload.clone(),
        system: cell.system.clone(),
        reference: base.system.clone(),
        metric,
        ratio,
        interval: [interval.low, interval.high],
        confidence: interval.confidence,
        verdict,
    })
}

/// Every `ok` cell against the reference system's cell of the same workload, on throughput and
/// on p50 and p99 latency where per-round latencies were recorded.
pub fn judge_report(report: &Report, threshold: f64) -> Judgement {
    let mut judgement = Judgement::default();
    let Some(reference) = report.reference.as_deref() else {
        return judgement;
    };
    for base in report.cells.iter().filter(|c| c.system == reference) {
        for cell in report
            .cells
            .iter()
            .filter(|c| c.workload == base.workload && c.system != reference)
        {
            for metric in Metric::ALL {
                if metric != Metric::Throughput
                    && (cell.latency_rounds_ns.is_empty() || base.latency_rounds_ns.is_empty())
                {
                    continue;
                }
                match compare(cell, base, metric, threshold) {
                    Ok(verdict) => judgement.verdicts.push(verdict),
                    Err(none) => judgement.no_verdicts.push(none),
                }
            }
        }
    }
    judgement
}

/// The threshold a report was judged at: its `--threshold`, else the default 5%.
pub fn threshold_of(report: &Report) -> f64 {
    report
        .options
        .get("threshold")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(crate::options::DEFAULT_THRESHOLD)
}

/// How a table's title names the interval its cells print: the target confidence, and that a
/// cell whose rounds cannot reach it says the confidence they give (`(90%)` with 3 rounds a side).
pub fn interval_heading() -> String {
    format!(
        "{:.0}% interval, or the confidence in parentheses that fewer rounds give",
        CONFIDENCE * 100.0
    )
}

/// `1.07× [0.98–1.16] inconclusive`, the way every table prints a verdict.
pub fn describe(verdict: &Verdict) -> String {
    let confidence = if verdict.confidence + 1e-9 < CONFIDENCE {
        format!(" ({:.0}%)", verdict.confidence * 100.0)
    } else {
        String::new()
    };
    format!(
        "{:.2}× [{:.2}–{:.2}]{confidence} {}",
        verdict.ratio,
        verdict.interval[0],
        verdict.interval[1],
        verdict.verdict.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Status, Throughput};

    fn cell(system: &str, rounds: &[f64]) -> Cell {
        let mut cell = Cell::new("w", system, "ops/s", 1, rounds.len() as u32);
        cell.throughput = Throughput::from_rounds(rounds.to_vec());
        cell
    }

    #[test]
    fn the_null_distribution_is_exact() {
        // m = n = 2: U ∈ {0,1,2,3,4} with counts 1,1,2,1,1 (6 = C(4,2) arrangements).
        assert_eq!(mann_whitney_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        let c = mann_whitney_counts(5, 5);
        assert_eq!(c.iter().sum::<f64>(), 252.0);
        assert_eq!(&c[..4], &[1.0, 1.0, 2.0, 3.0]);
        assert_eq!(mann_whitney_counts(3, 4).iter().sum::<f64>(), 35.0);
    }

    #[test]
    fn the_interval_takes_the_published_ranks() {
        // 5 against 5: the 3rd smallest and largest of 25 ratios, 96.8% (tables: k = 3).
        let a = [10.0, 11.0, 12.0, 13.0, 14.0];
        let b = [10.0, 10.0, 10.0, 10.0, 10.0];
        let i = ratio_interval(&a, &b).unwrap();
        assert!((i.confidence - (1.0 - 8.0 / 252.0)).abs() < 1e-12, "{i:?}");
        assert!(
            (i.low - 1.0).abs() < 1e-12 && (i.high - 1.4).abs() < 1e-12,
            "{i:?}"
        );
        // 3 against 3 cannot reach 95%: the widest interval, at 1 − 2/20 = 90%.
        let i = ratio_interval(&[2.0, 3.0, 4.0], &[1.0, 1.0, 1.0]).unwrap();
        assert!((i.confidence - 0.9).abs() < 1e-12);
        assert!((i.low - 2.0).abs() < 1e-12 && (i.high - 4.0).abs() < 1e-12);
        assert!(ratio_interval(&[1.0], &[1.0, 2.0]).is_none());
        assert!(ratio_interval(&[1.0, 0.0], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn synthetic_rounds_give_the_known_verdicts() {
        let base = cell("ref", &[1000.0, 1010.0, 990.0, 1005.0, 995.0]);
        let verdict = |rounds: &[f64]| {
            compare(&cell("x", rounds), &base, Metric::Throughput, 0.05)
                .unwrap()
                .verdict
        };
        assert_eq!(
            verdict(&[1002.0, 998.0, 1008.0, 992.0, 1000.0]),
            VerdictKind::Parity
        );
        assert_eq!(
            verdict(&[1300.0, 1310.0, 1290.0, 1305.0, 1295.0]),
            VerdictKind::Faster
        );
        assert_eq!(
            verdict(&[700.0, 710.0, 690.0, 705.0, 695.0]),
            VerdictKind::Slower
        );
        // A 7% median gain with rounds spread from −10% to +25%: more rounds would decide.
        assert_eq!(
            verdict(&[900.0, 1070.0, 1250.0, 1000.0, 1150.0]),
            VerdictKind::Inconclusive
        );
    }

    #[test]
    fn latency_judges_the_other_way() {
        let i = Interval {
            low: 0.5,
            high: 0.6,
            confidence: 0.95,
        };
        assert_eq!(
            judge(i, 0.05, Direction::LowerIsBetter),
            VerdictKind::Faster
        );
        assert_eq!(
            judge(i, 0.05, Direction::HigherIsBetter),
            VerdictKind::Slower
        );
    }

    #[test]
    fn too_few_rounds_and_unmatched_labels_give_no_ratio() {
        let base = cell("ref", &[1000.0, 1010.0]);
        let two = compare(&cell("x", &[1.0, 2.0]), &base, Metric::Throughput, 0.05).unwrap_err();
        assert_eq!(two.reason, "2 measured rounds (a verdict needs 3 a side)");
        let base = cell("ref", &[1000.0, 1010.0, 990.0]);
        let mut unmatched = cell("x", &[2000.0, 2010.0, 1990.0]);
        unmatched
            .labels
            .push(unmatched_durability(&["fsync=off".into()]));
        let none = compare(&unmatched, &base, Metric::Throughput, 0.05).unwrap_err();
        assert_eq!(
            none.reason,
            "not comparable: unmatched durability (fsync=off)"
        );
        // Unmatched in different ways is not the same meaning; the same way is.
        let mut other = cell("y", &[1000.0, 1010.0, 990.0]);
        other
            .labels
            .push(unmatched_durability(&["synchronous_commit=off".into()]));
        let none = compare(&unmatched, &other, Metric::Throughput, 0.05).unwrap_err();
        assert_eq!(
            none.reason,
            "not comparable: unmatched durability (fsync=off) vs unmatched durability (synchronous_commit=off)"
        );
        other.labels = unmatched.labels.clone();
        let judged = compare(&unmatched, &other, Metric::Throughput, 0.05).unwrap();
        assert_eq!(judged.verdict, VerdictKind::Faster);
        let mut volatile = cell("redis", &[5.0, 6.0, 7.0]);
        volatile.labels.push("not durable".into());
        let mut durable = base.clone();
        durable.labels.push("durable".into());
        let none = compare(&volatile, &durable, Metric::Throughput, 0.05).unwrap_err();
        assert_eq!(none.reason, "not comparable: not durable vs durable");
        let mut failed = cell("x", &[1.0, 2.0, 3.0]);
        failed.status = Status::Error;
        assert!(compare(&failed, &base, Metric::Throughput, 0.05).is_err());
    }

    #[test]
    fn a_verdict_prints_its_interval() {
        let v = Verdict {
            workload: "w".into(),
            system: "x".into(),
            reference: "r".into(),
            metric: Metric::Throughput,
            ratio: 1.07,
            interval: [0.98, 1.16],
            confidence: 0.968,
            verdict: VerdictKind::Inconclusive,
        };
        assert_eq!(describe(&v), "1.07× [0.98–1.16] inconclusive");
        let few = Verdict {
            confidence: 0.9,
            ..v
        };
        assert_eq!(describe(&few), "1.07× [0.98–1.16] (90%) inconclusive");
    }
}
