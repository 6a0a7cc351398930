//! `throughput.svg`: throughput per measured round, one panel per workload with its own
//! linear scale from zero (a workload at a million operations per second never squeezes
//! another at four thousand into a sliver), one row per system: each round a dot, the median
//! a bar, so the noise is visible beside every figure.

use std::fmt::Write as _;

use super::axis::{Linear, compact, open_chart};
use super::chart::{self, escape, system_color};
use crate::human::format_rate;
use crate::results::Report;

const WIDTH: f64 = 900.0;
const LABEL_W: f64 = 170.0;
const PLOT_W: f64 = 500.0;
const ROW_H: f64 = 20.0;
const PANEL_HEAD: f64 = 40.0;
const PANEL_GAP: f64 = 16.0;

/// The name of the chart in `data-chart`.
pub const CHART: &str = "throughput-rounds";

/// The charts of a report as (file name, SVG text); empty when nothing has a figure.
pub fn render_svg_charts(report: &Report) -> Vec<(String, String)> {
    render_throughput(report)
        .map(|svg| ("throughput.svg".to_owned(), svg))
        .into_iter()
        .collect()
}

/// Systems that have a throughput figure in some cell, in report order.
fn drawn_systems(report: &Report) -> Vec<&str> {
    report
        .systems
        .iter()
        .map(|s| s.name.as_str())
        .filter(|name| {
            report
                .cells
                .iter()
                .any(|c| c.system == *name && c.usable_throughput().is_some())
        })
        .collect()
}

/// The throughput chart, or `None` when no cell has a figure.
pub fn render_throughput(report: &Report) -> Option<String> {
    let systems = drawn_systems(report);
    if systems.is_empty() {
        return None;
    }
    let workloads = chart::workloads(report);
    let panel_h = PANEL_HEAD + ROW_H * report.systems.len() as f64 + PANEL_GAP;
    let height = 56.0 + panel_h * workloads.len() as f64;
    let mut svg = String::new();
    open_chart(
        &mut svg,
        (WIDTH, height),
        CHART,
        &systems,
        &format!("Throughput per round — {} {}", report.tool, report.suite),
        if report.forks.len() >= 2 {
            "Each ring is one fork's median, each small dot one round, the bar the median of the forks; every workload has its own scale from zero."
        } else {
            "Each dot is one measured round, the bar the median of the rounds; every workload has its own scale from zero."
        },
    );
    for (w, workload) in workloads.iter().enumerate() {
        panel(&mut svg, report, workload, 56.0 + panel_h * w as f64);
    }
    chart::close(&mut svg);
    Some(svg)
}

/// One workload: its title and scale, then a row per system.
fn panel(svg: &mut String, report: &Report, workload: &str, top: f64) {
    let cells: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.workload == workload)
        .collect();
    let unit = cells.first().map_or("ops/s", |c| c.unit.as_str());
    let max = cells
        .iter()
        .filter_map(|c| c.usable_throughput())
        .map(|t| t.max)
        .fold(0.0_f64, f64::max);
    let _ = writeln!(
        svg,
        r##"<text x="8" y="{:.1}" font-size="13" font-weight="bold">{} <tspan font-weight="normal" fill="#555">({})</tspan></text>"##,
        top + 14.0,
        escape(workload),
        escape(unit)
    );
    let rows_top = top + PANEL_HEAD;
    let rows_bottom = rows_top + ROW_H * report.systems.len() as f64;
    let (x, step) = Linear::from_zero(max.max(1e-9), LABEL_W, LABEL_W + PLOT_W);
    for tick in x.ticks(step) {
        let px = x.at(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{rows_bottom:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" fill="#555" font-size="11">{}</text>"##,
            rows_top - 4.0,
            rows_top - 8.0,
            compact(tick)
        );
    }
    for (s, system) in report.systems.iter().enumerate() {
        let y = rows_top + ROW_H * s as f64;
        let mid = y + ROW_H / 2.0;
        let _ = writeln!(
            svg,
            r#"<text data-system="{0}" x="{1:.1}" y="{2:.1}" text-anchor="end">{0}</text>"#,
            escape(&system.name),
            LABEL_W - 8.0,
            mid + 4.0
        );
        let cell = cells.iter().find(|c| c.system == system.name);
        match cell.and_then(|c| c.usable_throughput().map(|t| (t, c))) {
            Some((t, c)) => row(
                svg,
                &system.name,
                system_color(report, &system.name),
                (t, &c.forks),
                &x,
                mid,
            ),
            None => {
                let status = cell.map_or("not measured", |c| c.status.as_str());
                let _ = writeln!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" fill="#888" font-style="italic">{status}</text>"##,
                    LABEL_W + 4.0,
                    mid + 4.0
                );
            }
        }
    }
}

/// One system's row: the median bar, a dot per round, the figure at the right. A cell measured
/// in forks gets a larger ring per fork at that fork's median (the replicates its interval is
/// computed over), its rounds small dots.
fn row(
    svg: &mut String,
    system: &str,
    color: &str,
    (t, forks): (&crate::results::Throughput, &[crate::results::ForkFigures]),
    x: &Linear,
    mid: f64,
) {
    let forked = forks.len() >= 2;
    let name = escape(system);
    let _ = writeln!(
        svg,
        r#"<rect data-system="{name}" x="{LABEL_W}" y="{:.1}" width="{:.1}" height="12" fill="{color}" fill-opacity="0.3" stroke="{color}"><title>{name}: median {}</title></rect>"#,
        mid - 6.0,
        (x.at(t.median) - LABEL_W).max(1.0),
        format_rate(t.median)
    );
    let radius = if forked { 2.5 } else { 4.0 };
    for (i, value) in t.rounds.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<circle data-system="{name}" cx="{:.1}" cy="{mid:.1}" r="{radius}" fill="{color}" stroke="white" stroke-width="1"><title>{name}, round {}: {}</title></circle>"#,
            x.at(*value),
            i + 1,
            format_rate(*value)
        );
    }
    for fork in forks.iter().filter(|_| forked) {
        if let Some(value) = fork.throughput {
            let _ = writeln!(
                svg,
                r#"<circle data-system="{name}" data-fork="{}" cx="{:.1}" cy="{mid:.1}" r="7" fill="none" stroke="{color}" stroke-width="2"><title>{name}, fork {}: median {}</title></circle>"#,
                fork.fork,
                x.at(value),
                fork.fork,
                format_rate(value)
            );
        }
    }
    let range = if t.rounds.len() > 1 {
        format!(" ({}–{})", format_rate(t.min), format_rate(t.max))
    } else {
        String::new()
    };
    let _ = writeln!(
        svg,
        r#"<text data-system="{name}" x="{:.1}" y="{:.1}">{}{range}</text>"#,
        LABEL_W + PLOT_W + 10.0,
        mid + 4.0,
        format_rate(t.median)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dot_per_round_a_bar_per_cell_and_a_word_for_the_rest() {
        let charts = render_svg_charts(&crate::report::tests::sample());
        assert_eq!(charts.len(), 1);
        let svg = &charts[0].1;
        // 5 measured cells × 3 rounds, each a dot; one bar per measured cell.
        assert_eq!(svg.matches("<circle data-system=").count(), 15);
        assert_eq!(svg.matches("<rect data-system=").count(), 5);
        assert!(svg.contains(">invalid</text>"));
        assert!(svg.contains(r#"data-chart="throughput-rounds""#));
        assert!(!svg.contains("data-fork="), "no forks, no rings");
        assert!(svg.contains(r#"data-systems="[&quot;a&quot;,&quot;b&quot;,&quot;c&quot;]""#));
        assert!(svg.ends_with("</svg>\n"));
    }

    #[test]
    fn a_cell_measured_in_forks_gets_a_ring_per_fork_at_its_median() {
        let mut report = crate::report::tests::sample();
        let cell = report
            .cells
            .iter_mut()
            .find(|c| c.usable_throughput().is_some())
            .unwrap();
        let median = cell.throughput.as_ref().unwrap().median;
        cell.forks = (1..=3)
            .map(|fork| crate::results::ForkFigures {
                fork,
                status: crate::results::Status::Ok,
                reason: None,
                throughput: Some(median * (0.9 + 0.1 * f64::from(fork))),
                latency_p50_ns: None,
                latency_p99_ns: None,
                rounds: Vec::new(),
            })
            .collect();
        report.forks = (1..=3)
            .map(|fork| crate::results::ForkRun {
                fork,
                pid: fork,
                ended: "exit 0".into(),
                started_at: None,
                finished_at: None,
                results: format!("forks/{fork}"),
                calibration: None,
            })
            .collect();
        let svg = &render_svg_charts(&report)[0].1;
        assert_eq!(svg.matches("data-fork=").count(), 3);
        assert!(svg.contains("fork 2: median"), "{svg}");
        assert!(svg.contains("Each ring is one fork's median"));
    }

    #[test]
    fn each_workload_has_its_own_scale() {
        let report = crate::export::fixture::report();
        let svg = render_throughput(&report).unwrap();
        // SQLite's writes (4,386/s) fill most of their panel next to its reads at 1M/s.
        let width_of = |title: &str| -> f64 {
            let at = svg.find(&format!("<title>sqlite: median {title}")).unwrap();
            let rect = &svg[svg[..at].rfind("<rect").unwrap()..at];
            let w = rect.split("width=\"").nth(1).unwrap();
            w[..w.find('"').unwrap()].parse().unwrap()
        };
        let write = report.cells[0].throughput.as_ref().unwrap().median;
        let read = report.cells[3].throughput.as_ref().unwrap().median;
        assert!(width_of(&format_rate(write)) > 0.5 * PLOT_W);
        assert!(width_of(&format_rate(read)) > 0.5 * PLOT_W);
    }
}
