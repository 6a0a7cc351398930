//! The Pareto view, as ann-benchmarks plots it: per query family (filter and k), every
//! system's (recall, QPS) points over all its variants and ef points, its Pareto front (the
//! points no other point of it beats on both), and the exact scan as the bar; stored under
//! `extra.pareto` for any renderer, and drawn as `pareto-<family>.svg`.

use std::fmt::Write as _;

use common::human::format_rate;
use common::report::chart::{close, decades, escape, open, system_color};
use common::results::{Cell, Report, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chart::file_slug;

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

const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const PLOT_W: f64 = 520.0;
const PLOT_H: f64 = 320.0;

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
    let all = view.systems.iter().flat_map(|s| s.points.iter());
    let (mut r_min, mut q_min, mut q_max) = (1.0_f64, f64::INFINITY, 0.0_f64);
    for p in all {
        r_min = r_min.min(p.recall);
        q_min = q_min.min(p.qps.max(1e-3));
        q_max = q_max.max(p.qps);
    }
    if let Some(bar) = view.exact {
        q_min = q_min.min(bar.qps.max(1e-3));
        q_max = q_max.max(bar.qps);
    }
    let r_lo = (r_min - 0.02).clamp(0.0, 0.98);
    let (log_lo, log_hi) = decades(q_min, q_max);
    let x = |r: f64| LEFT + PLOT_W * (r - r_lo) / (1.0 - r_lo);
    let y = |q: f64| TOP + PLOT_H * (1.0 - (q.max(1e-3).log10() - log_lo) / (log_hi - log_lo));
    let mut svg = String::new();
    open(
        &mut svg,
        LEFT + PLOT_W + 200.0,
        TOP + PLOT_H + 50.0,
        &format!(
            "{} — {}: each system's points and Pareto front (QPS, log scale, against recall)",
            report.tool, view.query
        ),
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#999"/>"##
    );
    for decade in (log_lo as i32)..=(log_hi as i32) {
        let q = 10f64.powi(decade);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            y(q),
            y(q),
            LEFT - 6.0,
            y(q) + 4.0,
            format_rate(q)
        );
    }
    for step in 0..=5 {
        let r = r_lo + (1.0 - r_lo) * f64::from(step) / 5.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{r:.3}</text>"#,
            x(r),
            TOP + PLOT_H + 16.0
        );
    }
    if let Some(bar) = view.exact {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" font-size="10">exact scan {} q/s</text>"##,
            LEFT + PLOT_W,
            y(bar.qps),
            y(bar.qps),
            LEFT + 4.0,
            y(bar.qps) - 4.0,
            format_rate(bar.qps)
        );
    }
    for (i, system) in view.systems.iter().enumerate() {
        let color = system_color(report, &system.system);
        for p in &system.points {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}" fill-opacity="0.45"><title>{} ef {}</title></circle>"#,
                x(p.recall),
                y(p.qps),
                escape(&p.variant),
                p.ef
            );
        }
        let path: Vec<String> = system
            .front
            .iter()
            .map(|j| {
                format!(
                    "{:.1},{:.1}",
                    x(system.points[*j].recall),
                    y(system.points[*j].qps)
                )
            })
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            path.join(" ")
        );
        let ly = TOP + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{ly:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + PLOT_W + 12.0,
            LEFT + PLOT_W + 30.0,
            ly + 10.0,
            escape(&system.system)
        );
    }
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
