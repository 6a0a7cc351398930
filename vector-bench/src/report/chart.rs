//! `recall-qps-<family>.svg`: recall (x) against QPS (y, log scale), one curve per target, each
//! point labelled with its ef — the chart ann-benchmarks users read, from the report alone.

use std::fmt::Write as _;

use common::human::format_rate;
use common::report::chart::{close, color, escape, open};
use common::results::Report;

use super::{Curve, curves};

const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const PLOT_W: f64 = 520.0;
const PLOT_H: f64 = 320.0;

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

fn chart(report: &Report, family: &str, curves: &[&Curve]) -> String {
    let points = curves.iter().flat_map(|c| c.points.iter());
    let (mut r_min, mut q_min, mut q_max) = (1.0_f64, f64::INFINITY, 0.0_f64);
    for p in points {
        r_min = r_min.min(p.recall);
        q_min = q_min.min(p.qps.max(1e-3));
        q_max = q_max.max(p.qps);
    }
    let r_lo = (r_min - 0.02).clamp(0.0, 0.98);
    let (log_lo, log_hi) = (
        q_min.log10().floor(),
        q_max.max(q_min * 10.0).log10().ceil(),
    );
    let x = |r: f64| LEFT + PLOT_W * (r - r_lo) / (1.0 - r_lo);
    let y = |q: f64| TOP + PLOT_H * (1.0 - (q.max(1e-3).log10() - log_lo) / (log_hi - log_lo));
    let width = LEFT + PLOT_W + 180.0;
    let height = TOP + PLOT_H + 50.0;
    let mut svg = String::new();
    open(
        &mut svg,
        width,
        height,
        &format!(
            "{} — {family} (QPS at --connections, log scale, against recall@k)",
            report.tool
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
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">recall@k</text>"#,
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H + 36.0
    );
    // One colour per curve of this family, in the order of the systems that have one.
    for (i, curve) in curves.iter().enumerate() {
        let color = color(i);
        let path: Vec<String> = curve
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.recall), y(p.qps)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for p in &curve.points {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="{color}">ef {}</text>"#,
                x(p.recall),
                y(p.qps),
                x(p.recall) + 4.0,
                y(p.qps) - 4.0,
                p.ef
            );
        }
        let ly = TOP + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{ly:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + PLOT_W + 12.0,
            LEFT + PLOT_W + 30.0,
            ly + 10.0,
            escape(&curve.system)
        );
    }
    close(&mut svg);
    svg
}
