//! The `vector-bench` command: the benchmark, or `compare`/`report` on finished runs; the error
//! chain on one line on failure.

fn main() -> std::process::ExitCode {
    common::cli::main(
        vector_bench::EXAMPLES,
        vector_bench::run,
        &vector_bench::TOOLING,
    )
}
