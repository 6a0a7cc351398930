//! The `mqtt-bench` command: parse, run, print the error chain on failure.

use clap::Parser;

fn main() -> std::process::ExitCode {
    common::run::exit(mqtt_bench::run(mqtt_bench::Opts::parse()))
}
