//! The files a run leaves beside `results.json`, one exporter per format. Every exporter is a
//! pure function of the [`Report`]; [`crate::writer::ResultsDir::write_exports`] does the I/O,
//! once per file.

pub mod csv;
#[cfg(test)]
pub(crate) mod fixture;
pub mod hdr;
pub mod html;
pub mod names;

use crate::report::{self, Table};
use crate::results::Report;
use crate::verdict::Judgement;

/// One file of the results folder: its name and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    pub file: String,
    pub bytes: Vec<u8>,
}

impl Export {
    pub fn new(file: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Export {
        Export {
            file: file.into(),
            bytes: bytes.into(),
        }
    }
}

/// One output format: the files it makes of a report (none when it has nothing to show).
pub trait Exporter {
    fn export(&self, report: &Report) -> Vec<Export>;
}

/// How a tool reads its own report: its judgement, terminal summary, Markdown and charts. The
/// defaults are the seed-style tables every tool shares; a tool overrides what it shows beyond.
pub trait ToolReport: Sync {
    /// The verdicts of the finished report, and the pairs without one (DESIGN rule 11).
    fn judge(&self, report: &Report) -> Judgement {
        report::judge(report)
    }

    /// The tables of `report.md` and `report.html`, in order (the default: throughput,
    /// latency and the verdicts against the reference).
    fn tables(&self, report: &Report) -> Vec<Table> {
        report::shared_tables(report)
    }

    /// The summary printed on stdout at the end of a run.
    fn terminal(&self, report: &Report) -> String {
        report::render_terminal(report)
    }

    /// `report.md`: by default [`ToolReport::tables`] in the shared frame.
    fn markdown(&self, report: &Report) -> String {
        report::markdown_frame(report, &self.tables(report), "")
    }

    /// SVG charts as (file name, SVG text).
    fn charts(&self, report: &Report) -> Vec<(String, String)> {
        report::render_svg_charts(report)
    }

    /// `merge`: the tool's own cell figures (`extra`) of the merged run from every worker's
    /// part (`parts`, in worker-index order, each cell at the same place as in `merged`). The
    /// default keeps worker 0's, as `merged` already has them. An `Err` (one line: which cell,
    /// which worker, what cannot be added up) refuses the merge.
    fn merge_extras(&self, _parts: &[&Report], _merged: &mut Report) -> Result<(), String> {
        Ok(())
    }

    /// `k8s-manifest`: the tool's own worker-mode check of the arguments every worker gets
    /// (the benchmark's, then the worker flags the manifest sets), as its run checks them
    /// before anything is touched; `Err` is the one line the run would refuse with. The
    /// default accepts (a tool whose runs need no check beyond `WORKER_TOOLS`).
    fn refuse_workers(&self, _worker_args: &[String]) -> Result<(), String> {
        Ok(())
    }
}

/// A tool's report with its worker-mode check ([`ToolReport::refuse_workers`]): what a tool
/// whose runs refuse some worker arguments hands its tooling subcommands.
#[derive(Clone, Copy)]
pub struct WithWorkerCheck<'a> {
    pub report: &'a dyn ToolReport,
    /// Parses the worker's arguments as the tool does and runs the run's own check.
    pub check: fn(&[String]) -> Result<(), String>,
}

impl ToolReport for WithWorkerCheck<'_> {
    fn judge(&self, report: &Report) -> Judgement {
        self.report.judge(report)
    }

    fn tables(&self, report: &Report) -> Vec<Table> {
        self.report.tables(report)
    }

    fn terminal(&self, report: &Report) -> String {
        self.report.terminal(report)
    }

    fn markdown(&self, report: &Report) -> String {
        self.report.markdown(report)
    }

    fn charts(&self, report: &Report) -> Vec<(String, String)> {
        self.report.charts(report)
    }

    fn merge_extras(&self, parts: &[&Report], merged: &mut Report) -> Result<(), String> {
        self.report.merge_extras(parts, merged)
    }

    fn refuse_workers(&self, worker_args: &[String]) -> Result<(), String> {
        (self.check)(worker_args)
    }
}

/// Parses `args` (without the program's name) as tool `name`'s options `P`; a parse error
/// is its first line, as a run would print it.
fn parse_worker_args<P: clap::Parser>(name: &str, args: &[String]) -> Result<P, String> {
    P::try_parse_from(std::iter::once(name.to_owned()).chain(args.iter().cloned())).map_err(|e| {
        let text = e.to_string();
        text.lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_owned()
    })
}

/// A tool's [`WithWorkerCheck::check`]: parses `args` as tool `name`'s options `P` and runs
/// the run's own `check` on them; its error is the whole chain on one line.
pub fn check_worker_args<P: clap::Parser, T>(
    name: &str,
    args: &[String],
    check: impl FnOnce(P) -> anyhow::Result<T>,
) -> Result<(), String> {
    check(parse_worker_args(name, args)?)
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

/// The tables every tool shares and nothing more.
#[derive(Debug, Clone, Copy, Default)]
pub struct SharedReport;

impl ToolReport for SharedReport {}

/// The report of a tool with several suites (sql-bench's `crud` and `app`), each rendered by its
/// own [`ToolReport`] chosen by the run's `suite`; a suite it does not list gets the shared
/// tables. What the `report` subcommand renders with, since it learns the suite from the file.
#[derive(Clone, Copy)]
pub struct BySuite<'a>(pub &'a [(&'a str, &'a dyn ToolReport)]);

impl BySuite<'_> {
    fn of(&self, report: &Report) -> &dyn ToolReport {
        self.0
            .iter()
            .find(|(suite, _)| *suite == report.suite)
            .map_or(&SharedReport, |(_, tool)| *tool)
    }
}

impl ToolReport for BySuite<'_> {
    fn judge(&self, report: &Report) -> Judgement {
        self.of(report).judge(report)
    }

    fn tables(&self, report: &Report) -> Vec<Table> {
        self.of(report).tables(report)
    }

    fn terminal(&self, report: &Report) -> String {
        self.of(report).terminal(report)
    }

    fn markdown(&self, report: &Report) -> String {
        self.of(report).markdown(report)
    }

    fn charts(&self, report: &Report) -> Vec<(String, String)> {
        self.of(report).charts(report)
    }

    fn merge_extras(&self, parts: &[&Report], merged: &mut Report) -> Result<(), String> {
        self.of(merged).merge_extras(parts, merged)
    }
}

/// `results.json`: the report itself.
pub struct Json;

impl Exporter for Json {
    fn export(&self, report: &Report) -> Vec<Export> {
        vec![Export::new("results.json", results_json(report))]
    }
}

/// The bytes of `results.json`.
pub fn results_json(report: &Report) -> Vec<u8> {
    serde_json::to_vec_pretty(report).expect("the report model always serializes")
}

/// `report.md`, as the tool writes it.
pub struct Markdown<'a>(pub &'a dyn ToolReport);

impl Exporter for Markdown<'_> {
    fn export(&self, report: &Report) -> Vec<Export> {
        vec![Export::new("report.md", self.0.markdown(report))]
    }
}

/// The tool's SVG charts.
pub struct Charts<'a>(pub &'a dyn ToolReport);

impl Exporter for Charts<'_> {
    fn export(&self, report: &Report) -> Vec<Export> {
        self.0
            .charts(report)
            .into_iter()
            .map(|(file, svg)| Export::new(file, svg))
            .collect()
    }
}

/// `latency-spectrum.svg` and `latency-over-time.svg`, from the cells' HDR histograms (every
/// tool's run has them; a tool's own charts come through [`ToolReport::charts`]).
pub struct LatencyCharts;

impl Exporter for LatencyCharts {
    fn export(&self, report: &Report) -> Vec<Export> {
        let spectrum = report::render_spectrum(report).map(|s| ("latency-spectrum.svg", s));
        let timeline = report::render_timeline(report).map(|s| ("latency-over-time.svg", s));
        spectrum
            .into_iter()
            .chain(timeline)
            .map(|(file, svg)| Export::new(file, svg))
            .collect()
    }
}

/// Every format a finished run is written in, for a tool's report.
pub fn exporters(tool: &dyn ToolReport) -> Vec<Box<dyn Exporter + '_>> {
    vec![
        Box::new(Json),
        Box::new(Markdown(tool)),
        Box::new(Charts(tool)),
        Box::new(LatencyCharts),
        Box::new(csv::Csv),
        Box::new(hdr::Hdr),
        Box::new(html::Html(tool)),
    ]
}

/// Every file of every format, in order, with a clash of file names refused: no file is
/// written twice.
pub fn export_all(report: &Report, exporters: &[Box<dyn Exporter + '_>]) -> Vec<Export> {
    let mut files: Vec<Export> = Vec::new();
    for exporter in exporters {
        for export in exporter.export(report) {
            assert!(
                !files.iter().any(|f| f.file == export.file),
                "two exporters both write {}",
                export.file
            );
            files.push(export);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Own;

    impl ToolReport for Own {
        fn markdown(&self, _: &Report) -> String {
            "# own\n".into()
        }
    }

    #[test]
    fn a_tool_replaces_the_markdown_and_keeps_the_rest() {
        let report = crate::report::tests::sample();
        let files = export_all(&report, &exporters(&Own));
        let names: Vec<&str> = files.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(
            names,
            [
                "results.json",
                "report.md",
                "throughput.svg",
                "results.csv",
                "report.html"
            ],
            "the sample has no histograms: no HDR files"
        );
        assert_eq!(files[1].bytes, b"# own\n");
        let back: Report = serde_json::from_slice(&files[0].bytes).unwrap();
        assert_eq!(back.cells.len(), report.cells.len());
    }

    #[test]
    fn by_suite_renders_each_run_with_its_suites_report() {
        let mut report = crate::report::tests::sample();
        let tools = BySuite(&[("own", &Own)]);
        report.suite = "own".into();
        assert_eq!(tools.markdown(&report), "# own\n");
        report.suite = "other".into();
        assert_eq!(tools.markdown(&report), SharedReport.markdown(&report));
    }

    #[test]
    #[should_panic(expected = "two exporters both write results.json")]
    fn a_file_written_twice_is_refused() {
        let report = crate::report::tests::sample();
        let twice: Vec<Box<dyn Exporter>> = vec![Box::new(Json), Box::new(Json)];
        export_all(&report, &twice);
    }
}
