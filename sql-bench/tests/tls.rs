//! TLS and credentials end to end against the TLS-only PostgreSQL and MariaDB and Cassandra's
//! TLS-only port, which the test command starts on loopback (certificates from its throwaway
//! CA): verification by default, the negotiated version and cipher recorded with the system, one
//! line and nothing touched for a wrong CA, a name mismatch, a plaintext client and bad TLS
//! input, and a password given by a variable that never reaches any byte the run writes.

mod support;

use std::path::Path;
use std::process::Command;

use common::results::Report;
use common::testing::scratch::role_with_database;
use common::testing::{
    OnServers, assert_all_ok, assert_every_cell_labelled, assert_exited_ok, assert_no_secret,
    assert_refused, assert_untrusted_ca, with_param,
};
use sql_bench::Summary;
use support::*;

/// [`on_server`] for the TLS server in `variable`, when the test CA is exported too (the test
/// is skipped, or fails, without it).
fn on_tls_server(variable: &str) -> Option<(String, OnServers)> {
    server_url("FAIRBENCH_TEST_TLS_CA")?;
    on_server(variable)
}

fn wrong_ca() -> String {
    std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").expect("FAIRBENCH_TEST_TLS_WRONG_CA")
}

/// One quick read workload on `target`, then `extra`.
fn read_run(out: &Path, target: &str, extra: &[&str]) -> anyhow::Result<Summary> {
    let mut all = vec!["--target", target, "--workloads", "read 2c"];
    all.extend_from_slice(extra);
    run(&args("crud", out, &all))
}

/// A refusal: one line, and no results folder.
fn refused(out: &Path, target: &str, extra: &[&str]) -> String {
    assert_refused(read_run(out, target, extra), out)
}

fn system_tls(report: &Report) -> (&str, &str, &str) {
    let verified = &report.systems[0].verified;
    (
        verified["tls_version"].as_str(),
        verified["tls_cipher"].as_str(),
        verified["tls_verification"].as_str(),
    )
}

/// A verify-full run against `url` records what TLS negotiated and carries no label; then the
/// wrong CA (in the URL parameter `ca_param`) with `--insecure-skip-verify` is measured, and
/// every cell labelled.
fn assert_verified_then_skipped(url: &str, name: &str, ca_param: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("full");
    let summary = read_run(&out, &format!("{name}={url}"), &[]).unwrap();
    assert_all_ok(&summary, &out);
    let (version, cipher, verification) = system_tls(&summary.report);
    assert!(version.starts_with("TLSv1."), "{version}");
    assert!(cipher.starts_with("TLS_"), "{cipher}");
    assert_eq!(verification, "verify-full");
    let system = &summary.report.systems[0];
    assert!(system.verified.contains_key("tls_handshake_ms"));
    assert!(system.labels.is_empty(), "{:?}", system.labels);

    let insecure = dir.path().join("insecure");
    let target = format!("{name}={}", with_param(url, ca_param, &wrong_ca()));
    let summary = read_run(&insecure, &target, &["--insecure-skip-verify"]).unwrap();
    assert_eq!(summary.exit, Exit::AllOk);
    let (_, _, verification) = system_tls(&summary.report);
    assert_eq!(verification, "none (--insecure-skip-verify)");
    assert_every_cell_labelled(&summary.report, "insecure-skip-verify");
}

#[test]
fn postgres_over_tls_is_verified_and_what_it_negotiated_is_recorded() {
    let Some((url, _servers)) = on_tls_server("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    assert_verified_then_skipped(&url, "pg", "sslrootcert");
}

#[test]
fn postgres_tls_failures_are_one_line_and_touch_nothing() {
    let Some((url, dir)) = on_tls_server("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let mismatch = std::env::var("FAIRBENCH_TEST_POSTGRES_TLS_MISMATCH_URL").unwrap();
    let out = dir.path().join("run");
    let wrong = with_param(&url, "sslrootcert", &wrong_ca());
    assert_untrusted_ca(&refused(&out, &wrong, &[]));
    let error = refused(&out, &mismatch, &[]);
    assert!(
        error.contains("did not verify") && error.contains("127.0.0.2"),
        "{error}"
    );
    // verify-ca checks the chain only: the same server at 127.0.0.2 is measured.
    let chain = dir.path().join("chain");
    let summary = read_run(&chain, &with_param(&mismatch, "sslmode", "verify-ca"), &[]).unwrap();
    assert_eq!(system_tls(&summary.report).2, "verify-ca");
    let plaintext = with_param(&url, "sslmode", "disable");
    let error = refused(&out, &plaintext, &[]);
    assert!(
        error.contains("no encryption") && error.contains("accepts only TLS"),
        "{error}"
    );
    let error = refused(&out, &with_param(&url, "sslmode", "verify"), &[]);
    assert!(error.contains("unknown sslmode `verify`"), "{error}");
    let error = refused(
        &out,
        &with_param(&url, "sslrootcert", "/nonexistent/ca.pem"),
        &[],
    );
    assert!(error.contains("CA file /nonexistent/ca.pem"), "{error}");
    let error = refused(&out, &with_param(&url, "sslrootcert", "/etc/hostname"), &[]);
    assert!(error.contains("no PEM certificate"), "{error}");
}

#[test]
fn mariadb_over_tls_is_verified_recorded_and_refused_in_one_line() {
    let Some((url, dir)) = on_tls_server("FAIRBENCH_TEST_MYSQL_TLS_URL") else {
        return;
    };
    let out = dir.path().join("full");
    let summary = read_run(&out, &format!("maria={url}"), &[]).unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:?}", summary.report.cells);
    let (version, cipher, verification) = system_tls(&summary.report);
    assert!(version.starts_with("TLSv1."), "{version}");
    assert!(cipher.starts_with("TLS_"), "{cipher}");
    assert_eq!(verification, "verify-full");
    // VERIFY_CA: the chain checked, a name of the verified certificate pinned.
    let chain = dir.path().join("chain");
    let summary = read_run(&chain, &with_param(&url, "ssl-mode", "VERIFY_CA"), &[]).unwrap();
    assert_eq!(summary.exit, Exit::AllOk);
    assert_eq!(system_tls(&summary.report).2, "verify-ca");

    let out = dir.path().join("run");
    let error = refused(&out, &with_param(&url, "ssl-ca", &wrong_ca()), &[]);
    assert!(
        error.contains("did not verify") && error.contains("not signed by a trusted CA"),
        "{error}"
    );
    let error = refused(&out, &with_param(&url, "ssl-mode", "DISABLED"), &[]);
    assert!(error.contains("may accept only TLS"), "{error}");
    let error = refused(&out, &with_param(&url, "ssl-mode", "SOMETIMES"), &[]);
    assert!(error.contains("unknown ssl-mode `SOMETIMES`"), "{error}");
}

#[test]
fn a_password_from_a_variable_never_reaches_any_output() {
    let Some((url, dir)) = on_tls_server("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let secret = "zq-leak-check-sql-4b1e";
    // A role of its own with the secret as its password, in a database of its own.
    let target = role_with_database(&url, "zq_leak", secret);
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args(args("crud", &out, &["--target", &format!("pg={target}")]))
        .args(["--workloads", "read 2c,write 1c"])
        .env("FAIRBENCH_PASSWORD_PG", secret)
        .output()
        .unwrap();
    assert_exited_ok(&ran, &out);
    assert_no_secret(&out, &ran.stdout, &ran.stderr, secret);
    // A wrong password is refused in words that do not repeat it either.
    let failed = dir.path().join("failed");
    let ran = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args(args(
            "crud",
            &failed,
            &["--target", &format!("pg={target}")],
        ))
        .env("FAIRBENCH_PASSWORD_PG", "zq-wrong-password-9c2d")
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(!stderr.contains("zq-wrong-password-9c2d"), "{stderr}");
}

/// Cassandra's TLS-only port (the test Cassandra serves plaintext and TLS on two ports).
const CASSANDRA_TLS: &str = "FAIRBENCH_TEST_CASSANDRA_TLS_URL";

#[test]
fn cassandra_over_tls_is_verified_and_what_it_negotiated_is_recorded() {
    let Some((url, _servers)) = on_tls_server(CASSANDRA_TLS) else {
        return;
    };
    assert_verified_then_skipped(&url, "cass", "cacert");
}

#[test]
fn cassandra_tls_failures_are_one_line_and_touch_nothing() {
    let Some((url, dir)) = on_tls_server(CASSANDRA_TLS) else {
        return;
    };
    let plaintext_port = server_url(CASSANDRA).expect("the test Cassandra's plaintext port");
    let out = dir.path().join("run");
    assert_untrusted_ca(&refused(
        &out,
        &with_param(&url, "cacert", &wrong_ca()),
        &[],
    ));
    // A plaintext client at the TLS-only port, and a TLS client at the plaintext port.
    let ca = std::env::var("FAIRBENCH_TEST_TLS_CA").unwrap();
    let plaintext_at_tls = url.split_once('?').unwrap().0;
    let error = refused(&out, plaintext_at_tls, &[]);
    assert!(
        error.contains("Connection reset") && error.contains("a TLS port needs sslmode="),
        "{error}"
    );
    let tls_at_plaintext = with_param(
        &with_param(&plaintext_port, "sslmode", "verify-full"),
        "cacert",
        &ca,
    );
    let error = refused(&out, &tls_at_plaintext, &[]);
    assert!(error.contains("is this a TLS port?"), "{error}");
    // A CA file without a mode: cql:// is plaintext, so the user is told, not connected.
    let error = refused(&out, &with_param(&plaintext_port, "cacert", &ca), &[]);
    assert!(
        error.contains("names a CA file, but cql:// uses no TLS"),
        "{error}"
    );
}

#[test]
fn a_cassandra_password_from_a_variable_never_reaches_any_output() {
    let Some((url, dir)) = on_tls_server(CASSANDRA_TLS) else {
        return;
    };
    let secret = "zq-leak-check-cql-7d3a";
    let target = format!("cass={}", url.replacen("cql://", "cql://zq_leak@", 1));
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_sql-bench"))
        .args(args("crud", &out, &["--target", &target]))
        .args(["--workloads", "read 2c,write 1c"])
        .env("FAIRBENCH_PASSWORD_CASS", secret)
        .output()
        .unwrap();
    assert_exited_ok(&ran, &out);
    assert_no_secret(&out, &ran.stdout, &ran.stderr, secret);
}
