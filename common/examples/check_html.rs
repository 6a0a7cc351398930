//! Checks the report.html of results folders in headless chromium, as the tools' tests do
//! (`common::testing::assert_html_renders`), and leaves report.png beside it. With `--render`
//! it first re-renders every export with the shared tables (a tool's own tables and charts
//! need the tool's `report` subcommand):
//!
//! ```sh
//! cargo run -p fairbench-common --features browser --example check_html -- [--render] DIR…
//! ```

use std::path::Path;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let render = args.first().is_some_and(|a| a == "--render");
    if render {
        args.remove(0);
    }
    if args.is_empty() {
        eprintln!("usage: check_html [--render] RESULTS_DIR…");
        std::process::exit(2);
    }
    for dir in args {
        if render {
            let report = common::cli::ReportArgs {
                results: dir.clone().into(),
                output: None,
            };
            // Whichever tool wrote it (load() then checks everything else).
            let json = common::testing::read_json(Path::new(&dir));
            let tool = json["tool"].as_str().unwrap_or_default().to_owned();
            if let Err(e) = common::cli::run_report(&report, &tool, &common::export::SharedReport) {
                eprintln!("error: {e:#}");
                std::process::exit(2);
            }
        }
        common::testing::assert_html_renders(Path::new(&dir));
    }
}
