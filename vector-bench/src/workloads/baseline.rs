//! The exact filtered baseline: each query family at each k answered by an exact scan of only
//! the rows its filter admits (recall 1.0 by construction), measured like any point (latency
//! pass and QPS window per round, warm-ups discarded), so every engine's filtered QPS can be
//! read against what brute force over the matching vectors achieves.

use common::run::Recording;
use common::scale::Worker;
use common::servercpu::ServerProcess;

use super::point::PointKey;
use super::sweep::{Lane, Point, Sweep, measure_points};
use crate::session::Searchers;
use crate::targets::Mode;

/// Measures the exact scan of every query family at every k of `sweep` on `searchers`.
pub async fn measure(
    sweep: &Sweep<'_>,
    name: &str,
    searchers: Box<dyn Searchers>,
    run: &mut Recording,
    worker: &mut Worker,
) -> anyhow::Result<()> {
    let mut points = Vec::new();
    for k in sweep.ks {
        for filter in sweep.truths.filters() {
            let truth = sweep.truths.at(filter, *k);
            points.push(Point::new(PointKey::exact(filter, *k), truth, sweep));
        }
    }
    let mode = Mode::default();
    let mut searchers = Some(searchers);
    let mut lanes = [Lane {
        name,
        mode: &mode,
        server: ServerProcess::InProcess,
        searchers: &mut searchers,
    }];
    measure_points(sweep, &points, &mut lanes, run, worker).await
}
