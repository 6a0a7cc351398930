//! The subcommands every tool has besides its benchmark: `compare` (two runs, cell by cell)
//! and `report` (re-render every export of a results.json), with their `--help` examples in
//! the tool's own name. A tool flattens [`Tooling`] into its command line and hands a parsed
//! one to [`run_tooling`] with its name and its [`ToolReport`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::compare::CompareArgs;
use crate::exit::Exit;
use crate::export::{ToolReport, export_all, exporters};
use crate::load::load;
use crate::writer::ResultsDir;

/// `report`'s arguments.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ReportArgs {
    /// A results folder or its results.json.
    #[arg(value_name = "RESULTS")]
    pub results: PathBuf,

    /// Write the exports (and a copy of results.json) here instead of beside results.json.
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// The tooling subcommands of every fairbench tool.
#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Tooling {
    /// Compare two runs of this tool cell by cell: ratios with their intervals and verdicts,
    /// cells that appeared, disappeared or changed status; refuses runs that are not comparable.
    Compare(CompareArgs),
    /// Re-render every export (report.md, report.html, results.csv, charts, HDR files) of an
    /// existing results.json: after an upgrade, or for a run copied from another machine.
    Report(ReportArgs),
    /// Merge the results folders of the N workers of one run (`--worker-count`) into one run:
    /// throughput summed per round, HDR histograms added exactly, every export written.
    Merge(crate::scale::merge::MergeArgs),
    /// Print the Kubernetes objects (headless Service, Indexed Job of the workers, merge Job)
    /// that run this tool's arguments on N client machines as one run.
    K8sManifest(crate::scale::manifest::ManifestArgs),
}

/// Runs one tooling subcommand as `tool` (`geo-bench`), rendering with `report`.
pub fn run_tooling(tooling: &Tooling, tool: &str, report: &dyn ToolReport) -> anyhow::Result<Exit> {
    match tooling {
        Tooling::Compare(args) => crate::compare::run(args, tool),
        Tooling::Report(args) => run_report(args, tool, report),
        Tooling::Merge(args) => crate::scale::merge::run(args, tool, report),
        Tooling::K8sManifest(args) => {
            let now = crate::clock::compact(&crate::clock::now_rfc3339()).to_lowercase();
            let default_id = format!("{}-{now}", args.name.as_deref().unwrap_or(tool));
            // The tool's own refusals of worker mode first (they say why a suite cannot be
            // split): pods that would all exit 2 are no run.
            let worker_args = crate::scale::manifest::worker_args(args, tool, &default_id);
            report
                .refuse_workers(&worker_args)
                .map_err(anyhow::Error::msg)?;
            let yaml = crate::scale::manifest::render(args, tool, &default_id)
                .map_err(anyhow::Error::msg)?;
            print!("{yaml}");
            Ok(Exit::AllOk)
        }
    }
}

/// `report`: every export of the run, written into its own folder (results.json itself left
/// as it is) or into `--output` (with a byte-for-byte copy of results.json).
pub fn run_report(
    args: &ReportArgs,
    tool: &str,
    renderer: &dyn ToolReport,
) -> anyhow::Result<Exit> {
    let loaded = load(&args.results, tool)?;
    let (dir, in_place) = match &args.output {
        Some(out) => {
            let same = std::fs::canonicalize(out)
                .ok()
                .zip(std::fs::canonicalize(&loaded.dir).ok())
                .is_some_and(|(a, b)| a == b);
            (out.clone(), same)
        }
        None => (loaded.dir.clone(), true),
    };
    let results = ResultsDir::create(&dir)?;
    for export in export_all(&loaded.report, &exporters(renderer)) {
        // results.json is the input: never rewritten from the model (a newer tool's fields
        // would be lost), copied as it is elsewhere.
        if export.file != "results.json" {
            results.write_atomic(&export.file, &export.bytes)?;
        }
    }
    if !in_place {
        results.write_atomic("results.json", &loaded.bytes)?;
    }
    eprintln!(
        "report: every export of {} written in {}",
        loaded.file.display(),
        dir.display()
    );
    Ok(Exit::AllOk)
}

/// What `main` returns for a tooling subcommand: its exit code, or the error on one line and 2.
pub fn exit(result: anyhow::Result<Exit>) -> ExitCode {
    match result {
        Ok(exit) => exit.into(),
        Err(e) => {
            eprintln!("error: {e:#}");
            Exit::BadInput.into()
        }
    }
}

/// The examples that end `--help` of `compare` and `report`, in `tool`'s name.
pub fn examples(subcommand: &str, tool: &str) -> Option<String> {
    let lines: &[&str] = match subcommand {
        "compare" => &[
            "TOOL compare results/before results/after",
            "    every common cell: ratio, interval, verdict; refused if options, machine or data differ",
            "TOOL compare main/results.json pr/results.json --threshold 3% --fail-on regression",
            "    in CI: exit 1 when a cell got slower beyond 3% with its whole interval",
            "TOOL compare results/before results/after --format md --output compare/",
            "    compare/compare.md for a pull request and compare/compare.html to look at",
        ],
        "report" => &[
            "TOOL report results/before",
            "    re-render report.md, report.html, results.csv, the charts and hdr/ beside results.json",
            "TOOL report copied-from-ci/results.json --output review/",
            "    the same into review/, with a copy of results.json",
        ],
        "merge" => &[
            "TOOL merge --expect-workers 3 --output merged/ worker-0/ worker-1/ worker-2/",
            "    one run of three workers' parts; refused unless they are exactly one run's 0, 1, 2",
        ],
        "k8s-manifest" => &[
            "TOOL k8s-manifest --workers 3 --image registry.example/fairbench:0.1 -- --target URL > run.yaml",
            "    a headless Service, an Indexed Job of 3 workers and a merge Job: kubectl apply -f run.yaml",
        ],
        _ => return None,
    };
    let body: Vec<String> = lines
        .iter()
        .map(|l| format!("  {}", l.replace("TOOL", tool)))
        .collect();
    Some(format!("Examples:\n{}", body.join("\n")))
}

/// `command` with the examples of its `compare` and `report` subcommands in `tool`'s name.
pub fn with_examples(mut command: clap::Command, tool: &str) -> clap::Command {
    for name in ["compare", "report", "merge", "k8s-manifest"] {
        if let Some(text) = examples(name, tool)
            && command.find_subcommand(name).is_some()
        {
            command = command.mut_subcommand(name, |sub| sub.after_help(text));
        }
    }
    command
}

/// What a tool's command line asked for: its benchmark, or one of the tooling subcommands.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation<P> {
    Run(P),
    Tooling(Tooling),
}

/// `P`'s command with `compare` and `report` beside its own subcommands (sql-bench's suites)
/// or, for a tool without any, as the alternative to its flags (`args_conflicts_with_subcommands`:
/// `geo-bench --rounds 3` runs, `geo-bench compare A B` compares, `geo-bench --rounds 3 compare`
/// is refused), with their examples in the command's name. `P` itself is left as it is: its
/// options (what results.json records) gain no field.
pub fn command_with_tooling<P: clap::CommandFactory>() -> clap::Command {
    use clap::Subcommand;
    let base = P::command();
    let alone = !base.has_subcommands();
    let name = base.get_name().to_owned();
    // The tool's own about opens its --help, not the doc comment of the tooling subcommands.
    let (about, long_about) = (base.get_about().cloned(), base.get_long_about().cloned());
    let mut command = Tooling::augment_subcommands(base);
    command = match about {
        Some(about) => command.about(about),
        None => command.about(None::<&'static str>),
    };
    command = match long_about {
        Some(long) => command.long_about(long),
        None => command.long_about(None::<&'static str>),
    };
    if alone {
        command = command.args_conflicts_with_subcommands(true);
    }
    with_examples(command, &name)
}

/// Parses `args` (the program's name first) as `P` or a tooling subcommand.
pub fn try_parse_with_tooling_from<P, I, T>(args: I) -> Result<Invocation<P>, clap::Error>
where
    P: clap::Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    parse_invocation(command_with_tooling::<P>(), args)
}

/// Parses `args` with `command` (made by [`command_with_tooling`]) as `P` or a tooling
/// subcommand.
pub fn parse_invocation<P, I, T>(
    command: clap::Command,
    args: I,
) -> Result<Invocation<P>, clap::Error>
where
    P: clap::Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command.try_get_matches_from(args)?;
    // Every subcommand of `Tooling` (`merge` and `k8s-manifest` too), asked of `Tooling`
    // itself: a list of names here once left `merge` to run the benchmark on its defaults.
    match matches.subcommand_name() {
        Some(name) if <Tooling as clap::Subcommand>::has_subcommand(name) => {
            <Tooling as clap::FromArgMatches>::from_arg_matches(&matches).map(Invocation::Tooling)
        }
        _ => P::from_arg_matches(&matches).map(Invocation::Run),
    }
}

/// `command` with `examples` ending its `--help`, after whatever note it ends with already, and
/// last the example of `compare` every tool has, in the command's name.
pub fn with_run_examples(command: clap::Command, examples: &str) -> clap::Command {
    let examples = format!(
        "{examples}\n  {} compare results/before results/after --fail-on regression\n      \
         every cell of two runs side by side; exit 1 when one got slower (see compare --help)",
        command.get_name()
    );
    let text = match command.get_after_help() {
        Some(note) => format!("{note}\n\n{examples}"),
        None => examples,
    };
    command.after_help(text)
}

/// A tool's whole command line as its `main` parses it (and the book's reference page renders
/// it): `P`'s flags, the tooling subcommands, and `examples` ending `--help`.
pub fn tool_command<P: clap::CommandFactory>(examples: &str) -> clap::Command {
    with_run_examples(command_with_tooling::<P>(), examples)
}

/// The whole `main` of a tool: its benchmark (`run`, stopped by Ctrl-C and ended by
/// [`crate::run::exit`]) or a tooling subcommand rendered with `report` and ended by [`exit`];
/// `examples` end `--help`.
pub fn main<P: clap::Parser + crate::fork::Forking>(
    examples: &str,
    run: impl FnOnce(P, Option<Arc<AtomicBool>>) -> anyhow::Result<crate::run::Summary>,
    report: &dyn ToolReport,
) -> ExitCode {
    let command = tool_command::<P>(examples);
    let name = command.get_name().to_owned();
    match parse_invocation::<P, _, _>(command, std::env::args_os()).unwrap_or_else(|e| e.exit()) {
        Invocation::Run(opts) => {
            crate::run::exit(crate::fork::run_or_fork(opts, report, |o| run(o, None)))
        }
        Invocation::Tooling(tooling) => exit(run_tooling(&tooling, &name, report)),
    }
}

/// Parses the process's arguments as `P`, with the tooling subcommands' examples in the
/// command's name (what a tool's `main` calls instead of `P::parse()`).
pub fn parse<P: clap::Parser>() -> P {
    let command = P::command();
    let name = command.get_name().to_owned();
    let matches = with_examples(command, &name).get_matches();
    P::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::SharedReport;
    use crate::options::CommonOpts;
    use clap::{CommandFactory, Parser};

    /// How a single-command tool (geo-bench) takes them: the benchmark's flags, or a subcommand.
    #[derive(Parser, Debug)]
    #[command(name = "geo-bench", args_conflicts_with_subcommands = true)]
    struct Single {
        #[command(subcommand)]
        tooling: Option<Tooling>,
        #[command(flatten)]
        common: CommonOpts,
    }

    /// How sql-bench, whose suites are subcommands already, takes them.
    #[derive(Parser, Debug)]
    #[command(name = "sql-bench")]
    struct Suites {
        #[command(subcommand)]
        suite: Suite,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Suite {
        Crud(CommonOpts),
        #[command(flatten)]
        Tooling(Tooling),
    }

    /// A tool that says what it measures.
    #[derive(Parser, Debug)]
    #[command(name = "x-bench", about = "Measures x, honestly")]
    struct Described {
        #[command(flatten)]
        common: CommonOpts,
    }

    #[test]
    fn help_opens_with_what_the_tool_measures() {
        let help = command_with_tooling::<Described>()
            .render_help()
            .to_string();
        assert!(help.starts_with("Measures x, honestly"), "{help}");
        assert!(!help.contains("The tooling subcommands of every"), "{help}");
    }

    #[test]
    fn a_single_command_tool_runs_or_compares() {
        let run =
            Single::try_parse_from(["geo-bench", "--target", "sqlite", "--rounds", "3"]).unwrap();
        assert!(run.tooling.is_none() && run.common.rounds == 3);
        let compare =
            Single::try_parse_from(["geo-bench", "compare", "a", "b", "--fail-on", "regression"])
                .unwrap();
        let Some(Tooling::Compare(args)) = compare.tooling else {
            panic!("{compare:?}")
        };
        assert_eq!(args.baseline, PathBuf::from("a"));
        assert_eq!(args.fail_on, Some(crate::compare::FailOn::Regression));
        assert_eq!(args.threshold, 0.05);
        let report =
            Single::try_parse_from(["geo-bench", "report", "dir", "--output", "o"]).unwrap();
        assert!(matches!(report.tooling, Some(Tooling::Report(_))));
        assert!(
            Single::try_parse_from(["geo-bench", "--rounds", "3", "compare", "a", "b"]).is_err()
        );
        let suites =
            Suites::try_parse_from(["sql-bench", "compare", "a", "b", "--format", "md"]).unwrap();
        assert!(matches!(suites.suite, Suite::Tooling(Tooling::Compare(_))));
        assert!(matches!(
            Suites::try_parse_from(["sql-bench", "crud"]).unwrap().suite,
            Suite::Crud(_)
        ));
    }

    /// A tool's own options, untouched: no tooling field.
    #[derive(Parser, Debug, PartialEq)]
    #[command(name = "geo-bench", after_help = "Examples:\n  geo-bench --rounds 3")]
    struct Own {
        #[command(flatten)]
        common: CommonOpts,
    }

    /// A tool whose suites are subcommands, untouched.
    #[derive(Parser, Debug, PartialEq)]
    #[command(name = "sql-bench")]
    struct OwnSuites {
        #[command(subcommand)]
        suite: OwnSuite,
    }

    #[derive(clap::Subcommand, Debug, PartialEq)]
    enum OwnSuite {
        Crud(CommonOpts),
    }

    #[test]
    fn a_tools_own_options_gain_the_tooling_subcommands() {
        let parse = |args: &[&str]| try_parse_with_tooling_from::<Own, _, _>(args.to_vec());
        let Ok(Invocation::Run(run)) = parse(&["geo-bench", "--rounds", "3"]) else {
            panic!("runs")
        };
        assert_eq!(run.common.rounds, 3);
        assert!(matches!(
            parse(&["geo-bench", "compare", "a", "b", "--fail-on", "regression"]),
            Ok(Invocation::Tooling(Tooling::Compare(_)))
        ));
        assert!(matches!(
            parse(&["geo-bench", "report", "a"]),
            Ok(Invocation::Tooling(Tooling::Report(_)))
        ));
        assert!(parse(&["geo-bench", "--rounds", "3", "compare", "a", "b"]).is_err());
        assert!(matches!(
            parse(&[
                "geo-bench",
                "merge",
                "--expect-workers",
                "2",
                "-o",
                "m",
                "w0",
                "w1"
            ]),
            Ok(Invocation::Tooling(Tooling::Merge(_)))
        ));
        assert!(matches!(
            parse(&[
                "geo-bench",
                "k8s-manifest",
                "--workers",
                "2",
                "--image",
                "i"
            ]),
            Ok(Invocation::Tooling(Tooling::K8sManifest(_)))
        ));
        let mut command = command_with_tooling::<Own>();
        let help = command.render_long_help().to_string();
        assert!(help.trim_end().ends_with("geo-bench --rounds 3"), "{help}");
        let mut more = with_run_examples(command.clone(), "Examples:\n  geo-bench");
        let help = more.render_long_help().to_string();
        assert!(
            help.contains("geo-bench --rounds 3\n\nExamples:\n  geo-bench"),
            "{help}"
        );
        assert!(
            help.contains(
                "  geo-bench\n  geo-bench compare results/before results/after --fail-on regression\n"
            ),
            "{help}"
        );
        let compare = command
            .find_subcommand_mut("compare")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(compare.contains("geo-bench compare results/before results/after"));
        let suites = |args: &[&str]| try_parse_with_tooling_from::<OwnSuites, _, _>(args.to_vec());
        assert!(matches!(
            suites(&["sql-bench", "report", "dir"]),
            Ok(Invocation::Tooling(Tooling::Report(_)))
        ));
        assert!(matches!(
            suites(&[
                "sql-bench",
                "merge",
                "--expect-workers",
                "1",
                "-o",
                "m",
                "w0"
            ]),
            Ok(Invocation::Tooling(Tooling::Merge(_)))
        ));
        assert!(matches!(
            suites(&["sql-bench", "crud", "--rounds", "3"]),
            Ok(Invocation::Run(OwnSuites {
                suite: OwnSuite::Crud(_)
            }))
        ));
    }

    #[test]
    fn help_ends_with_examples_in_the_tools_name() {
        let mut command = with_examples(Single::command(), "geo-bench");
        let help = command
            .find_subcommand_mut("compare")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            help.trim_end().ends_with(
                "compare/compare.md for a pull request and compare/compare.html to look at"
            ),
            "{help}"
        );
        assert!(help.contains("geo-bench compare main/results.json pr/results.json --threshold 3% --fail-on regression"));
        let mut command = with_examples(Suites::command(), "sql-bench");
        let help = command
            .find_subcommand_mut("report")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("sql-bench report results/before"), "{help}");
    }

    #[test]
    fn report_re_renders_every_export_without_touching_results_json() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let report = crate::export::fixture::report();
        let mut bytes = crate::export::results_json(&report);
        bytes.extend(b"\n");
        std::fs::write(run.join("results.json"), &bytes).unwrap();
        let args = ReportArgs {
            results: run.clone(),
            output: None,
        };
        let tooling = Tooling::Report(args);
        assert_eq!(
            run_tooling(&tooling, "sql-bench", &SharedReport).unwrap(),
            Exit::AllOk
        );
        for file in [
            "report.md",
            "report.html",
            "results.csv",
            "throughput.svg",
            "latency-spectrum.svg",
            "hdr/read-16c--sqlite.hlog",
        ] {
            assert!(run.join(file).is_file(), "{file}");
        }
        assert_eq!(
            std::fs::read(run.join("results.json")).unwrap(),
            bytes,
            "left as it was"
        );
        let elsewhere = dir.path().join("copy");
        let args = ReportArgs {
            results: run.join("results.json"),
            output: Some(elsewhere.clone()),
        };
        run_report(&args, "sql-bench", &SharedReport).unwrap();
        assert_eq!(
            std::fs::read(elsewhere.join("results.json")).unwrap(),
            bytes
        );
        assert!(elsewhere.join("report.html").is_file());
        let wrong = run_report(
            &ReportArgs {
                results: run,
                output: None,
            },
            "geo-bench",
            &SharedReport,
        );
        assert!(
            format!("{:#}", wrong.unwrap_err()).contains("is a sql-bench run, not a geo-bench one")
        );
    }
}
