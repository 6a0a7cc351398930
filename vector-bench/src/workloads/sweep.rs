//! The sweep of one index variant: every (filter, ef) point measured on every system whose
//! index is open, warm-ups discarded and measured rounds interleaved in alternating order
//! (common's schedule), each round a latency pass and a QPS window, each point's cell written
//! the moment a window ends. It sees a system only as a name and its [`Searchers`].

use std::sync::Arc;

use common::human::{format_latency_ns, format_rate};
use common::options::CommonOpts;
use common::protocol::{Step, schedule};
use common::results::Status;
use common::run::Recording;
use common::window::{WindowOutcome, WindowPlan};

use super::Family;
use super::groundtruth::TruthInfo;
use super::point::{PointBuilder, round_label};
use crate::dataset::Dataset;
use crate::index::Variant;
use crate::session::{Searchers, Work};

/// One system as the sweep sees it: its name and, while its index is open, its sessions.
pub struct Lane<'a> {
    pub name: &'a str,
    pub searchers: &'a mut Option<Box<dyn Searchers>>,
}

/// What every point of a run shares.
pub struct Sweep<'a> {
    pub common: &'a CommonOpts,
    pub data: &'a Arc<Dataset>,
    /// The query families, each with its ground truth, in measuring order.
    pub truths: &'a [TruthInfo],
    pub efs: &'a [u64],
    pub k: usize,
    pub window: &'a WindowPlan,
}

/// One point of a variant's sweep.
struct Point<'a> {
    family: Family,
    truth: &'a TruthInfo,
    work: Arc<Work>,
}

impl Sweep<'_> {
    /// The points of `variant`: each query family, each at every ef.
    fn points(&self, variant: Variant) -> Vec<Point<'_>> {
        let mut points = Vec::new();
        for truth in self.truths {
            let family = Family {
                variant,
                filter: truth.filter,
            };
            for ef in self.efs {
                let work = Arc::new(Work {
                    data: self.data.clone(),
                    k: self.k,
                    ef: *ef as usize,
                    category: family.filter.category(),
                });
                points.push(Point {
                    family,
                    truth,
                    work,
                });
            }
        }
        points
    }

    /// Measures every point of `variant` on every lane with open sessions. Returns early,
    /// with what was measured recorded, when the run is interrupted.
    pub async fn measure(
        &self,
        variant: Variant,
        lanes: &mut [Lane<'_>],
        run: &mut Recording,
    ) -> anyhow::Result<()> {
        let common = self.common;
        let points = self.points(variant);
        let mut builders: Vec<Option<PointBuilder>> = Vec::new();
        let mut current = None;
        for step in schedule(points.len(), lanes.len(), common.warmup, common.rounds) {
            if run.interrupted() {
                break;
            }
            let point = &points[step.workload];
            if current != Some(step.workload) {
                current = Some(step.workload);
                builders = self.prepare(point, lanes, run).await;
            }
            let lane = &mut lanes[step.system];
            let (Some(builder), Some(searchers)) = (
                builders[step.system].as_mut(),
                lane.searchers.as_deref_mut(),
            ) else {
                continue;
            };
            if !builder.is_live() {
                continue;
            }
            self.one_round(step, point, lane.name, searchers, builder, run)
                .await;
            run.record(builder.to_cell())?;
        }
        Ok(())
    }

    /// Makes every open system ready for `point` (its ef set and read back) and starts its
    /// cell.
    async fn prepare(
        &self,
        point: &Point<'_>,
        lanes: &mut [Lane<'_>],
        run: &mut Recording,
    ) -> Vec<Option<PointBuilder>> {
        let common = self.common;
        let ef = point.work.ef as u64;
        let mut builders = Vec::with_capacity(lanes.len());
        for lane in lanes.iter_mut() {
            let Some(searchers) = lane.searchers.as_deref_mut() else {
                builders.push(None);
                continue;
            };
            let mut builder = PointBuilder::new(
                point.family,
                ef,
                lane.name,
                self.k,
                common.connections,
                common.rounds,
                common.ceiling,
            );
            match searchers.prepare(&point.work).await {
                Ok(reported) => builder.ef_reported(reported),
                Err(e) => builder.mark(Status::Error, format!("setting ef {ef} failed: {e}")),
            }
            run.report.upsert_cell(builder.to_cell());
            builders.push(Some(builder));
        }
        builders
    }

    /// One round of one system at one point: the latency pass (answers scored), then the QPS
    /// window.
    async fn one_round(
        &self,
        step: Step,
        point: &Point<'_>,
        system: &str,
        searchers: &mut dyn Searchers,
        builder: &mut PointBuilder,
        run: &Recording,
    ) {
        let common = self.common;
        let (round, work) = (step.round, &point.work);
        let label = format!(
            "{} · {system} · {}",
            point.family.workload(work.ef as u64),
            round.label(common.warmup, common.rounds)
        );
        match searchers.pass(work).await {
            Ok(pass) => builder.add_pass(round, &pass, &work.data, &point.truth.truth),
            Err(e) => builder.mark(Status::Error, format!("{}: {e}", round_label(round))),
        }
        run.progress().window(label.clone(), common.duration);
        match searchers
            .window(common.connections as usize, work, self.window)
            .await
        {
            Ok(outcome) => {
                builder.add_window(round, &outcome);
                run.progress().line(window_line(&label, &outcome, builder));
            }
            Err(e) => {
                builder.mark(Status::Error, format!("{}: {e}", round_label(round)));
                run.progress().line(format!("{label}: {e}"));
            }
        }
    }
}

/// The line kept after a window: its QPS, and the point's recall and p50 so far.
fn window_line(label: &str, outcome: &WindowOutcome, builder: &PointBuilder) -> String {
    let cell = builder.to_cell();
    let recall = cell
        .extra
        .get("recall")
        .and_then(serde_json::Value::as_f64)
        .map_or(String::new(), |r| format!(" · recall {r:.4}"));
    let p50 = cell.latency_ns.map_or(String::new(), |l| {
        format!(" · p50 {}", format_latency_ns(l.p50))
    });
    format!(
        "{label}: {} q/s{recall}{p50}",
        format_rate(outcome.throughput())
    )
}
