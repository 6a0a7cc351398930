//! `latency-over-time.svg`: latency per second from each cell's interval histograms, one panel
//! per workload, the measured rounds laid end to end (as in the `.hlog` files), one colour per
//! system: p99 solid, p50 dashed, on a log scale. A stall, a checkpoint or a warming cache shows
//! as a bump in the round it happened in.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::axis::{Linear, Log, decade_label, legend, open_chart};
use super::chart::{self, escape, system_color};
use crate::results::{Report, Status};
use crate::seconds::decode_round;

pub const CHART: &str = "latency-over-time";

const WIDTH: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const PANEL_H: f64 = 190.0;
const TOP: f64 = 72.0;

/// One system's seconds in one workload: per round, per second, (p50, p99) or nothing.
struct Series<'a> {
    system: &'a str,
    rounds: Vec<Vec<Option<(u64, u64)>>>,
}

fn series<'a>(report: &'a Report, workload: &str) -> Vec<Series<'a>> {
    let figures = |h: &Histogram<u64>| {
        (!h.is_empty()).then(|| (h.value_at_quantile(0.5), h.value_at_quantile(0.99)))
    };
    report
        .cells
        .iter()
        .filter(|c| c.workload == workload && c.status == Status::Ok)
        .filter_map(|cell| {
            let rounds: Vec<Vec<Option<(u64, u64)>>> = cell
                .latency_per_second_b64
                .iter()
                .map(|round| decode_round(round).map(|r| r.iter().map(figures).collect()))
                .collect::<Result<_, _>>()
                .ok()?;
            rounds
                .iter()
                .any(|r| r.iter().any(Option::is_some))
                .then_some(Series {
                    system: &cell.system,
                    rounds,
                })
        })
        .collect()
}

/// The latency-over-time chart, or `None` when no cell was measured per second.
pub fn render_timeline(report: &Report) -> Option<String> {
    let (panels, systems) = chart::panels(report, |w| series(report, w), |s| s.system);
    if panels.is_empty() {
        return None;
    }
    let height = TOP + PANEL_H * panels.len() as f64;
    let mut svg = String::new();
    open_chart(
        &mut svg,
        (WIDTH, height),
        CHART,
        &systems,
        &format!("Latency over time — {} {}", report.tool, report.suite),
        "Each second of each measured round, rounds end to end: p99 solid, p50 dashed, log scale.",
    );
    let entries: Vec<(&str, &str)> = systems
        .iter()
        .map(|s| (*s, system_color(report, s)))
        .collect();
    legend(&mut svg, &entries, 8.0, 60.0);
    for (i, (workload, series)) in panels.iter().enumerate() {
        panel(&mut svg, report, workload, series, TOP + PANEL_H * i as f64);
    }
    chart::close(&mut svg);
    Some(svg)
}

fn panel(svg: &mut String, report: &Report, workload: &str, series: &[Series], y0: f64) {
    let rounds = series.iter().map(|s| s.rounds.len()).max().unwrap_or(1);
    let slot = series
        .iter()
        .flat_map(|s| s.rounds.iter().map(Vec::len))
        .max()
        .unwrap_or(1)
        .max(1);
    let seconds = (rounds * slot) as f64;
    let (top, bottom) = (y0 + 30.0, y0 + PANEL_H - 30.0);
    let x = Linear {
        lo: 0.0,
        hi: seconds,
        px0: LEFT,
        px1: WIDTH - RIGHT,
    };
    let all = series
        .iter()
        .flat_map(|s| s.rounds.iter().flatten().flatten());
    let (min, max) = all.fold((u64::MAX, 1), |(lo, hi), (p50, p99)| {
        (lo.min((*p50).max(1)), hi.max(*p99))
    });
    let y = Log::covering(min as f64, max as f64, bottom, top);
    let _ = writeln!(
        svg,
        r#"<text x="8" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
        y0 + 16.0,
        escape(workload)
    );
    for value in y.decades() {
        let py = y.at(value);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11" fill="#555">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            decade_label(value)
        );
    }
    for r in 0..rounds {
        let px = x.at((r * slot) as f64);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{top:.1}" y2="{bottom:.1}" stroke="#bbb" stroke-dasharray="3 3"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#555">round {}</text>"##,
            px + 4.0,
            bottom + 16.0,
            r + 1
        );
    }
    for s in series {
        let color = system_color(report, s.system);
        for (pick, dash, width) in [(1, "", 1.8), (0, r#" stroke-dasharray="5 3""#, 1.0)] {
            let d = path(s, slot, &x, &y, pick);
            let name = escape(s.system);
            let label = if pick == 1 { "p99" } else { "p50" };
            let _ = writeln!(
                svg,
                r#"<path data-system="{name}" d="{d}" fill="none" stroke="{color}" stroke-width="{width}"{dash}><title>{name} {label} per second</title></path>"#
            );
        }
    }
}

/// The path of one figure (0 = p50, 1 = p99): a segment per run of seconds with operations,
/// broken at every round (rounds did not follow each other in time) and every empty second.
fn path(s: &Series, slot: usize, x: &Linear, y: &Log, pick: usize) -> String {
    let mut d = String::new();
    for (r, round) in s.rounds.iter().enumerate() {
        let mut pen_down = false;
        for (i, second) in round.iter().enumerate() {
            let Some(figures) = second else {
                pen_down = false;
                continue;
            };
            let value = if pick == 1 { figures.1 } else { figures.0 };
            let px = x.at((r * slot + i) as f64 + 0.5);
            let command = if pen_down { 'L' } else { 'M' };
            let _ = write!(d, "{command}{px:.1} {:.1} ", y.at(value.max(1) as f64));
            pen_down = true;
        }
    }
    d.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_system_has_a_p50_and_a_p99_line_per_workload() {
        let report = crate::export::fixture::report();
        let svg = render_timeline(&report).unwrap();
        assert_eq!(svg.matches("<path data-system=").count(), 2 * 8);
        assert_eq!(svg.matches(">round 1</text>").count(), 3);
        assert_eq!(svg.matches(">round 5</text>").count(), 3);
        // Every round starts a new segment: five moves per line.
        let first = svg.split("<path data-system=").nth(1).unwrap();
        let d = first.split("d=\"").nth(1).unwrap();
        assert_eq!(d[..d.find('"').unwrap()].matches('M').count(), 5);
        assert!(render_timeline(&crate::report::tests::sample()).is_none());
    }
}
