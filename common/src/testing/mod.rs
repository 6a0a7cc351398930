//! For the tools' integration tests: whether a real server must be there, its URL from the
//! environment the test command set up, a lock so one test at a time uses the servers (with a
//! scratch folder, the line a server test begins with: [`on_server`]), running a tool
//! in-process on parsed arguments, the client calls tests make to set servers up, and the check
//! that no secret reached anything a run wrote, what a test asserts of a run's outcome
//! (`assert_all_ok`, [`assert_refused`]), the check of a tool's `compare` and `report`
//! ([`tooling`]), and (feature `browser`) the check that `report.html` renders in a real
//! browser; network namespaces for tests of several workers ([`netns`]), the processes such a
//! test starts ([`process`]), a run as an Indexed Job makes it in those namespaces ([`job`])
//! and what it asserts of their parts ([`workers`]).

#[cfg(any(test, feature = "browser"))]
mod browser;
mod fixture;
pub mod job;
pub mod netns;
mod order;
mod outcome;
pub mod process;
pub mod scratch;
pub mod sigterm;
pub mod tooling;
pub mod workers;

#[cfg(any(test, feature = "browser"))]
pub use browser::{assert_html_renders, check_page, chromium};
pub use fixture::{OnServers, on_server, on_servers};
pub use order::assert_systems_alternate;
#[cfg(feature = "schema")]
pub use outcome::assert_all_ok;
pub use outcome::{
    assert_every_cell_labelled, assert_exited_ok, assert_judged_against, assert_refused,
    assert_untrusted_ca, assert_verified, refusal, system_names, without_tls,
};

use std::future::Future;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::environment::Environment;
use crate::results::{Cell, Percentiles, Report, SystemInfo, Throughput};
use crate::run::Summary;

/// Servers are shared by every test in a test binary; one test uses them at a time.
static SERVERS: Mutex<()> = Mutex::new(());

/// Holds the servers for one test (a test that panicked does not poison them for the next).
pub fn lock_servers() -> MutexGuard<'static, ()> {
    SERVERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a missing server must fail the test (the test command sets
/// `FAIRBENCH_REQUIRE_SERVERS`; so does CI).
pub fn servers_required() -> bool {
    std::env::var_os("FAIRBENCH_REQUIRE_SERVERS").is_some()
        || std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The URL in `variable`, or `None` with a note on stderr when running without the servers
/// outside CI. Panics when the servers are required and the variable is missing.
pub fn server_url(variable: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) => Some(url),
        Err(_) if servers_required() => {
            panic!(
                "{variable} is not set: run the tests through scripts/test, which starts the servers"
            )
        }
        Err(_) => {
            eprintln!("skipped: {variable} is not set (run scripts/test to start the servers)");
            None
        }
    }
}

/// The URLs in `variables`, or `None` when any of them is missing (each as [`server_url`]
/// says: a note on stderr, or a panic when the servers are required).
pub fn server_urls<const N: usize>(variables: [&str; N]) -> Option<[String; N]> {
    let urls = variables.map(server_url);
    if urls.iter().any(Option::is_none) {
        return None;
    }
    Some(urls.map(|url| url.expect("every URL is set")))
}

/// Parses `TOOL ARGS…` as the tool's options `O` and runs them with `run` (the tool's `run`),
/// under `interrupt`.
pub fn run_args<O: clap::Parser>(
    tool: &str,
    args: &[&str],
    interrupt: Arc<AtomicBool>,
    run: impl FnOnce(O, Arc<AtomicBool>) -> anyhow::Result<Summary>,
) -> anyhow::Result<Summary> {
    let argv = std::iter::once(tool).chain(args.iter().copied());
    let opts = O::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    run(opts, interrupt)
}

/// Defines a tool's in-process runs for its integration tests: `run(ARGS…)` and
/// `run_with(ARGS…, interrupt)` (an interrupt flag the test controls), through [`run_args`].
/// `in_process_runs!("geo-bench", geo_bench)` in the tests' support module.
#[macro_export]
macro_rules! in_process_runs {
    ($tool:literal, $krate:ident) => {
        /// Runs the tool on `ARGS…` in-process.
        pub fn run(args: &[&str]) -> anyhow::Result<$crate::run::Summary> {
            run_with(args, Default::default())
        }

        /// Runs the tool on `ARGS…` in-process with an interrupt flag the test controls.
        pub fn run_with(
            args: &[&str],
            interrupt: std::sync::Arc<std::sync::atomic::AtomicBool>,
        ) -> anyhow::Result<$crate::run::Summary> {
            $crate::testing::run_args::<$krate::Opts>($tool, args, interrupt, |opts, interrupt| {
                $krate::run(opts, Some(interrupt))
            })
        }
    };
}

/// Asserts the snapshots of a report's terminal form and its `report.md`, under the names
/// every tool keeps them by (`terminal_report_snapshot`, `markdown_report_snapshot`, in the
/// test's `snapshots/`): `assert_report_snapshots!(render_terminal(&r), render_markdown(&r))`
/// in one test (of a crate that has insta).
#[macro_export]
macro_rules! assert_report_snapshots {
    ($terminal:expr, $markdown:expr $(,)?) => {{
        insta::assert_snapshot!("terminal_report_snapshot", $terminal);
        insta::assert_snapshot!("markdown_report_snapshot", $markdown);
    }};
}

/// The words of `text` (a test's settings written on one line: `"--duration 1s --rounds 2"`).
pub fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// A free port on loopback (bound, then released for whatever the test starts to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// `PREFIX… --output DIR --quiet`, then the pairs of `quick` that `extra` does not set, then
/// `extra` (which so overrides them).
pub fn quick_args<'a>(
    prefix: &[&'a str],
    output: &'a Path,
    quick: &[&'a str],
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut all = prefix.to_vec();
    all.extend([
        "--output",
        output.to_str().expect("a UTF-8 path"),
        "--quiet",
    ]);
    for pair in quick.chunks(2) {
        if !extra.contains(&pair[0]) {
            all.extend_from_slice(pair);
        }
    }
    all.extend_from_slice(extra);
    all
}

/// `results.json` of a results folder, as JSON.
pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json exists");
    serde_json::from_str(&text).expect("results.json parses")
}

/// `results.json` of a results folder, as the report model.
pub fn read_report(dir: &Path) -> Report {
    serde_json::from_value(read_json(dir)).expect("results.json reads as a report")
}

/// The frame of a synthetic report for renderer tests: a fixed run id and start, no machine,
/// no systems, cells or notes (the test fills them in), so nothing of this machine or this
/// moment reaches a snapshot.
pub fn synthetic_report(
    tool: &str,
    suite: &str,
    section: &str,
    options: serde_json::Value,
) -> Report {
    Report {
        schema_version: 1,
        tool: tool.into(),
        tool_version: "0.1.0".into(),
        git_commit: None,
        suite: suite.into(),
        section: section.into(),
        run_id: "r".into(),
        reference: None,
        started_at: "2026-11-30T00:00:00Z".into(),
        finished_at: None,
        options,
        environment: Environment::default(),
        data: None,
        systems: Vec::new(),
        cells: Vec::new(),
        verdicts: Vec::new(),
        no_verdicts: Vec::new(),
        notes: Vec::new(),
        extra: Default::default(),
        worker: None,
        workers: Vec::new(),
        forks: Vec::new(),
    }
}

/// A synthetic report's system `name`: its kind and URL its name, version `NAME 1.0`.
pub fn synthetic_system(name: &str) -> SystemInfo {
    SystemInfo {
        name: name.into(),
        kind: name.into(),
        url_redacted: name.into(),
        version: format!("{name} 1.0"),
        ..SystemInfo::default()
    }
}

/// A synthetic report's cell: `rounds` as its throughput per round and its latency percentiles
/// `[p50, p95, p99, p99.9, max]` with their `mean`, all in ns; no timing of a real run.
pub fn synthetic_cell(
    (workload, system, unit): (&str, &str, &str),
    clients: u32,
    rounds: &[f64],
    [p50, p95, p99, p999, max]: [u64; 5],
    mean: f64,
) -> Cell {
    let mut cell = Cell::new(workload, system, unit, clients, rounds.len() as u32);
    cell.throughput = Throughput::from_rounds(rounds.to_vec());
    cell.latency_ns = Some(Percentiles {
        p50,
        p95,
        p99,
        p999,
        max,
        mean,
    });
    cell
}

/// The cell of `workload` on `system`; panics naming every cell there is when there is none.
pub fn cell<'a>(report: &'a Report, workload: &str, system: &str) -> &'a Cell {
    report
        .cells
        .iter()
        .find(|c| c.workload == workload && c.system == system)
        .unwrap_or_else(|| {
            let cells: Vec<(&str, &str)> = report
                .cells
                .iter()
                .map(|c| (c.workload.as_str(), c.system.as_str()))
                .collect();
            panic!("no cell {workload} × {system} among {cells:?}")
        })
}

/// Runs `future` to completion on a runtime of its own (for a test's own client calls; a
/// client lives on the runtime it was made on, so make and use it inside one call).
pub fn block_on<T>(future: impl Future<Output = T>) -> T {
    crate::tls::install_provider();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// Runs an independent client a test sets a server up with (`psql`, `mariadb`, `redis-cli`):
/// its standard output, trimmed; the test fails with the client's stderr when it fails.
pub fn client_output(command: &mut std::process::Command) -> String {
    let name = command.get_program().to_string_lossy().into_owned();
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{name} runs (the test command installs it): {e}"));
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap_or_else(|_| panic!("UTF-8 from {name}"))
        .trim()
        .to_owned()
}

/// Runs SQL against a PostgreSQL server with the `psql` the server package installs.
pub fn psql(url: &str, sql: &str) -> String {
    client_output(std::process::Command::new("psql").args([
        url,
        "-X",
        "-q",
        "-t",
        "-A",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        sql,
    ]))
}

/// Replaces the database of a URL (`…/postgres` → `…/other`).
pub fn with_database(url: &str, database: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{base}/{database}")
}

/// `url` with the parameter `key` set to `value` (replacing it where it is), for tests that
/// turn one exported URL into its variants (the wrong CA, another sslmode).
pub fn with_param(url: &str, key: &str, value: &str) -> String {
    let without = crate::urlparts::without_params(url, &[&crate::urlparts::normalized_key(key)]);
    crate::urlparts::with_param(&without, key, value)
}

/// One HTTP call with curl: the status and the body.
pub fn http(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    let mut command = std::process::Command::new("curl");
    command.args(["-s", "-X", method, "-w", "\n%{http_code}", url]);
    if let Some(body) = body {
        command.args(["-H", "content-type: application/json", "-d", body]);
    }
    let out = command.output().expect("curl runs");
    let text = String::from_utf8(out.stdout).expect("UTF-8 from curl");
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// Fails the test if `secret` appears anywhere a run wrote: its stdout, its stderr, or any
/// file under the results folder `dir` (recursively, every byte, hidden files included). Each
/// place is named with the text around it (the secret itself masked). Use a secret no output
/// could contain by chance (`zq-leak-check-…`), given through `--password-file` or the URL.
pub fn assert_no_secret(dir: &Path, stdout: &[u8], stderr: &[u8], secret: &str) {
    assert!(!secret.is_empty(), "an empty secret matches everything");
    let mut found = Vec::new();
    let mut check = |place: String, bytes: &[u8]| {
        if let Some(at) = find_bytes(bytes, secret.as_bytes()) {
            let start = at.saturating_sub(60);
            let end = (at + secret.len() + 60).min(bytes.len());
            let context = String::from_utf8_lossy(&bytes[start..end]).replace(secret, "<SECRET>");
            found.push(format!("{place} (byte {at}): …{context}…"));
        }
    };
    check("stdout".into(), stdout);
    check("stderr".into(), stderr);
    let mut pending = vec![dir.to_owned()];
    let mut files = 0;
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", folder.display()));
        for entry in entries {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                files += 1;
                check(path.display().to_string(), &bytes);
            }
        }
    }
    assert!(
        found.is_empty(),
        "the secret was written to:\n{}",
        found.join("\n")
    );
    assert!(
        files > 0,
        "{} holds no file: did the run write anything?",
        dir.display()
    );
}

fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Fails the test unless `results.json` of `dir` validates against the checked-in schema
/// (the core and the tool's own `extra`), naming every violation.
#[cfg(feature = "schema")]
pub fn assert_matches_schema(dir: &Path) {
    let instance = read_json(dir);
    if let Err(violations) = schema_violations(&instance) {
        panic!(
            "{} does not match results.schema.json:\n{violations}",
            dir.join("results.json").display()
        );
    }
}

/// The schema's verdict on one results document: `Err` with every violation, one per line.
#[cfg(feature = "schema")]
pub fn schema_violations(instance: &serde_json::Value) -> Result<(), String> {
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    for (url, text) in crate::results::RESULTS_SCHEMA {
        let schema: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{url} is not JSON: {e}"));
        compiler
            .add_resource(url, schema)
            .expect("each schema is added once");
    }
    let index = compiler
        .compile(crate::results::RESULTS_SCHEMA[0].0, &mut schemas)
        .expect("the schema compiles");
    schemas
        .validate(instance, index)
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaked_secret_is_found_wherever_it_was_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("hdr")).unwrap();
        std::fs::write(
            dir.path().join("results.json"),
            b"{\"url\": \"pg://u:***@h\"}",
        )
        .unwrap();
        assert_no_secret(dir.path(), b"table", b"results: /tmp/x", "zq-leak-1");
        std::fs::write(dir.path().join("hdr/.w.tmp"), b"x zq-leak-1 y").unwrap();
        let caught = std::panic::catch_unwind(|| {
            assert_no_secret(
                dir.path(),
                b"ok",
                b"error: login zq-leak-1 failed",
                "zq-leak-1",
            )
        })
        .unwrap_err();
        let message = caught.downcast_ref::<String>().unwrap();
        assert!(message.contains("stderr (byte 13)"), "{message}");
        assert!(message.contains(".w.tmp"), "{message}");
        assert!(!message.contains("zq-leak-1"), "{message}");
    }

    #[test]
    fn quick_pairs_give_way_to_the_tests_own() {
        let out = Path::new("/tmp/x");
        let args = quick_args(
            &["crud"],
            out,
            &["--rounds", "2", "--duration", "1s"],
            &["--rounds", "5"],
        );
        assert_eq!(
            args,
            [
                "crud",
                "--output",
                "/tmp/x",
                "--quiet",
                "--duration",
                "1s",
                "--rounds",
                "5"
            ]
        );
        assert_eq!(
            with_database("postgres://u@h:1/postgres", "geo"),
            "postgres://u@h:1/geo"
        );
        assert_eq!(
            with_param(
                "postgres://h/db?sslmode=verify-full&sslrootcert=/a.pem",
                "sslrootcert",
                "/b.pem"
            ),
            "postgres://h/db?sslmode=verify-full&sslrootcert=/b.pem"
        );
    }

    #[test]
    fn a_cell_is_found_by_workload_and_system() {
        let report = crate::report::tests::sample();
        assert_eq!(cell(&report, "read 16c", "c").system, "c");
        let missing = std::panic::catch_unwind(|| cell(&report, "read 16c", "z").workload.len());
        assert!(missing.is_err());
    }
}
