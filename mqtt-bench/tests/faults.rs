//! Bad input and brokers that fail: one clear error and no results folder for input that
//! cannot be measured; an error cell and a written report for a broker that dies mid-run.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use common::exit::Exit;
use common::results::Status;
use support::*;

/// Runs with `extra`, expects an error containing `expected`, and checks nothing was left.
fn refused(extra: &[&str], expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let error = run(&args(&out, extra)).expect_err("the run is refused");
    let message = format!("{error:#}");
    // The first line says it all (clap adds a hint to --help below its own).
    let first = message.lines().next().unwrap_or_default();
    assert!(
        first.contains(expected),
        "expected `{expected}` in: {message}"
    );
    assert!(!out.exists(), "no results folder is left for bad input");
}

#[test]
fn malformed_options_are_refused_before_anything_runs() {
    refused(&["--broker", "mqtt://127.0.0.1"], "needs a port");
    refused(
        &["--broker", "http://127.0.0.1:1883"],
        "unknown scheme `http`",
    );
    refused(&["--subscribers", "0"], "need at least one");
    refused(&["--payload", "10"], "too small");
    refused(&["--sweep", "20k,10k"], "must ascend");
    refused(&["--broker-pid", "nobody=1"], "names no broker");
    refused(&["--scenarios", "qos7"], "not a scenario");
}

#[test]
fn an_unreachable_broker_is_one_clear_error() {
    let port = common::testing::free_port();
    let url = format!("mqtt://127.0.0.1:{port}");
    refused(&["--broker", &url], "cannot connect to 127.0.0.1");
}

#[test]
fn bad_credentials_and_oversized_payloads_are_refused() {
    let Some((auth, dir)) = on_server("FAIRBENCH_TEST_MOSQUITTO_AUTH_URL") else {
        return;
    };
    let wrong = auth.replacen(":fairbench@", ":wrong-password@", 1);
    assert_ne!(wrong, auth, "the URL carries the test password");
    refused(&["--broker", &wrong], "connection: not authorized");
    let anonymous = format!("mqtt://{}", auth.rsplit_once('@').unwrap().1);
    refused(
        &["--broker", &anonymous],
        "refused the MQTT 3.1.1 connection",
    );
    // That broker takes packets of at most 4 KiB.
    refused(
        &["--broker", &auth, "--payload", "8k"],
        "payloads this large",
    );
    let summary = run(&args(
        dir.path(),
        &[
            "--broker",
            &auth,
            "--scenarios",
            "qos1",
            "--rounds",
            "1",
            "--warmup",
            "0",
        ],
    ))
    .unwrap();
    let cell = &summary.report.cells[0];
    assert_eq!(cell.status, Status::Ok, "{:?}", cell.reason);
    let json = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
    assert!(!json.contains(":fairbench@"), "the password is not stored");
    assert_matches_schema(dir.path());
}

#[test]
fn a_broker_killed_mid_run_yields_an_error_cell_and_a_written_report() {
    let _servers = lock_servers();
    let dir = tempfile::tempdir().unwrap();
    let Some((mut broker, runner)) =
        run_against_doomed_broker(dir.path(), "--scenarios qos1,qos0 --duration 2s --rounds 3")
    else {
        return;
    };
    // Kill it once the run has connected and recorded its first window.
    wait_for_first_window(dir.path());
    broker.child.kill().unwrap();
    broker.child.wait().unwrap();
    let summary = runner
        .join()
        .unwrap()
        .expect("the run finishes and reports");
    assert_eq!(summary.exit, Exit::NotAllOk);
    let failed: Vec<_> = summary
        .report
        .cells
        .iter()
        .filter(|c| c.status == Status::Error)
        .collect();
    assert!(!failed.is_empty(), "{:?}", summary.report.cells);
    for cell in failed {
        let reason = cell.reason.as_deref().unwrap();
        assert!(
            reason.contains("closed the connection") || reason.contains("cannot connect"),
            "{reason}"
        );
    }
    assert_matches_schema(dir.path());
    let json = read_json(dir.path());
    assert!(json["finished_at"].is_string());
    assert!(dir.path().join("report.md").exists());
}

fn wait_for_first_window(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let written = std::fs::read_to_string(dir.join("results.json")).ok();
        let measured = written
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|j| {
                j["cells"][0]["extra"]["rounds"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
            });
        if measured {
            return;
        }
        assert!(Instant::now() < deadline, "the run never measured a window");
        std::thread::sleep(Duration::from_millis(50));
    }
}
