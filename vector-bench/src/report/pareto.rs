//! The Pareto view, as ann-benchmarks plots it: per query family (filter and k), every
//! system's (recall, QPS) points over all its variants and ef points, its Pareto front (the
//! points no other point of it beats on both), and the exact scan as the bar; stored under
//! `extra.pareto` for any renderer, and drawn as `pareto-<family>.svg`.

use std::fmt::Write as _;

use common::human::format_rate;
use common::report::chart::{close, escape, polyline, system_color};
use common::results::{Cell, Report, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chart::{RecallQps, file_slug};

/// One query family's view.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ParetoView {
    /// `filter 10% · k 10`.
    pub query: String,
    pub filter: String,
    pub k: u64,
    /// The exact scan of this family's rows (recall 1.0).
    pub exact: Option<Bar>,
    pub systems: Vec<SystemFront>,
}

/// The exact scan's figures.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub qps: f64,
    pub p50_ns: f64,
}

/// One system's points and front in one family.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SystemFront {
    pub system: String,
    pub points: Vec<ParetoPoint>,
    /// Indexes into `points` of the front, by ascending recall.
    pub front: Vec<usize>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ParetoPoint {
    pub variant: String,
    pub ef: u64,
    pub recall: f64,
    pub qps: f64,
    pub p50_ns: f64,
}

fn text<'a>(cell: &'a Cell, key: &str) -> Option<&'a str> {
    cell.extra.get(key)?.as_str()
}

fn number(cell: &Cell, key: &str) -> Option<f64> {
    cell.extra.get(key)?.as_f64()
}

/// Every family's view, in the order the report's cells first name them.
pub fn views(report: &Report) -> Vec<ParetoView> {
    let mut out: Vec<ParetoView> = Vec::new();
    for cell in report.cells.iter().filter(|c| c.status == Status::Ok) {
        let (Some(filter), Some(k)) = (
            text(cell, "filter"),
            cell.extra.get("k").and_then(Value::as_u64),
        ) else {
            continue;
        };
        let (Some(throughput), Some(latency)) = (cell.usable_throughput(), cell.latency_ns) else {
            continue;
        };
        let query = query_of(cell);
        let at = match out.iter().position(|v| v.query == query) {
            Some(at) => at,
            None => {
                out.push(ParetoView {
                    query: query.clone(),
                    filter: filter.to_owned(),
                    k,
                    exact: None,
                    systems: Vec::new(),
                });
                out.len() - 1
            }
        };
        let view = &mut out[at];
        let Some(ef) = cell.extra.get("ef").and_then(Value::as_u64) else {
            view.exact = Some(Bar {
                qps: throughput.median,
                p50_ns: latency.p50 as f64,
            });
            continue;
        };
        let point = ParetoPoint {
            variant: text(cell, "variant").unwrap_or("").to_owned(),
            ef,
            recall: number(cell, "recall").unwrap_or(0.0),
            qps: throughput.median,
            p50_ns: latency.p50 as f64,
        };
        match view.systems.iter_mut().find(|s| s.system == cell.system) {
            Some(system) => system.points.push(point),
            None => view.systems.push(SystemFront {
                system: cell.system.clone(),
                points: vec![point],
                front: Vec::new(),
            }),
        }
    }
    for system in out.iter_mut().flat_map(|v| v.systems.iter_mut()) {
        system.front = front(&system.points);
    }
    out
}

/// `f32 · filter 10% · k 10` → `filter 10% · k 10` (the family without the variant), and the
/// exact scan's `exact scan · filter 10% · k 10` → the same.
fn query_of(cell: &Cell) -> String {
    let family = text(cell, "family").unwrap_or("");
    family
        .split_once(" · ")
        .map_or(family, |(_, rest)| rest)
        .to_owned()
}

/// The points no other point beats on both recall and QPS, by ascending recall.
pub fn front(points: &[ParetoPoint]) -> Vec<usize> {
    let beaten = |i: usize| {
        let p = &points[i];
        points.iter().any(|o| {
            o.recall >= p.recall && o.qps >= p.qps && (o.recall > p.recall || o.qps > p.qps)
        })
    };
    let mut out: Vec<usize> = (0..points.len()).filter(|i| !beaten(*i)).collect();
    out.sort_by(|a, b| points[*a].recall.total_cmp(&points[*b].recall));
    out
}

/// One chart per family with at least one system's points, as (file name, SVG text).
pub fn charts(report: &Report) -> Vec<(String, String)> {
    views(report)
        .iter()
        .filter(|v| !v.systems.is_empty())
        .map(|v| {
            (
                format!("pareto-{}.svg", file_slug(&v.query)),
                chart(report, v),
            )
        })
        .collect()
}

fn chart(report: &Report, view: &ParetoView) -> String {
    let systems: Vec<&str> = view.systems.iter().map(|s| s.system.as_str()).collect();
    let points = view
        .systems
        .iter()
        .flat_map(|s| s.points.iter().map(|p| (p.recall, p.qps)));
    let mut svg = String::new();
    let plot = RecallQps::open(
        &mut svg,
        "pareto",
        &systems,
        &format!(
            "{} — {}: each system's points and Pareto front (QPS, log scale, against recall)",
            report.tool, view.query
        ),
        points.chain(view.exact.map(|bar| (1.0, bar.qps))),
    );
    if let Some(bar) = view.exact {
        let _ = writeln!(
            svg,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" font-size="10">exact scan {} q/s</text>"##,
            plot.left(),
            plot.right(),
            plot.y(bar.qps),
            plot.y(bar.qps),
            plot.left() + 4.0,
            plot.y(bar.qps) - 4.0,
            format_rate(bar.qps)
        );
    }
    let mut legend = Vec::new();
    for system in &view.systems {
        let color = system_color(report, &system.system);
        let name = escape(&system.system);
        for p in &system.points {
            let _ = writeln!(
                svg,
                r#"<circle data-system="{name}" cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}" fill-opacity="0.45"><title>{name} {} ef {}</title></circle>"#,
                plot.x(p.recall),
                plot.y(p.qps),
                escape(&p.variant),
                p.ef
            );
        }
        let path = system.front.iter().map(|j| {
            let p = &system.points[*j];
            (plot.x(p.recall), plot.y(p.qps))
        });
        polyline(&mut svg, &name, path, color, "");
        legend.push((system.system.as_str(), color));
    }
    plot.legend(&mut svg, &legend);
    close(&mut svg);
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(recall: f64, qps: f64) -> ParetoPoint {
        ParetoPoint {
            variant: "f32".into(),
            ef: 1,
            recall,
            qps,
            p50_ns: 1.0,
        }
    }

    #[test]
    fn the_front_keeps_only_points_nothing_beats_on_both() {
        let points = [
            p(0.9, 1000.0),
            p(0.95, 800.0),
            p(0.93, 700.0),
            p(0.99, 300.0),
            p(0.9, 900.0),
        ];
        assert_eq!(front(&points), vec![0, 1, 3]);
        assert_eq!(front(&[]), Vec::<usize>::new());
    }
}
