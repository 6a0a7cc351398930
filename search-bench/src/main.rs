//! The `search-bench` command: parse, run, print the error chain on failure.

use clap::Parser;

fn main() -> std::process::ExitCode {
    common::run::exit(search_bench::run(search_bench::Opts::parse()))
}
