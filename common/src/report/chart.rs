//! What every SVG chart shares: the palette (one colour per system, in report order), the
//! workloads and the panels drawn of them (with the systems the legend names), text escaping,
//! the frame (the `<svg>` element and its title) and log-scale decades.

use std::fmt::Write as _;

use crate::results::Report;

/// Tableau 10's first eight: distinct in print and for the common colour blindnesses.
pub const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

/// The colour of the `index`-th series.
pub fn color(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

/// The colour of a system: by its place among the report's systems, so a system keeps its
/// colour in every chart of a run.
pub fn system_color(report: &Report, system: &str) -> &'static str {
    color(
        report
            .systems
            .iter()
            .position(|s| s.name == system)
            .unwrap_or(0),
    )
}

/// Workloads in the order they were first measured.
pub fn workloads(report: &Report) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for cell in &report.cells {
        if !seen.contains(&cell.workload) {
            seen.push(cell.workload.clone());
        }
    }
    seen
}

/// A chart's panels: one per workload with something to draw (`draw` of it not empty), in the
/// report's order, and the report's systems that appear in some panel (`system` of what is
/// drawn), in the report's order too, for the legend.
pub fn panels<T>(
    report: &Report,
    draw: impl Fn(&str) -> Vec<T>,
    system: impl Fn(&T) -> &str,
) -> (Vec<(String, Vec<T>)>, Vec<&str>) {
    let panels: Vec<(String, Vec<T>)> = workloads(report)
        .into_iter()
        .map(|w| {
            let drawn = draw(&w);
            (w, drawn)
        })
        .filter(|(_, drawn)| !drawn.is_empty())
        .collect();
    let systems = report
        .systems
        .iter()
        .map(|s| s.name.as_str())
        .filter(|name| {
            panels
                .iter()
                .any(|(_, drawn)| drawn.iter().any(|d| system(d) == *name))
        })
        .collect();
    (panels, systems)
}

/// Text safe inside an SVG or HTML element or attribute.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Opens an SVG document of `width` × `height` with `title` on its first line.
pub fn open(svg: &mut String, width: f64, height: f64, title: &str) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="8" y="20" font-size="14">{}</text>"#,
        escape(title)
    );
}

/// Closes what [`open`] opened.
pub fn close(svg: &mut String) {
    svg.push_str("</svg>\n");
}

/// A system's line through `points` (pixels), 2 px wide in `color`, marked with its
/// `data-system` (`system` already escaped) for the HTML report's legend; `style` adds
/// attributes (` stroke-dasharray="5,4"`) or is empty.
pub fn polyline(
    svg: &mut String,
    system: &str,
    points: impl IntoIterator<Item = (f64, f64)>,
    color: &str,
    style: &str,
) {
    let points: Vec<String> = points
        .into_iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline data-system="{system}" points="{}" fill="none" stroke="{color}" stroke-width="2"{style}/>"#,
        points.join(" ")
    );
}

/// The whole decades (as powers of ten) that hold every value from `lo` to `hi`: at least one.
pub fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(1e-3).log10().floor();
    (lo, hi.max(1e-3).log10().ceil().max(lo + 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_cover_the_range_and_text_is_escaped() {
        assert_eq!(decades(3.0, 4_386.0), (0.0, 4.0));
        assert_eq!(decades(10.0, 10.0), (1.0, 2.0));
        assert_eq!(escape(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
        let mut svg = String::new();
        open(&mut svg, 10.0, 20.0, "x & y");
        close(&mut svg);
        assert!(svg.contains("x &amp; y") && svg.ends_with("</svg>\n"));
        assert_eq!(color(9), PALETTE[1]);
    }

    #[test]
    fn a_chart_has_a_panel_per_workload_with_something_drawn_and_a_legend_of_who_is_in_one() {
        use crate::testing::{synthetic_cell, synthetic_report, synthetic_system};
        let mut report = synthetic_report("t", "s", "x", serde_json::Value::Null);
        report.systems = ["a", "b", "c"].map(synthetic_system).to_vec();
        for (workload, system) in [("w1", "b"), ("w1", "a"), ("w2", "b"), ("w3", "c")] {
            let cell = synthetic_cell((workload, system, "ops/s"), 1, &[1.0], [1; 5], 1.0);
            report.cells.push(cell);
        }
        // Only a's and c's w1 and w3 cells have something to draw (b's failed, say).
        let drawn = |workload: &str| -> Vec<String> {
            report
                .cells
                .iter()
                .filter(|c| c.workload == workload && c.system != "b")
                .map(|c| c.system.clone())
                .collect()
        };
        let (panels, systems) = panels(&report, drawn, |system| system);
        let workloads: Vec<&str> = panels.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(workloads, ["w1", "w3"]);
        assert_eq!(systems, ["a", "c"], "b is in no panel; the report's order");
    }
}
