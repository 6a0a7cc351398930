//! The `sql-bench` command: parse, run, print the error chain on failure.

use clap::Parser;

fn main() -> std::process::ExitCode {
    common::run::exit(sql_bench::run(sql_bench::Opts::parse()))
}
