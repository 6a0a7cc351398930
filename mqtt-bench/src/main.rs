//! The `mqtt-bench` command: the benchmark, or `compare`/`report` on finished runs; the error
//! chain on one line on failure.

fn main() -> std::process::ExitCode {
    common::cli::main(mqtt_bench::EXAMPLES, mqtt_bench::run, &mqtt_bench::TOOLING)
}
