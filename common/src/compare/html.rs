//! `compare.html`: the comparison in one self-contained page — for each metric a forest plot of
//! every cell's candidate/baseline ratio with its interval against the parity band (log
//! scale), the table, the differences between the runs, the lone cells and the regressions.

use std::fmt::Write as _;

use super::render::{caveat, html_sections, table};
use super::{CellComparison, Comparison};
use crate::export::html::{figure, list, page, table as html_table};
use crate::report::axis::open_chart;
use crate::report::chart::{self, escape};
use crate::results::{Metric, Verdict, VerdictKind};
use crate::verdict;

const WIDTH: f64 = 900.0;
const LABEL_W: f64 = 220.0;
const PLOT_W: f64 = 430.0;
const ROW_H: f64 = 22.0;
const TOP: f64 = 74.0;

fn verdict_color(kind: VerdictKind) -> &'static str {
    match kind {
        VerdictKind::Faster => "#1b7f3b",
        VerdictKind::Slower => "#b3261e",
        VerdictKind::Parity => "#777777",
        VerdictKind::Inconclusive => "#c58b00",
    }
}

/// Ratios worth a grid line.
const TICKS: [f64; 17] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
];

/// The forest plot of one metric, or `None` when no cell has a verdict on it.
pub fn forest(c: &Comparison, metric: Metric) -> Option<String> {
    let rows: Vec<(&CellComparison, &Verdict)> = c
        .cells
        .iter()
        .filter_map(|cell| {
            let m = cell.metrics.iter().find(|m| m.metric == metric)?;
            Some((cell, m.verdict.as_ref()?))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let band = (1.0 / (1.0 + c.threshold), 1.0 + c.threshold);
    let lo = rows
        .iter()
        .map(|(_, v)| v.interval[0])
        .fold(band.0, f64::min)
        / 1.15;
    let hi = rows
        .iter()
        .map(|(_, v)| v.interval[1])
        .fold(band.1, f64::max)
        * 1.15;
    let (lo, hi) = (lo.max(1e-6).log10(), hi.log10());
    let x = |ratio: f64| LABEL_W + (ratio.max(1e-6).log10() - lo) / (hi - lo) * PLOT_W;
    let mut systems: Vec<&str> = Vec::new();
    for (cell, _) in &rows {
        if !systems.contains(&cell.system.as_str()) {
            systems.push(&cell.system);
        }
    }
    let bottom = TOP + ROW_H * rows.len() as f64;
    let name = metric.as_str().replace('_', " ");
    let direction = if metric == Metric::Throughput {
        "right of 1 is faster"
    } else {
        "left of 1 is faster"
    };
    let mut svg = String::new();
    open_chart(
        &mut svg,
        (WIDTH, bottom + 30.0),
        &format!("compare-{}", metric.as_str().replace('_', "-")),
        &systems,
        &format!("{name}: candidate / baseline"),
        &format!(
            "Dot: ratio of medians; line: its interval; grey band: parity (±{:.0}%); {direction}; log scale.",
            c.threshold * 100.0
        ),
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#eee"/>"##,
        x(band.0),
        TOP - 6.0,
        x(band.1) - x(band.0),
        bottom - TOP + 6.0
    );
    // 1× always; the others where they leave room for their labels.
    let mut drawn: Vec<f64> = vec![x(1.0)];
    for tick in TICKS
        .into_iter()
        .filter(|t| t.log10() >= lo && t.log10() <= hi)
    {
        let px = x(tick);
        if tick != 1.0 && drawn.iter().any(|d| (d - px).abs() < 36.0) {
            continue;
        }
        drawn.push(px);
        let stroke = if tick == 1.0 { "#333" } else { "#ddd" };
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{bottom:.1}" stroke="{stroke}"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#555">{tick}×</text>"##,
            TOP - 6.0,
            bottom + 16.0
        );
    }
    for (i, (cell, v)) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64 + ROW_H / 2.0 - 4.0;
        let color = verdict_color(v.verdict);
        let system = escape(&cell.system);
        let described = escape(&verdict::describe(v));
        let _ = writeln!(
            svg,
            r#"<text data-system="{system}" x="{:.1}" y="{:.1}" text-anchor="end">{} · {system}</text>
<line data-system="{system}" x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2.5"/>
<circle data-system="{system}" cx="{:.1}" cy="{y:.1}" r="4.5" fill="{color}"><title>{} · {system}: {described}</title></circle>
<text data-system="{system}" x="{:.1}" y="{:.1}" fill="{color}">{described}</text>"#,
            LABEL_W - 10.0,
            y + 4.0,
            escape(&cell.workload),
            x(v.interval[0]),
            x(v.interval[1]).max(x(v.interval[0]) + 1.0),
            x(v.ratio),
            escape(&cell.workload),
            LABEL_W + PLOT_W + 12.0,
            y + 4.0
        );
    }
    chart::close(&mut svg);
    Some(svg)
}

/// The page.
pub fn render_html(c: &Comparison) -> String {
    let title = format!(
        "{} compare — {} · {}",
        c.tool, c.candidate.suite, c.candidate.section
    );
    let mut body = format!("<h1>{}</h1>\n", escape(&title));
    let sections = html_sections(c);
    body.push_str(&list(&sections[0].1));
    if let Some(label) = caveat(c) {
        let _ = writeln!(
            body,
            "<div class=\"caveat\"><strong>{}</strong> {}",
            escape(&label),
            if c.allowed {
                "These runs differ in what makes them comparable; they were compared because --allow-different-environment was given."
            } else {
                "These runs were measured on different machines: their figures are side by side, and no verdict spans them."
            }
        );
        body.push_str(&list(
            &c.differences
                .iter()
                .map(super::Difference::line)
                .collect::<Vec<_>>(),
        ));
        body.push_str("</div>\n");
    }
    body.push_str("<h2>Ratios</h2>\n");
    for metric in Metric::ALL {
        if let Some(svg) = forest(c, metric) {
            body.push_str(&figure(&svg));
        }
    }
    body.push_str(&html_table(&table(c)));
    for (heading, lines) in sections.iter().skip(1) {
        if heading.starts_with("The runs differ") {
            continue;
        }
        let _ = writeln!(body, "<h2>{}</h2>", escape(heading));
        body.push_str(&list(lines));
    }
    body.push_str(
        "<footer>Written by fairbench compare. This page is self-contained: it loads nothing from the network.</footer>\n",
    );
    page(&title, &body)
}
