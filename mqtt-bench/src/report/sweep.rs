//! The QoS 0 1→1 sweep, from each broker's last measured round: its table (offered, accepted,
//! delivered, loss, the step's verdict) and `delivered-vs-offered.svg`, delivered against
//! offered rate on log–log axes with the line where everything offered arrives, so where a
//! broker bends away from it (its limit) is seen at a glance.

use std::fmt::Write as _;

use common::human::format_rate;
use common::report::Table;
use common::report::axis::{Log, PlotArea, compact, legend, open_chart};
use common::report::chart::{close, escape, polyline, system_color};
use common::results::{Cell, Report};
use serde_json::Value;

const PLOT: PlotArea = PlotArea {
    left: 70.0,
    top: 60.0,
    width: 520.0,
    height: 320.0,
};

/// One step of a sweep: offered and delivered msg/s, and the step's verdict (`ok`, …).
type Step = (f64, f64, String);

/// The sweep cells with the steps of their last measured round.
fn sweeps(report: &Report) -> Vec<(&Cell, Vec<Value>)> {
    report
        .cells
        .iter()
        .filter(|c| c.workload.starts_with("qos0 delivered"))
        .filter_map(|cell| {
            let last = cell.extra.get("rounds")?.as_array()?.last()?;
            Some((cell, last["steps"].as_array()?.clone()))
        })
        .collect()
}

/// The QoS 0 sweep of each broker's last measured round: offered, accepted, delivered, loss.
pub fn sweep_table(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for cell in report
        .cells
        .iter()
        .filter(|c| c.workload.starts_with("qos0 delivered"))
    {
        let Some(last) = cell
            .extra
            .get("rounds")
            .and_then(|r| r.as_array()?.last().cloned())
        else {
            continue;
        };
        for step in last["steps"].as_array().into_iter().flatten() {
            let rate = |key: &str| step[key].as_f64().map_or("–".into(), format_rate);
            let loss = step["delivery"]["lost"].as_f64().unwrap_or(0.0)
                / step["delivery"]["sent"].as_f64().unwrap_or(0.0).max(1.0);
            rows.push(vec![
                cell.system.clone(),
                rate("offered_per_s"),
                rate("accepted_per_s"),
                rate("delivered_per_s"),
                format!("{:.3}%", loss * 100.0),
                step["step"].as_str().unwrap_or("").to_owned(),
            ]);
        }
    }
    (!rows.is_empty()).then(|| Table {
        title: "QoS 0 1→1 sweep, last measured round (msg/s; the figure is the highest delivered rate of an ok or broker-limited step)".into(),
        header: ["broker", "offered", "accepted", "delivered", "loss", "step"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: true,
    })
}

/// `delivered-vs-offered.svg`, or `None` when no sweep step has a delivered rate.
pub fn render_sweep_svg(report: &Report) -> Option<String> {
    let sweeps: Vec<(&Cell, Vec<Step>)> = sweeps(report)
        .into_iter()
        .map(|(cell, steps)| {
            let points = steps
                .iter()
                .filter_map(|s| {
                    let offered = s["offered_per_s"].as_f64().filter(|v| *v > 0.0)?;
                    let delivered = s["delivered_per_s"].as_f64()?;
                    Some((
                        offered,
                        delivered,
                        s["step"].as_str().unwrap_or("").to_owned(),
                    ))
                })
                .collect::<Vec<_>>();
            (cell, points)
        })
        .filter(|(_, points)| !points.is_empty())
        .collect();
    if sweeps.is_empty() {
        return None;
    }
    let all = sweeps.iter().flat_map(|(_, p)| p.iter());
    let (lo, hi) = all.fold((f64::INFINITY, 0.0_f64), |(lo, hi), (o, d, _)| {
        (lo.min(*o).min(d.max(1.0)), hi.max(*o).max(*d))
    });
    let x = Log::covering(lo, hi, PLOT.left, PLOT.right());
    let y = Log::covering(lo, hi, PLOT.bottom(), PLOT.top);
    let systems: Vec<&str> = sweeps.iter().map(|(c, _)| c.system.as_str()).collect();
    let mut svg = String::new();
    open_chart(
        &mut svg,
        (PLOT.right() + 40.0, PLOT.bottom() + 70.0),
        "delivered-vs-offered",
        &systems,
        &format!(
            "{} — QoS 0 1→1: delivered against offered rate",
            report.tool
        ),
        "log–log, msg/s; dashed: all offered arrives; hollow: a step past the broker's limit",
    );
    axes(&mut svg, &x, &y);
    let mut entries = Vec::new();
    for (cell, points) in &sweeps {
        let color = system_color(report, &cell.system);
        let system = escape(&cell.system);
        let path = points.iter().map(|(o, d, _)| (x.at(*o), y.at(d.max(1.0))));
        polyline(&mut svg, &system, path, color, "");
        for (offered, delivered, step) in points {
            let fill = if step == "ok" { color } else { "white" };
            let _ = writeln!(
                svg,
                r#"<circle data-system="{system}" cx="{:.1}" cy="{:.1}" r="3.5" fill="{fill}" stroke="{color}" stroke-width="1.5"><title>{system}: offered {}, delivered {} ({})</title></circle>"#,
                x.at(*offered),
                y.at(delivered.max(1.0)),
                format_rate(*offered),
                format_rate(*delivered),
                escape(step)
            );
        }
        entries.push((cell.system.as_str(), color));
    }
    legend(&mut svg, &entries, PLOT.left, PLOT.bottom() + 62.0);
    close(&mut svg);
    Some(svg)
}

fn axes(svg: &mut String, x: &Log, y: &Log) {
    PLOT.border(svg);
    for v in x.decades() {
        PLOT.x_tick(svg, x.at(v), &compact(v), "#eee");
    }
    for v in y.decades() {
        PLOT.y_tick(svg, y.at(v), &compact(v), "#eee");
    }
    let (first, last) = (10f64.powf(x.lo), 10f64.powf(x.hi));
    let _ = writeln!(
        svg,
        r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#777" stroke-dasharray="5 4"/>"##,
        x.at(first),
        y.at(first),
        x.at(last),
        y.at(last)
    );
    PLOT.titles(svg, "offered msg/s", "delivered msg/s");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_a_mark_of_its_broker_and_past_the_limit_is_hollow() {
        let mut report = super::super::tests::sample();
        let svg = render_sweep_svg(&report).expect("a chart");
        assert!(svg.contains(r#"data-chart="delivered-vs-offered""#));
        assert!(svg.contains(r#"data-systems="[&quot;mosquitto&quot;]""#));
        assert_eq!(svg.matches(r#"<circle data-system="mosquitto""#).count(), 2);
        assert_eq!(svg.matches(r#"fill="white""#).count(), 1);
        report
            .cells
            .retain(|c| !c.workload.starts_with("qos0 delivered"));
        assert!(render_sweep_svg(&report).is_none());
    }
}
