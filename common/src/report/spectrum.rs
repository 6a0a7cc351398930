//! `latency-spectrum.svg`: the latency percentile spectrum of each cell's pooled HDR
//! histogram, as HdrHistogram's plotter draws it — x is the percentile on the log scale
//! 1/(1−q) (50%, 90%, 99%, 99.9%… equally spaced), y the latency on a log scale — one panel
//! per workload, one line per system, with p50, p99 and p99.9 marked.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::axis::{Log, decade_label, legend, open_chart};
use super::chart::{self, escape, system_color};
use crate::human::format_latency_ns;
use crate::recorder::decode_histogram;
use crate::results::{Cell, Report, Status};

pub const CHART: &str = "latency-spectrum";

const WIDTH: f64 = 900.0;
const PANEL_W: f64 = 440.0;
const PANEL_H: f64 = 250.0;
const TOP: f64 = 72.0;
/// Inside a panel: room for the y labels, the title and the x labels.
const LEFT: f64 = 62.0;
const RIGHT: f64 = 14.0;
const HEAD: f64 = 28.0;
const FOOT: f64 = 34.0;

/// One system's line in one panel.
struct Line<'a> {
    cell: &'a Cell,
    histogram: Histogram<u64>,
}

/// The cells of `workload` that have a histogram to draw.
fn lines<'a>(report: &'a Report, workload: &str) -> Vec<Line<'a>> {
    report
        .cells
        .iter()
        .filter(|c| c.workload == workload && c.status == Status::Ok)
        .filter_map(|cell| {
            let histogram = decode_histogram(cell.histogram_b64.as_deref()?).ok()?;
            (!histogram.is_empty()).then_some(Line { cell, histogram })
        })
        .collect()
}

/// x of quantile `q`: log10(1/(1−q)).
fn nines(q: f64) -> f64 {
    (1.0 / (1.0 - q).max(1e-12)).log10()
}

/// The spectrum chart, or `None` when no cell has a histogram.
pub fn render_spectrum(report: &Report) -> Option<String> {
    let (panels, systems) = chart::panels(report, |w| lines(report, w), |l| &l.cell.system);
    if panels.is_empty() {
        return None;
    }
    let rows = panels.len().div_ceil(2);
    let height = TOP + PANEL_H * rows as f64;
    let mut svg = String::new();
    open_chart(
        &mut svg,
        (WIDTH, height),
        CHART,
        &systems,
        &format!("Latency by percentile — {} {}", report.tool, report.suite),
        "From each cell's HDR histogram of every measured operation; both axes logarithmic (x as HdrHistogram plots it: 1/(1−percentile)).",
    );
    let entries: Vec<(&str, &str)> = systems
        .iter()
        .map(|s| (*s, system_color(report, s)))
        .collect();
    legend(&mut svg, &entries, 8.0, 60.0);
    for (i, (workload, lines)) in panels.iter().enumerate() {
        let x0 = (i % 2) as f64 * (PANEL_W + 12.0);
        let y0 = TOP + (i / 2) as f64 * PANEL_H;
        // The deepest percentile the panel's cells have operations for: 10^k give k nines.
        let most = lines.iter().map(|l| l.histogram.len()).max().unwrap_or(1);
        let depth = (most as f64).log10().ceil().clamp(1.0, 6.0);
        panel(&mut svg, report, workload, lines, (x0, y0), depth);
    }
    chart::close(&mut svg);
    Some(svg)
}

/// The x labels: 50%, 90%, 99%, … to `depth` nines (0% is the left edge, unlabelled: it
/// would sit on top of 50%).
fn x_ticks(depth: f64) -> Vec<(f64, String)> {
    let mut ticks = vec![(2f64.log10(), "50%".to_owned())];
    for k in 1..=depth as u32 {
        let q = 1.0 - 10f64.powi(-(k as i32));
        let label = format!("{:.*}%", (k as usize).saturating_sub(2), q * 100.0);
        ticks.push((f64::from(k), label));
    }
    ticks
}

fn panel(
    svg: &mut String,
    report: &Report,
    workload: &str,
    lines: &[Line],
    (x0, y0): (f64, f64),
    depth: f64,
) {
    let (left, right) = (x0 + LEFT, x0 + PANEL_W - RIGHT);
    let (top, bottom) = (y0 + HEAD, y0 + PANEL_H - FOOT);
    let min = lines
        .iter()
        .map(|l| l.histogram.min().max(1))
        .min()
        .unwrap_or(1);
    let max = lines.iter().map(|l| l.histogram.max()).max().unwrap_or(1);
    let y = Log::covering(min as f64, max as f64, bottom, top);
    let x = |n: f64| left + n / depth * (right - left);
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
        x0 + 8.0,
        y0 + 16.0,
        escape(workload)
    );
    for value in y.minor() {
        let py = y.at(value);
        let _ = writeln!(
            svg,
            r##"<line x1="{left:.1}" x2="{right:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#f0f0f0"/>"##
        );
    }
    for value in y.decades() {
        let py = y.at(value);
        let _ = writeln!(
            svg,
            r##"<line x1="{left:.1}" x2="{right:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11" fill="#555">{}</text>"##,
            left - 6.0,
            py + 4.0,
            decade_label(value)
        );
    }
    for (n, label) in x_ticks(depth) {
        let px = x(n);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{top:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#555">{label}</text>"##,
            bottom + 16.0
        );
    }
    for line in lines {
        draw_line(svg, report, line, &x, &y, depth);
    }
}

/// One cell's spectrum: a step line through HdrHistogram's percentile ticks, and a marker at
/// p50, p99 and p99.9 (where the cell has operations enough to reach it).
fn draw_line(
    svg: &mut String,
    report: &Report,
    line: &Line,
    x: &dyn Fn(f64) -> f64,
    y: &Log,
    depth: f64,
) {
    let system = escape(&line.cell.system);
    let color = system_color(report, &line.cell.system);
    let mut path = String::new();
    for step in line.histogram.iter_quantiles(5) {
        let q = step.quantile_iterated_to();
        let n = nines(q);
        if q >= 1.0 || n > depth {
            break;
        }
        let command = if path.is_empty() { 'M' } else { 'L' };
        let _ = write!(
            path,
            "{command}{:.1} {:.1} ",
            x(n),
            y.at(step.value_iterated_to().max(1) as f64)
        );
    }
    let _ = writeln!(
        svg,
        r#"<path data-system="{system}" d="{}" fill="none" stroke="{color}" stroke-width="2"><title>{system}</title></path>"#,
        path.trim_end()
    );
    let Some(p) = line.cell.latency_ns else {
        return;
    };
    let count = line.histogram.len() as f64;
    for (q, label, value) in [
        (0.5, "p50", p.p50),
        (0.99, "p99", p.p99),
        (0.999, "p99.9", p.p999),
    ] {
        if nines(q) > depth || count < 1.0 / (1.0 - q) {
            continue;
        }
        let _ = writeln!(
            svg,
            r#"<circle data-system="{system}" cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"><title>{system} {label}: {}</title></circle>"#,
            x(nines(q)),
            y.at(value.max(1) as f64),
            format_latency_ns(value)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_measured_cell_in_a_panel_per_workload() {
        let report = crate::export::fixture::report();
        let svg = render_spectrum(&report).unwrap();
        assert_eq!(svg.matches("<path data-system=").count(), 8);
        for system in ["sqlite", "postgres", "mariadb"] {
            assert!(svg.contains(&format!(r#"<path data-system="{system}""#)));
        }
        // 600 operations a cell: two nines (99%) have samples enough, the axis runs to 99.9%.
        assert!(svg.contains(">99.9%</text>") && !svg.contains(">99.99%</text>"));
        assert!(svg.contains(">50%</text>"));
        assert!(svg.contains("sqlite p99: "));
        assert!(
            !svg.contains("p99.9: "),
            "600 operations do not reach p99.9"
        );
        assert!(render_spectrum(&crate::report::tests::sample()).is_none());
    }

    #[test]
    fn percentile_labels_keep_their_nines() {
        let labels: Vec<String> = x_ticks(4.0).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["50%", "90%", "99%", "99.9%", "99.99%"]);
    }
}
