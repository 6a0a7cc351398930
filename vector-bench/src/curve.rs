//! The comparison that decides: two indexes rarely reach the same recall at the same ef, so
//! each target's latency and QPS are interpolated along its own recall curve to a recall both
//! reach (0.90, 0.95, 0.99), and compared there.

use serde::{Deserialize, Serialize};

/// The recalls the report compares at.
pub const MATCHED_RECALLS: [f64; 3] = [0.90, 0.95, 0.99];

/// One measured ef point of one curve.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub ef: u64,
    pub recall: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    /// Median QPS over the rounds, and its round-to-round range.
    pub qps: f64,
    pub qps_min: f64,
    pub qps_max: f64,
}

/// A curve's figures at one target recall.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Matched {
    /// Interpolated linearly between the two ef points around the target recall.
    Interpolated {
        ef_below: u64,
        ef_above: u64,
        p50_ns: f64,
        p99_ns: f64,
        qps: f64,
        qps_min: f64,
        qps_max: f64,
    },
    /// The curve's lowest ef already reaches the target: its figures are a bound (the index is
    /// at least this fast there), not an interpolation.
    AlreadyAbove { ef: u64, recall: f64, point: Point },
    /// No ef of the sweep reaches the target.
    NotReached { best_recall: f64, ef: u64 },
}

impl Matched {
    /// QPS median and range, when there is a figure to compare.
    pub fn qps(&self) -> Option<(f64, f64, f64)> {
        match self {
            Matched::Interpolated {
                qps,
                qps_min,
                qps_max,
                ..
            } => Some((*qps, *qps_min, *qps_max)),
            Matched::AlreadyAbove { point, .. } => Some((point.qps, point.qps_min, point.qps_max)),
            Matched::NotReached { .. } => None,
        }
    }

    pub fn p50_ns(&self) -> Option<f64> {
        match self {
            Matched::Interpolated { p50_ns, .. } => Some(*p50_ns),
            Matched::AlreadyAbove { point, .. } => Some(point.p50_ns),
            Matched::NotReached { .. } => None,
        }
    }

    pub fn p99_ns(&self) -> Option<f64> {
        match self {
            Matched::Interpolated { p99_ns, .. } => Some(*p99_ns),
            Matched::AlreadyAbove { point, .. } => Some(point.p99_ns),
            Matched::NotReached { .. } => None,
        }
    }
}

/// The curve's figures at recall `target`. Points are taken in ef order; the first ef that
/// reaches the target and the one before it bracket the interpolation.
pub fn at_recall(points: &[Point], target: f64) -> Option<Matched> {
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.ef);
    let first = sorted.first()?;
    let Some(i) = sorted.iter().position(|p| p.recall >= target) else {
        let best = sorted
            .iter()
            .max_by(|a, b| a.recall.total_cmp(&b.recall))
            .expect("not empty");
        return Some(Matched::NotReached {
            best_recall: best.recall,
            ef: best.ef,
        });
    };
    if i == 0 {
        return Some(Matched::AlreadyAbove {
            ef: first.ef,
            recall: first.recall,
            point: *first,
        });
    }
    let (a, b) = (&sorted[i - 1], &sorted[i]);
    // a.recall < target <= b.recall, so the span is positive.
    let t = (target - a.recall) / (b.recall - a.recall);
    let lerp = |x: f64, y: f64| x + t * (y - x);
    Some(Matched::Interpolated {
        ef_below: a.ef,
        ef_above: b.ef,
        p50_ns: lerp(a.p50_ns, b.p50_ns),
        p99_ns: lerp(a.p99_ns, b.p99_ns),
        qps: lerp(a.qps, b.qps),
        qps_min: lerp(a.qps_min, b.qps_min),
        qps_max: lerp(a.qps_max, b.qps_max),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(ef: u64, recall: f64, qps: f64) -> Point {
        Point {
            ef,
            recall,
            p50_ns: 1e9 / qps,
            p99_ns: 2e9 / qps,
            qps,
            qps_min: qps * 0.9,
            qps_max: qps * 1.1,
        }
    }

    #[test]
    fn interpolates_between_the_bracketing_points() {
        let curve = [point(64, 0.96, 1_000.0), point(32, 0.88, 2_000.0)];
        let Some(Matched::Interpolated {
            ef_below,
            ef_above,
            qps,
            qps_min,
            ..
        }) = at_recall(&curve, 0.90)
        else {
            panic!("expected an interpolation");
        };
        assert_eq!((ef_below, ef_above), (32, 64));
        assert!((qps - 1_750.0).abs() < 1e-9, "{qps}");
        assert!((qps_min - 1_575.0).abs() < 1e-9, "{qps_min}");
    }

    #[test]
    fn a_curve_already_above_is_a_bound_and_one_below_is_not_reached() {
        let curve = [point(32, 0.97, 2_000.0), point(64, 0.99, 1_500.0)];
        assert!(matches!(
            at_recall(&curve, 0.90),
            Some(Matched::AlreadyAbove { ef: 32, .. })
        ));
        assert_eq!(at_recall(&curve, 0.99).unwrap().qps().unwrap().0, 1_500.0);
        let low = [point(32, 0.5, 1.0), point(64, 0.7, 1.0)];
        assert_eq!(
            at_recall(&low, 0.9),
            Some(Matched::NotReached {
                best_recall: 0.7,
                ef: 64
            })
        );
        assert!(at_recall(&[], 0.9).is_none());
        assert!(at_recall(&low, 0.9).unwrap().qps().is_none());
    }
}
