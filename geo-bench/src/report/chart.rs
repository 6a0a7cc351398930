//! `insert-curve.svg`: events/s against events per request, both on log scales; one line per
//! system and client count (solid for the most clients, dashed for fewer), a whisker per point
//! for the round-to-round range. Every mark names its system (`data-chart="insert-curve"`,
//! `data-system`), so the HTML report's legend and the browser test find them. A pure function
//! of the report.

use std::fmt::Write as _;

use common::human::format_thousands;
use common::report::axis::{PlotArea, open_chart};
use common::report::chart::{self, color, decades, escape};
use common::results::{Cell, Report};

use super::{distinct, family, number};

const PLOT: PlotArea = PlotArea {
    left: 80.0,
    top: 56.0,
    width: 560.0,
    height: 320.0,
};

/// One measured point: its cell, events per request, median, min and max events/s.
struct Point<'a> {
    cell: &'a Cell,
    batch: f64,
    median: f64,
    min: f64,
    max: f64,
}

/// Log-scale axes over whole decades.
struct Scale {
    x_lo: f64,
    x_hi: f64,
    y_lo: f64,
    y_hi: f64,
}

impl Scale {
    fn of(points: &[Point<'_>]) -> Scale {
        let fold = |f: fn(&Point<'_>) -> f64| {
            points
                .iter()
                .map(f)
                .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)))
        };
        let (x_lo, x_hi) = decades(fold(|p| p.batch).0, fold(|p| p.batch).1);
        let (y_lo, y_hi) = decades(fold(|p| p.min).0, fold(|p| p.max).1);
        Scale {
            x_lo,
            x_hi,
            y_lo,
            y_hi,
        }
    }

    fn x(&self, v: f64) -> f64 {
        PLOT.left + PLOT.width * (v.log10() - self.x_lo) / (self.x_hi - self.x_lo)
    }

    fn y(&self, v: f64) -> f64 {
        PLOT.top + PLOT.height * (1.0 - (v.max(1e-3).log10() - self.y_lo) / (self.y_hi - self.y_lo))
    }
}

fn axes(svg: &mut String, scale: &Scale) {
    for e in (scale.x_lo as i32)..=(scale.x_hi as i32) {
        let v = 10f64.powi(e);
        PLOT.x_tick(svg, scale.x(v), &format_thousands(v), "#ddd");
    }
    for e in (scale.y_lo as i32)..=(scale.y_hi as i32) {
        let v = 10f64.powi(e);
        PLOT.y_tick(svg, scale.y(v), &format_thousands(v), "#ddd");
    }
    PLOT.titles(svg, "events per request", "events/s");
}

/// One system and client count: its line, points, whiskers and legend entry.
fn series(
    svg: &mut String,
    scale: &Scale,
    line: &[&Point<'_>],
    color: &str,
    dashed: bool,
    legend_row: usize,
) {
    let dash = if dashed {
        r#" stroke-dasharray="5,4""#
    } else {
        ""
    };
    let system = escape(&line[0].cell.system);
    let path = line.iter().map(|p| (scale.x(p.batch), scale.y(p.median)));
    chart::polyline(svg, &system, path, color, dash);
    for p in line {
        let px = scale.x(p.batch);
        let _ = writeln!(
            svg,
            r#"<circle data-system="{system}" cx="{px:.1}" cy="{:.1}" r="3" fill="{color}"/><line data-system="{system}" x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}"/>"#,
            scale.y(p.median),
            scale.y(p.min),
            scale.y(p.max)
        );
    }
    let first = line[0].cell;
    let clients = number(first, "clients");
    let (lx, ly) = (
        PLOT.right() + 16.0,
        PLOT.top + 10.0 + 20.0 * legend_row as f64,
    );
    let _ = writeln!(
        svg,
        r#"<line data-system="{system}" x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text data-system="{system}" x="{:.1}" y="{:.1}">{system} · {clients} client{}</text>"#,
        lx + 24.0,
        lx + 30.0,
        ly + 4.0,
        if clients == 1 { "" } else { "s" }
    );
}

/// The chart, or `None` when no insert cell has a figure.
pub fn render_curve_svg(report: &Report) -> Option<String> {
    let points: Vec<Point<'_>> = report
        .cells
        .iter()
        .filter(|c| family(c) == "insert")
        .filter_map(|cell| {
            let t = cell.usable_throughput()?;
            let batch = number(cell, "batch_size") as f64;
            (batch > 0.0 && t.median > 0.0).then_some(Point {
                cell,
                batch,
                median: t.median,
                min: t.min,
                max: t.max,
            })
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let scale = Scale::of(&points);
    let systems: Vec<&str> = distinct(points.iter().map(|p| p.cell.system.as_str()));
    let mut svg = String::new();
    open_chart(
        &mut svg,
        (PLOT.right() + 220.0, PLOT.bottom() + 60.0),
        "insert-curve",
        &systems,
        &format!("{} — insert throughput by events per request", report.tool),
        "log–log; a point is the median of the rounds, its whisker their min–max",
    );
    axes(&mut svg, &scale);
    let most_clients = points
        .iter()
        .map(|p| number(p.cell, "clients"))
        .max()
        .unwrap_or(1);
    let keys = distinct(
        points
            .iter()
            .map(|p| (p.cell.system.as_str(), number(p.cell, "clients"))),
    );
    for (row, (system, clients)) in keys.iter().enumerate() {
        let index = report
            .systems
            .iter()
            .position(|s| s.name == *system)
            .unwrap_or(row);
        let mut line: Vec<&Point<'_>> = points
            .iter()
            .filter(|p| p.cell.system == *system && number(p.cell, "clients") == *clients)
            .collect();
        line.sort_by(|a, b| a.batch.total_cmp(&b.batch));
        series(
            &mut svg,
            &scale,
            &line,
            color(index),
            *clients != most_clients,
            row,
        );
    }
    chart::close(&mut svg);
    Some(svg)
}
