//! `recall-qps-<family>.svg`: recall (x) against QPS (y, log scale), one curve per target, each
//! point labelled with its ef — the chart ann-benchmarks users read, from the report alone.

use std::fmt::Write as _;

use common::human::format_rate;
use common::report::axis::{PlotArea, open_chart};
use common::report::chart::{close, decades, escape, polyline, system_color};
use common::results::Report;

use super::{Curve, curves};

const PLOT: PlotArea = PlotArea {
    left: 70.0,
    top: 56.0,
    width: 520.0,
    height: 320.0,
};

/// One chart per family that has at least one curve, as (file name, SVG text).
pub fn render_charts(report: &Report) -> Vec<(String, String)> {
    let all = curves(report);
    let mut families: Vec<&str> = Vec::new();
    for c in &all {
        if !families.contains(&c.family.as_str()) {
            families.push(&c.family);
        }
    }
    families
        .into_iter()
        .map(|family| {
            let mine: Vec<&Curve> = all.iter().filter(|c| c.family == family).collect();
            (file_name(family), chart(report, family, &mine))
        })
        .collect()
}

/// `f32 · filter 10% · k 10` → `recall-qps-f32-filter-10pct-k-10.svg`.
pub fn file_name(family: &str) -> String {
    format!("recall-qps-{}.svg", file_slug(family))
}

/// `f32 · filter 10% · k 10` → `f32-filter-10pct-k-10`.
pub fn file_slug(label: &str) -> String {
    let slug: String = label
        .replace('%', "pct")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let parts: Vec<&str> = slug.split('-').filter(|p| !p.is_empty()).collect();
    parts.join("-")
}

/// The plot both recall/QPS charts share: recall on x from just below the lowest point to 1,
/// QPS on y over whole decades (log scale), with its grid and labels drawn.
pub struct RecallQps {
    r_lo: f64,
    log_lo: f64,
    log_hi: f64,
}

impl RecallQps {
    /// Opens the chart (`data-chart` = `chart`, naming the `systems` it draws marks for) on the
    /// range of `points` (recall, QPS) and draws its axes.
    pub fn open(
        svg: &mut String,
        chart: &str,
        systems: &[&str],
        title: &str,
        points: impl Iterator<Item = (f64, f64)>,
    ) -> RecallQps {
        let (mut r_min, mut q_min, mut q_max) = (1.0_f64, f64::INFINITY, 0.0_f64);
        for (recall, qps) in points {
            r_min = r_min.min(recall);
            q_min = q_min.min(qps.max(1e-3));
            q_max = q_max.max(qps);
        }
        let (log_lo, log_hi) = decades(q_min, q_max);
        let plot = RecallQps {
            r_lo: (r_min - 0.02).clamp(0.0, 0.98),
            log_lo,
            log_hi,
        };
        open_chart(
            svg,
            (PLOT.right() + 200.0, PLOT.bottom() + 50.0),
            chart,
            systems,
            title,
            "up and to the right is better: more queries per second at a higher recall",
        );
        plot.axes(svg);
        plot
    }

    pub fn x(&self, recall: f64) -> f64 {
        PLOT.left + PLOT.width * (recall - self.r_lo) / (1.0 - self.r_lo)
    }

    pub fn y(&self, qps: f64) -> f64 {
        PLOT.top
            + PLOT.height
                * (1.0 - (qps.max(1e-3).log10() - self.log_lo) / (self.log_hi - self.log_lo))
    }

    /// The right edge of the plot, where labels of lines across it start.
    pub fn right(&self) -> f64 {
        PLOT.right()
    }

    pub fn left(&self) -> f64 {
        PLOT.left
    }

    fn axes(&self, svg: &mut String) {
        PLOT.border(svg);
        for decade in (self.log_lo as i32)..=(self.log_hi as i32) {
            let q = 10f64.powi(decade);
            PLOT.y_tick(svg, self.y(q), &format_rate(q), "#eee");
        }
        for step in 0..=5 {
            let r = self.r_lo + (1.0 - self.r_lo) * f64::from(step) / 5.0;
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{r:.3}</text>"#,
                self.x(r),
                PLOT.bottom() + 16.0
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">recall@k</text>"#,
            PLOT.left + PLOT.width / 2.0,
            PLOT.bottom() + 36.0
        );
    }

    /// One legend entry per system, down the right of the plot (`data-legend`, not a mark).
    pub fn legend(&self, svg: &mut String, entries: &[(&str, &str)]) {
        for (i, (name, color)) in entries.iter().enumerate() {
            let ly = PLOT.top + 10.0 + 18.0 * i as f64;
            let _ = writeln!(
                svg,
                r#"<g class="legend" data-legend="{name}"><rect x="{:.1}" y="{ly:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}">{name}</text></g>"#,
                PLOT.right() + 12.0,
                PLOT.right() + 30.0,
                ly + 10.0,
                name = escape(name)
            );
        }
    }
}

fn chart(report: &Report, family: &str, curves: &[&Curve]) -> String {
    let systems: Vec<&str> = curves.iter().map(|c| c.system.as_str()).collect();
    let mut svg = String::new();
    let plot = RecallQps::open(
        &mut svg,
        "recall-qps",
        &systems,
        &format!(
            "{} — {family} (QPS at --connections, log scale, against recall@k)",
            report.tool
        ),
        curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| (p.recall, p.qps))),
    );
    let mut legend = Vec::new();
    for curve in curves {
        let color = system_color(report, &curve.system);
        let system = escape(&curve.system);
        let path = curve
            .points
            .iter()
            .map(|p| (plot.x(p.recall), plot.y(p.qps)));
        polyline(&mut svg, &system, path, color, "");
        for p in &curve.points {
            let (px, py) = (plot.x(p.recall), plot.y(p.qps));
            let _ = writeln!(
                svg,
                r#"<circle data-system="{system}" cx="{px:.1}" cy="{py:.1}" r="3" fill="{color}"><title>{system} ef {}: recall {:.3}, {} q/s</title></circle><text data-system="{system}" x="{:.1}" y="{:.1}" font-size="10" fill="{color}">ef {}</text>"#,
                p.ef,
                p.recall,
                format_rate(p.qps),
                px + 4.0,
                py - 4.0,
                p.ef
            );
        }
        legend.push((curve.system.as_str(), color));
    }
    plot.legend(&mut svg, &legend);
    close(&mut svg);
    svg
}
