//! The `vector-bench` command: parse, run, print the error chain on failure.

use clap::Parser;

fn main() -> std::process::ExitCode {
    common::run::exit(vector_bench::run(vector_bench::Opts::parse()))
}
