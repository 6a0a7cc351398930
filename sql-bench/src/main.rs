//! The `sql-bench` command: a suite, or `compare`/`report` on finished runs; the error chain
//! on one line on failure.

use common::cli::{Invocation, exit, parse_invocation, run_tooling};

fn main() -> std::process::ExitCode {
    sql_bench::targets::mysql::bound_buffer_pool();
    let args = std::env::args_os();
    match parse_invocation(sql_bench::command(), args).unwrap_or_else(|e| e.exit()) {
        Invocation::Run(opts) => {
            common::run::exit(common::fork::run_or_fork(opts, &sql_bench::TOOLING, |o| {
                sql_bench::run(o, None)
            }))
        }
        Invocation::Tooling(t) => exit(run_tooling(&t, "sql-bench", &sql_bench::TOOLING)),
    }
}
