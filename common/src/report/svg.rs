//! `throughput.svg`: one group of horizontal bars per workload, one bar per system, with the
//! round-to-round range drawn as a whisker so noise is visible next to every figure.

use std::fmt::Write as _;

use super::chart::{self, color, escape};
use crate::human::format_rate;
use crate::results::Report;

const LABEL_W: f64 = 150.0;
const PLOT_W: f64 = 520.0;
const BAR_H: f64 = 16.0;
const GROUP_GAP: f64 = 14.0;

/// The charts of a report as (file name, SVG text); empty when nothing has a figure.
pub fn render_svg_charts(report: &Report) -> Vec<(String, String)> {
    let workloads = super::workloads(report);
    let max = report
        .cells
        .iter()
        .filter_map(|c| c.usable_throughput())
        .map(|t| t.max)
        .fold(0.0_f64, f64::max);
    if max <= 0.0 {
        return Vec::new();
    }
    let systems = &report.systems;
    let group_h = BAR_H * systems.len() as f64 + GROUP_GAP;
    let legend_h = 20.0 * systems.len() as f64;
    let height = 40.0 + group_h * workloads.len() as f64 + legend_h + 10.0;
    let width = LABEL_W + PLOT_W + 110.0;
    let unit = report.cells.first().map_or("ops/s", |c| c.unit.as_str());
    let mut svg = String::new();
    chart::open(
        &mut svg,
        width,
        height,
        &format!(
            "{} {} — {} ({unit}, median; whisker: min–max)",
            report.tool, report.suite, report.section
        ),
    );
    for (w, workload) in workloads.iter().enumerate() {
        let top = 36.0 + group_h * w as f64;
        let _ = writeln!(
            svg,
            r#"<text x="8" y="{:.1}">{}</text>"#,
            top + group_h / 2.0,
            escape(workload)
        );
        for (s, system) in systems.iter().enumerate() {
            let y = top + BAR_H * s as f64;
            let cell = report
                .cells
                .iter()
                .find(|c| &c.workload == workload && c.system == system.name);
            let color = color(s);
            match cell.and_then(|c| c.usable_throughput()) {
                Some(t) => {
                    let scale = |v: f64| LABEL_W + PLOT_W * v / max;
                    let _ = writeln!(
                        svg,
                        r#"<rect x="{LABEL_W}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"#,
                        scale(t.median) - LABEL_W,
                        BAR_H - 3.0
                    );
                    let mid = y + (BAR_H - 3.0) / 2.0;
                    let _ = writeln!(
                        svg,
                        r#"<line x1="{:.1}" x2="{:.1}" y1="{mid:.1}" y2="{mid:.1}" stroke="black"/>"#,
                        scale(t.min),
                        scale(t.max)
                    );
                    let _ = writeln!(
                        svg,
                        r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                        scale(t.max) + 4.0,
                        y + BAR_H - 4.0,
                        format_rate(t.median)
                    );
                }
                None => {
                    let status = cell.map_or("not measured", |c| c.status.as_str());
                    let _ = writeln!(
                        svg,
                        r#"<text x="{:.1}" y="{:.1}" fill="{color}">{status}</text>"#,
                        LABEL_W + 4.0,
                        y + BAR_H - 4.0
                    );
                }
            }
        }
    }
    let legend_top = 36.0 + group_h * workloads.len() as f64;
    for (s, system) in systems.iter().enumerate() {
        let y = legend_top + 20.0 * s as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{LABEL_W}" y="{y:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            color(s),
            LABEL_W + 18.0,
            y + 10.0,
            escape(&system.name)
        );
    }
    chart::close(&mut svg);
    vec![("throughput.svg".to_owned(), svg)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_measured_cell_and_a_word_for_the_rest() {
        let charts = render_svg_charts(&crate::report::tests::sample());
        assert_eq!(charts.len(), 1);
        let svg = &charts[0].1;
        assert_eq!(
            svg.matches("<rect x=\"150\" y=").count(),
            5 + 3,
            "5 bars and 3 legend keys"
        );
        assert!(svg.contains(">invalid</text>"));
        assert!(svg.ends_with("</svg>\n"));
    }
}
