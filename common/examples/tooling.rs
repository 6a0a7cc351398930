//! The `compare` and `report` subcommands as a tool gets them, runnable on any tool's results
//! before that tool is wired (rendered with the shared tables only):
//!
//! ```sh
//! cargo run -p fairbench-common --example tooling -- geo-bench compare A B --fail-on regression
//! cargo run -p fairbench-common --example tooling -- geo-bench report A --output html/
//! ```

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use common::cli::Tooling;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    tooling: Tooling,
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: tooling TOOL compare|report …");
        return ExitCode::from(2);
    }
    let tool = args.remove(1);
    // clap names a command with a &'static str; this process names one tool for its life.
    let name: &'static str = Box::leak(tool.clone().into_boxed_str());
    let command = common::cli::with_examples(Cli::command().name(name), &tool);
    let matches = command.get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    common::cli::exit(common::cli::run_tooling(
        &cli.tooling,
        &tool,
        &common::export::SharedReport,
    ))
}
