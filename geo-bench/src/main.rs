//! The `geo-bench` command: the benchmark, or `compare`/`report` on finished runs; the error
//! chain on one line on failure.

fn main() -> std::process::ExitCode {
    common::cli::main(
        geo_bench::EXAMPLES,
        geo_bench::run,
        &geo_bench::report::GeoReport,
    )
}
