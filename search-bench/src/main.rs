//! The `search-bench` command: the benchmark, or `compare`/`report` on finished runs; the error
//! chain on one line on failure.

fn main() -> std::process::ExitCode {
    common::cli::main(
        search_bench::EXAMPLES,
        search_bench::run,
        &search_bench::TOOLING,
    )
}
