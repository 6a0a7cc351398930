//! The `geo-bench` command: parse, run, print the error chain on failure.

use clap::Parser;

fn main() -> std::process::ExitCode {
    common::run::exit(geo_bench::run(geo_bench::Opts::parse()))
}
