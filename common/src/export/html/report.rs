//! `report.html`: the run in one page — the charts every run has (throughput per round, the
//! latency spectrum, latency over time), the tool's own charts, the same tables as
//! `report.md`, the cells without a figure, each system with its verified settings, the
//! environment, the notes and the files beside it.

use std::fmt::Write as _;

use super::{figure, list, page, table};
use crate::export::{Export, Exporter, ToolReport};
use crate::report::chart::escape;
use crate::report::{self, Table};
use crate::results::Report;

/// `report.html`, with the tool's tables and charts.
pub struct Html<'a>(pub &'a dyn ToolReport);

impl Exporter for Html<'_> {
    fn export(&self, report: &Report) -> Vec<Export> {
        vec![Export::new("report.html", render_html(report, self.0))]
    }
}

/// The page of `report` as `tool` renders its tables and charts.
pub fn render_html(report: &Report, tool: &dyn ToolReport) -> String {
    let title = format!("{} {} · {}", report.tool, report.suite, report.section);
    let mut body = header(report, &title);
    body.push_str(&charts(report, tool));
    body.push_str("<h2 id=\"results\">Results</h2>\n");
    for t in tool.tables(report) {
        body.push_str(&table(&t));
    }
    let problems = report::problems(report);
    if !problems.is_empty() {
        body.push_str("<h3>Cells without a figure</h3>\n");
        body.push_str(&list(&problems));
    }
    body.push_str(&systems(report));
    body.push_str("<h2 id=\"environment\">Environment</h2>\n");
    body.push_str(&list(&report::environment_lines(report)));
    if !report.notes.is_empty() {
        body.push_str("<h2 id=\"notes\">What this run does not establish, and other notes</h2>\n");
        body.push_str(&list(&report.notes));
    }
    body.push_str(FILES);
    page(&title, &body)
}

fn header(report: &Report, title: &str) -> String {
    let finished = report
        .finished_at
        .as_deref()
        .map_or(" (not finished)".to_owned(), |f| format!(", finished {f}"));
    let mut html = String::new();
    let _ = writeln!(html, "<h1>{}</h1>", escape(title));
    let _ = writeln!(
        html,
        "<p class=\"run\">Run <code>{}</code>, started {}{}; {} {} (commit {}).</p>",
        escape(&report.run_id),
        escape(&report.started_at),
        escape(&finished),
        escape(&report.tool),
        escape(&report.tool_version),
        escape(report.git_commit.as_deref().unwrap_or("unknown"))
    );
    let _ = writeln!(
        html,
        "<p class=\"method\">{}</p>",
        escape(&report::method_line(report))
    );
    html.push_str(
        "<nav><a href=\"#charts\">Charts</a><a href=\"#results\">Results</a>\
         <a href=\"#systems\">Systems</a><a href=\"#environment\">Environment</a>\
         <a href=\"#files\">Files</a></nav>\n",
    );
    html
}

/// Common's charts, then the tool's own (its copy of `throughput.svg` is common's, drawn once).
fn charts(report: &Report, tool: &dyn ToolReport) -> String {
    let mut html = String::from("<h2 id=\"charts\">Charts</h2>\n");
    let common = [
        report::render_throughput(report),
        report::render_spectrum(report),
        report::render_timeline(report),
    ];
    let mut any = false;
    for svg in common.into_iter().flatten() {
        html.push_str(&figure(&svg));
        any = true;
    }
    for (file, svg) in tool.charts(report) {
        if file == "throughput.svg" {
            continue;
        }
        html.push_str(&figure(&svg));
        let _ = writeln!(
            html,
            "<p><small>Also in <a href=\"{0}\">{0}</a>.</small></p>",
            escape(&file)
        );
        any = true;
    }
    if !any {
        html.push_str("<p>No cell has a figure to chart.</p>\n");
    }
    html
}

/// Each system as it described itself, and every setting read back from it.
fn systems(report: &Report) -> String {
    let mut html = String::from("<h2 id=\"systems\">Systems</h2>\n");
    html.push_str(&table(&report::systems_table(report)));
    let about = Table {
        title: "Where each system runs".into(),
        header: [
            "system",
            "kind",
            "URL",
            "location",
            "labels",
            "not measured",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows: report
            .systems
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    s.kind.clone(),
                    s.url_redacted.clone(),
                    serde_json::to_value(s.location)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    s.labels.join(", "),
                    s.not_measured.join("; "),
                ]
            })
            .collect(),
        numeric: false,
    };
    html.push_str(&table(&about));
    let verified = Table {
        title: "Verified settings (read back from each system)".into(),
        header: ["system", "setting", "value"].map(str::to_owned).to_vec(),
        rows: report
            .systems
            .iter()
            .flat_map(|s| {
                s.verified
                    .iter()
                    .map(|(k, v)| vec![s.name.clone(), k.clone(), v.clone()])
            })
            .collect(),
        numeric: false,
    };
    if !verified.rows.is_empty() {
        html.push_str(&table(&verified));
    }
    html
}

const FILES: &str = "<h2 id=\"files\">Files beside this page</h2>\n<ul class=\"plain\">\n\
<li><a href=\"results.json\">results.json</a>: the whole record (versioned schema), what every other file is made from.</li>\n\
<li><a href=\"results.csv\">results.csv</a>: one row per cell, every figure, the unit in each column's name.</li>\n\
<li><a href=\"report.md\">report.md</a>: these tables in Markdown.</li>\n\
<li><code>hdr/</code>: per cell, <code>.hgrm</code> (HdrHistogram's percentile distribution, for its plotter) \
and <code>.hlog</code> (an HdrHistogram interval log of 1 s intervals, rounds end to end).</li>\n\
<li><code>*.svg</code>: each chart above on its own.</li>\n</ul>\n\
<footer>Written by fairbench. This page is self-contained: it loads nothing from the network.</footer>\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::SharedReport;

    #[test]
    fn the_page_has_every_chart_table_and_setting() {
        let report = crate::export::fixture::report();
        let html = render_html(&report, &SharedReport);
        for chart in ["throughput-rounds", "latency-spectrum", "latency-over-time"] {
            assert_eq!(
                html.matches(&format!("data-chart=\"{chart}\"")).count(),
                1,
                "{chart}"
            );
        }
        for t in SharedReport.tables(&report) {
            assert!(html.contains(&escape(&t.title)), "{}", t.title);
        }
        assert!(html.contains("<td>synchronous_commit</td><td>on</td>"));
        assert!(html.contains("Synthetic CPU"));
        assert!(html.contains("mixed 16c · mariadb: invalid"));
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    }

    struct Own;

    impl ToolReport for Own {
        fn charts(&self, _: &Report) -> Vec<(String, String)> {
            vec![(
                "curve.svg".into(),
                "<?xml version=\"1.0\"?>\n<svg data-chart=\"curve\"></svg>".into(),
            )]
        }
    }

    #[test]
    fn a_tools_own_charts_are_embedded() {
        let html = render_html(&crate::export::fixture::report(), &Own);
        assert!(html.contains("<figure>\n<svg data-chart=\"curve\"></svg></figure>"));
        assert!(html.contains("href=\"curve.svg\""));
        assert!(!html.contains("<?xml"));
    }
}
