//! Scales of the SVG charts: linear (with round-number ticks) and logarithmic (by decades),
//! each mapping a value to a pixel position; and the `<svg>` element every common chart opens
//! with, naming the chart and the systems it draws (`data-chart`, `data-systems`) so a
//! browser test can find every system's marks.

use std::fmt::Write as _;

use super::chart::escape;

/// A linear scale from `lo..hi` onto `px0..px1` (which may run downwards, for a y axis).
#[derive(Debug, Clone, Copy)]
pub struct Linear {
    pub lo: f64,
    pub hi: f64,
    pub px0: f64,
    pub px1: f64,
}

impl Linear {
    /// From zero to a round number at or above `max`, with its tick step.
    pub fn from_zero(max: f64, px0: f64, px1: f64) -> (Linear, f64) {
        let step = nice_step(max.max(1e-9) / 4.0);
        let hi = (max / step).ceil().max(1.0) * step;
        (
            Linear {
                lo: 0.0,
                hi,
                px0,
                px1,
            },
            step,
        )
    }

    pub fn at(&self, value: f64) -> f64 {
        let span = (self.hi - self.lo).max(1e-12);
        self.px0 + (value - self.lo) / span * (self.px1 - self.px0)
    }

    /// The multiples of `step` from `lo` to `hi`.
    pub fn ticks(&self, step: f64) -> Vec<f64> {
        let n = ((self.hi - self.lo) / step).round() as usize;
        (0..=n).map(|i| self.lo + step * i as f64).collect()
    }
}

/// 1, 2 or 5 × a power of ten, the smallest at or above `raw`.
pub fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

/// A tick label: `0`, `500`, `2k`, `1.5M`, `0.25`.
pub fn compact(value: f64) -> String {
    let (scaled, suffix) = match value.abs() {
        v if v >= 1e9 => (value / 1e9, "G"),
        v if v >= 1e6 => (value / 1e6, "M"),
        v if v >= 1e3 => (value / 1e3, "k"),
        _ => (value, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// A decade's label: `100 µs`, `1 ms`, `10 s` (no trailing zeros).
pub fn decade_label(ns: f64) -> String {
    let text = crate::human::format_latency_ns(ns.round() as u64);
    match text.split_once(' ') {
        Some((figure, unit)) if figure.contains('.') => {
            format!(
                "{} {unit}",
                figure.trim_end_matches('0').trim_end_matches('.')
            )
        }
        _ => text,
    }
}

/// A base-10 logarithmic scale over whole decades `10^lo..10^hi`.
#[derive(Debug, Clone, Copy)]
pub struct Log {
    pub lo: f64,
    pub hi: f64,
    pub px0: f64,
    pub px1: f64,
}

impl Log {
    /// The decades that hold every value from `min` to `max` (positive).
    pub fn covering(min: f64, max: f64, px0: f64, px1: f64) -> Log {
        let (lo, hi) = super::chart::decades(min, max);
        Log { lo, hi, px0, px1 }
    }

    pub fn at(&self, value: f64) -> f64 {
        let position = (value.max(1e-12).log10() - self.lo) / (self.hi - self.lo);
        self.px0 + position * (self.px1 - self.px0)
    }

    /// Every decade boundary, as values.
    pub fn decades(&self) -> Vec<f64> {
        (self.lo as i32..=self.hi as i32)
            .map(|e| 10f64.powi(e))
            .collect()
    }

    /// 2× and 5× each decade, for unlabelled grid lines.
    pub fn minor(&self) -> Vec<f64> {
        (self.lo as i32..self.hi as i32)
            .flat_map(|e| [2.0, 5.0].map(|m| m * 10f64.powi(e)))
            .collect()
    }
}

/// The rectangle a chart plots in, in pixels, and what is drawn on its edges: its border, the
/// grid lines with their tick labels, and the axes' titles.
#[derive(Debug, Clone, Copy)]
pub struct PlotArea {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
}

impl PlotArea {
    pub fn right(&self) -> f64 {
        self.left + self.width
    }

    pub fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// Its border.
    pub fn border(&self, svg: &mut String) {
        let _ = writeln!(
            svg,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
            self.left, self.top, self.width, self.height
        );
    }

    /// A vertical grid line at `px` in `stroke`, with `label` under the plot.
    pub fn x_tick(&self, svg: &mut String, px: f64, label: &str, stroke: &str) {
        let _ = writeln!(
            svg,
            r#"<line x1="{px:.1}" x2="{px:.1}" y1="{}" y2="{:.1}" stroke="{stroke}"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            self.top,
            self.bottom(),
            self.bottom() + 16.0,
        );
    }

    /// A horizontal grid line at `py` in `stroke`, with `label` left of the plot.
    pub fn y_tick(&self, svg: &mut String, py: f64, label: &str, stroke: &str) {
        let _ = writeln!(
            svg,
            r#"<line x1="{}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" stroke="{stroke}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
            self.left,
            self.right(),
            self.left - 6.0,
            py + 4.0,
        );
    }

    /// The axes' titles: `x` centred under the tick labels, `y` turned up along the left edge.
    pub fn titles(&self, svg: &mut String, x: &str, y: &str) {
        let (mid_x, mid_y) = (self.left + self.width / 2.0, self.top + self.height / 2.0);
        let _ = writeln!(
            svg,
            r#"<text x="{mid_x:.1}" y="{:.1}" text-anchor="middle">{x}</text><text x="14" y="{mid_y:.1}" transform="rotate(-90 14 {mid_y:.1})" text-anchor="middle">{y}</text>"#,
            self.bottom() + 36.0
        );
    }
}

/// Opens a common chart: its size (scaled to fit where it is shown), its name and the
/// systems it has marks for, then its title and, below it, a line saying how to read it.
pub fn open_chart(
    svg: &mut String,
    (width, height): (f64, f64),
    chart: &str,
    systems: &[&str],
    title: &str,
    how_to_read: &str,
) {
    let systems = serde_json::to_string(systems).expect("names serialize");
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-family="sans-serif" font-size="12" data-chart="{chart}" data-systems="{}" role="img" aria-label="{}">"#,
        escape(&systems),
        escape(title)
    );
    let _ = writeln!(
        svg,
        r##"<title>{}</title><text x="8" y="20" font-size="15" font-weight="bold">{}</text><text x="8" y="38" fill="#555">{}</text>"##,
        escape(title),
        escape(title),
        escape(how_to_read)
    );
}

/// A legend entry for each system (`data-legend`, not a mark), in one row from `(x, y)`.
pub fn legend(svg: &mut String, entries: &[(&str, &str)], x: f64, y: f64) {
    let mut at = x;
    for (name, color) in entries {
        let _ = writeln!(
            svg,
            r#"<g class="legend" data-legend="{name}"><rect x="{at:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}">{name}</text></g>"#,
            y - 10.0,
            at + 16.0,
            y,
            name = escape(name)
        );
        at += 28.0 + 7.0 * name.chars().count() as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_map_and_tick_in_round_numbers() {
        assert_eq!(nice_step(0.23), 0.5);
        assert_eq!(
            [100.0, 1e5, 1e6, 1e7].map(decade_label),
            ["100 ns", "100 µs", "1 ms", "10 ms"]
        );
        assert_eq!(
            [0.0, 500.0, 2_000.0, 1_500_000.0, 0.25].map(compact),
            ["0", "500", "2k", "1.5M", "0.25"]
        );
        assert_eq!(nice_step(1_017_878.0 / 4.0), 500_000.0);
        assert_eq!(nice_step(3.0), 5.0);
        let (x, step) = Linear::from_zero(4_386.0, 100.0, 500.0);
        assert_eq!((x.hi, step), (6_000.0, 2_000.0));
        assert_eq!(x.ticks(step), vec![0.0, 2_000.0, 4_000.0, 6_000.0]);
        let (x, step) = Linear::from_zero(4_000.0, 100.0, 500.0);
        assert_eq!((x.hi, step, x.at(2_500.0)), (4_000.0, 1_000.0, 350.0));
        let y = Log::covering(14_000.0, 2_000_000.0, 200.0, 0.0);
        assert_eq!((y.lo, y.hi), (4.0, 7.0));
        assert!((y.at(100_000.0) - 133.333).abs() < 0.01);
        assert_eq!(y.decades().len(), 4);
        assert_eq!(y.minor().len(), 6);
    }

    #[test]
    fn a_plot_area_draws_its_ticks_and_titles_outside_its_edges() {
        let plot = PlotArea {
            left: 70.0,
            top: 60.0,
            width: 520.0,
            height: 320.0,
        };
        let mut svg = String::new();
        plot.x_tick(&mut svg, 100.0, "10", "#eee");
        plot.y_tick(&mut svg, 200.0, "1k", "#ddd");
        plot.titles(&mut svg, "offered", "delivered");
        let lines: Vec<&str> = svg.lines().collect();
        assert!(lines[0].contains(r#"y1="60" y2="380.0""#), "{svg}");
        assert!(lines[0].contains(r#"<text x="100.0" y="396.0""#), "{svg}");
        assert!(
            lines[1].contains(r#"x1="70" x2="590.0" y1="200.0""#),
            "{svg}"
        );
        assert!(
            lines[1].contains(r#"<text x="64.0" y="204.0" text-anchor="end">1k"#),
            "{svg}"
        );
        assert!(lines[2].contains(r#"<text x="330.0" y="416.0""#), "{svg}");
    }
}
