//! The `mqtt-bench` command: parse, run, print the error chain on failure.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let opts = mqtt_bench::Opts::parse();
    match mqtt_bench::run(opts) {
        Ok(summary) => ExitCode::from(summary.exit_code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
