//! The sweep of one index variant: every (ef, k, filter) point measured on every lane whose
//! index is open and whose mode applies, warm-ups discarded and measured rounds interleaved in
//! alternating order (common's schedule), each round a latency pass and a QPS window, each
//! point's cell written the moment a window ends. Points go ef by ef, so an engine that can
//! only set ef when it loads an index rebuilds it once per ef. Afterwards, a curve whose
//! answers did not change at all across its ef points, below full recall, is invalid: the
//! search breadth never reached the index. It sees a system only as a name, a mode and its
//! [`Searchers`]. As one of several workers, each round opens at the barrier: worker 0 alone
//! runs the latency pass (concurrency 1, answers scored), then every worker its share of the
//! QPS window's connections.

use std::collections::BTreeMap;
use std::sync::Arc;

use common::human::{format_latency_ns, format_rate};
use common::options::CommonOpts;
use common::protocol::{Step, schedule};
use common::results::{Report, Status};
use common::run::Recording;
use common::scale::{Segment, Worker};
use common::servercpu::ServerProcess;
use common::window::{WindowOutcome, WindowPlan};
use serde_json::Value;

use super::Family;
use super::groundtruth::Truths;
use super::point::{PointBuilder, PointKey, round_label};
use crate::dataset::Dataset;
use crate::index::Variant;
use crate::session::{NotReady, Searchers, Work};
use crate::targets::Mode;
use crate::truth::Truth;

/// A recall at or above this leaves an index nothing to gain from a wider search.
const FULL_RECALL: f64 = 0.999;

/// One lane as the sweep sees it: its name, its mode and, while its index is open, its
/// sessions.
pub struct Lane<'a> {
    pub name: &'a str,
    pub mode: &'a Mode,
    /// Where its server runs, so its CPU is read around each window.
    pub server: ServerProcess,
    pub searchers: &'a mut Option<Box<dyn Searchers>>,
}

/// What every point of a run shares.
pub struct Sweep<'a> {
    pub common: &'a CommonOpts,
    pub data: &'a Arc<Dataset>,
    /// The query families' ground truth at every k.
    pub truths: &'a Truths,
    pub efs: &'a [u64],
    pub ks: &'a [usize],
    pub window: &'a WindowPlan,
    /// This worker's share of the run (the whole of it alone).
    pub segment: Segment,
}

impl Sweep<'_> {
    /// This worker's share of --connections.
    pub fn connections(&self) -> u32 {
        self.segment.share(self.common.connections.into()) as u32
    }

    /// Where this worker's sessions sit among every worker's ([`Work::sessions`]).
    pub fn sessions(&self) -> (usize, usize) {
        let all = u64::from(self.common.connections);
        (self.segment.start(all) as usize, all as usize)
    }
}

/// One point: what it measures, its truth and its work.
pub struct Point {
    pub key: PointKey,
    pub truth: Arc<Truth>,
    pub work: Arc<Work>,
}

impl Point {
    pub fn new(key: PointKey, truth: Arc<Truth>, sweep: &Sweep<'_>) -> Point {
        let work = Arc::new(Work {
            data: sweep.data.clone(),
            k: key.k,
            ef: key.ef.map_or(key.k, |ef| ef as usize),
            category: key.filter.category(),
            sessions: sweep.sessions(),
        });
        Point { key, truth, work }
    }
}

impl Sweep<'_> {
    /// The points of `variant`, ef by ef; at each ef every k it can serve, each query family.
    fn points(&self, variant: Variant) -> Vec<Point> {
        let mut points = Vec::new();
        for ef in self.efs {
            for k in self.ks.iter().filter(|k| **k as u64 <= *ef) {
                for filter in self.truths.filters() {
                    let family = Family {
                        variant,
                        filter,
                        k: *k,
                    };
                    let truth = self.truths.at(filter, *k);
                    points.push(Point::new(PointKey::of(family, *ef), truth, self));
                }
            }
        }
        points
    }

    /// The cells the run will measure, for its overall progress line: the exact scan's (one per
    /// k and query family), then per variant each point on every lane whose mode applies.
    pub fn planned_cells(&self, variants: &[Variant], modes: &[&Mode]) -> usize {
        let baseline = self.ks.len() * self.truths.filters().len();
        let swept: usize = variants
            .iter()
            .flat_map(|v| self.points(*v))
            .map(|p| {
                modes
                    .iter()
                    .filter(|m| m.applies(p.key.variant, p.key.filter))
                    .count()
            })
            .sum();
        baseline + swept
    }

    /// Measures every point of `variant` on every lane with open sessions, then checks that
    /// each curve's ef took effect. Returns early, with what was measured recorded, when the
    /// run is interrupted.
    pub async fn measure(
        &self,
        variant: Variant,
        lanes: &mut [Lane<'_>],
        run: &mut Recording,
        worker: &mut Worker,
    ) -> anyhow::Result<()> {
        let points = self.points(variant);
        measure_points(self, &points, lanes, run, worker).await?;
        if variant == Variant::F32 {
            check_ef_took_effect(&mut run.report, variant);
        }
        run.save()?;
        Ok(())
    }
}

/// Measures `points` on `lanes` in interleaved rounds (on several workers, every worker meets
/// at every round, measured or not, so the barrier's rounds agree).
pub async fn measure_points(
    sweep: &Sweep<'_>,
    points: &[Point],
    lanes: &mut [Lane<'_>],
    run: &mut Recording,
    worker: &mut Worker,
) -> anyhow::Result<()> {
    let common = sweep.common;
    let mut builders: Vec<Option<PointBuilder>> = Vec::new();
    let mut current = None;
    for step in schedule(points.len(), lanes.len(), common.warmup, common.rounds) {
        if run.interrupted() {
            break;
        }
        let point = &points[step.workload];
        if current != Some(step.workload) {
            current = Some(step.workload);
            builders = prepare(sweep, point, lanes, run).await;
        }
        let lane = &mut lanes[step.system];
        let (Some(builder), Some(searchers)) = (
            builders[step.system].as_mut().filter(|b| b.is_live()),
            lane.searchers.as_deref_mut(),
        ) else {
            worker.sync(0).await?;
            continue;
        };
        let round = Round {
            step,
            point,
            system: lane.name,
        };
        one_round(sweep, round, searchers, builder, run, worker).await?;
        run.report.worker = worker.info();
        run.record(builder.to_cell())?;
    }
    Ok(())
}

/// Makes every open lane whose mode applies ready for `point` (its ef set and read back) and
/// starts its cell.
async fn prepare(
    sweep: &Sweep<'_>,
    point: &Point,
    lanes: &mut [Lane<'_>],
    run: &mut Recording,
) -> Vec<Option<PointBuilder>> {
    let common = sweep.common;
    let mut builders = Vec::with_capacity(lanes.len());
    for lane in lanes.iter_mut() {
        let Some(searchers) = lane.searchers.as_deref_mut() else {
            builders.push(None);
            continue;
        };
        if !lane.mode.applies(point.key.variant, point.key.filter) {
            builders.push(None);
            continue;
        }
        let mut builder = PointBuilder::new(
            point.key.clone(),
            lane.name,
            sweep.connections(),
            common.rounds,
            common.ceiling,
        );
        builder.server(&lane.server);
        match searchers.prepare(&point.work).await {
            Ok(reported) => builder.ef_reported(reported),
            Err(NotReady::Failed(e)) => builder.mark(
                Status::Error,
                format!("preparing {} failed: {e}", point.key.workload),
            ),
            Err(NotReady::PastBound(e)) => {
                builder.mark(Status::Timeout, format!("preparing: {e}"));
            }
        }
        for note in searchers.take_notes() {
            run.progress().line(format!("{}: {note}", lane.name));
            run.report.notes.push(format!("{}: {note}", lane.name));
        }
        run.report.upsert_cell(builder.to_cell());
        builders.push(Some(builder));
    }
    builders
}

/// Which round of which point on which lane.
struct Round<'a> {
    step: Step,
    point: &'a Point,
    system: &'a str,
}

/// One round of one lane at one point: the latency pass (answers scored; worker 0's alone on
/// several workers, so it stays at concurrency 1), the barrier, then the QPS window. Only a
/// barrier failure is an error here.
async fn one_round(
    sweep: &Sweep<'_>,
    at: Round<'_>,
    searchers: &mut dyn Searchers,
    builder: &mut PointBuilder,
    run: &Recording,
    worker: &mut Worker,
) -> Result<(), common::scale::BarrierError> {
    let common = sweep.common;
    let (round, work) = (at.step.round, &at.point.work);
    let label = format!(
        "{} · {} · {}",
        at.point.key.workload,
        at.system,
        round.label(common.warmup, common.rounds)
    );
    if worker.prepares() {
        match searchers.pass(work, common.ceiling).await {
            Ok(pass) => builder.add_pass(round, &pass, &work.data, &at.point.truth),
            Err(e) => builder.mark(Status::Error, format!("{}: {e}", round_label(round))),
        }
    }
    worker.sync(0).await?;
    if !builder.is_live() && builder.status() == Status::Timeout {
        // The pass ended at the ceiling: the cell is over, and the window would only wait on
        // the same search again.
        run.progress()
            .line(format!("{label}: {}", builder.reason()));
        return Ok(());
    }
    run.progress().window(label.clone(), common.duration);
    let connections = sweep.connections() as usize;
    let server_before = builder.server_cpu_now();
    let window = searchers.window(connections, work, sweep.window).await;
    let server_cpu = builder.server_cpu_since(server_before);
    match window {
        Ok(outcome) => {
            builder.add_window(round, &outcome, server_cpu);
            run.progress().line(window_line(&label, &outcome, builder));
        }
        Err(e) => {
            builder.mark(Status::Error, format!("{}: {e}", round_label(round)));
            run.progress().line(format!("{label}: {e}"));
        }
    }
    Ok(())
}

/// Marks invalid every curve of `variant` on a system whose answers were identical at every
/// ef point in every query family at one k, while some stayed below full recall: a wider
/// search that changes nothing anywhere did not run (the engine stored the new ef but searched
/// with the old one). Evidence: the digest of every answer, equal at each ef, and the recall,
/// equal too. Another family whose answers move shows the ef did reach the index (a filtered
/// search may legitimately not depend on it). Only for full-precision indexes: a quantized
/// index searched exhaustively gives the same answers at every ef and still misses some true
/// neighbours, by quantization.
pub fn check_ef_took_effect(report: &mut Report, variant: Variant) {
    // (system, k) → family → cell indexes.
    type Families = BTreeMap<String, Vec<usize>>;
    let mut groups: BTreeMap<(String, u64), Families> = BTreeMap::new();
    for (i, cell) in report.cells.iter().enumerate() {
        let extra = &cell.extra;
        if cell.status != Status::Ok
            || extra.get("variant").and_then(Value::as_str) != Some(variant.as_str())
            || extra.get("ef").and_then(Value::as_u64).is_none()
        {
            continue;
        }
        let family = extra.get("family").and_then(Value::as_str).unwrap_or("");
        let k = extra.get("k").and_then(Value::as_u64).unwrap_or(0);
        groups
            .entry((cell.system.clone(), k))
            .or_default()
            .entry(family.to_owned())
            .or_default()
            .push(i);
    }
    let field = |report: &Report, i: usize, key: &str| report.cells[i].extra.get(key).cloned();
    for families in groups.values() {
        let flat = |cells: &Vec<usize>| {
            let first = field(report, cells[0], "answers_digest");
            cells.len() >= 2
                && first.is_some()
                && cells
                    .iter()
                    .all(|i| field(report, *i, "answers_digest") == first)
        };
        let lowest = families
            .values()
            .filter_map(|c| field(report, c[0], "recall").and_then(|r| r.as_f64()))
            .fold(f64::INFINITY, f64::min);
        if !families.values().all(flat) || lowest >= FULL_RECALL {
            continue;
        }
        let cells: Vec<usize> = families.values().flatten().copied().collect();
        let mut efs: Vec<u64> = cells
            .iter()
            .filter_map(|i| field(report, *i, "ef").and_then(|e| e.as_u64()))
            .collect();
        efs.sort_unstable();
        efs.dedup();
        let efs: Vec<String> = efs.iter().map(u64::to_string).collect();
        let queries = field(report, cells[0], "score")
            .and_then(|s| s.get("queries").and_then(Value::as_u64))
            .unwrap_or(0);
        let reason = format!(
            "the ef change did not take effect: at ef {} every answer of every query family was identical ({queries} scored queries per point; recall as low as {lowest:.4}, below {FULL_RECALL}), so the index searched with one breadth throughout",
            efs.join(", ")
        );
        for i in cells {
            report.cells[i].status = Status::Invalid;
            report.cells[i].reason = Some(reason.clone());
        }
    }
}

/// The line kept after a window: its QPS, and the point's recall and p50 so far.
fn window_line(label: &str, outcome: &WindowOutcome, builder: &PointBuilder) -> String {
    let cell = builder.to_cell();
    let recall = builder
        .recall()
        .map_or(String::new(), |r| format!(" · recall {r:.4}"));
    let p50 = cell.latency_ns.map_or(String::new(), |l| {
        format!(" · p50 {}", format_latency_ns(l.p50))
    });
    format!(
        "{label}: {} q/s{recall}{p50}",
        format_rate(outcome.throughput())
    )
}
