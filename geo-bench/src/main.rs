//! The `geo-bench` command: parse, run (or compare, report, merge, print a manifest), print
//! the error chain on failure.

fn main() -> std::process::ExitCode {
    let opts: geo_bench::Opts = common::cli::parse();
    match &opts.tooling {
        Some(tooling) => common::cli::exit(common::cli::run_tooling(
            tooling,
            "geo-bench",
            &geo_bench::report::GeoReport,
        )),
        None => common::run::exit(geo_bench::run(opts)),
    }
}
