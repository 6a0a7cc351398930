//! PostGIS over TLS end to end against the TLS-only PostgreSQL the test command starts on
//! loopback: verify-full with the negotiated version and cipher recorded, a password from
//! `FAIRBENCH_PASSWORD_<NAME>` that never reaches any byte the run writes, one line with
//! nothing made for a wrong CA, a name mismatch, plaintext and bad TLS input, libpq's default
//! (`prefer`) for a URL without `sslmode`, and `--insecure-skip-verify` labelling every cell;
//! and `rediss://` against the TLS port of the loopback Redis (Debian's redis-server, built with
//! TLS; scripts/service/redis.sh), with an ACL user whose password comes from the environment,
//! is never written, and refuses the run in one line when wrong.

mod support;

use std::process::Command;

use common::exit::Exit;
use common::testing::scratch::role_with_database;
use common::testing::{
    assert_all_ok, assert_every_cell_labelled, assert_exited_ok, assert_no_secret, assert_refused,
    assert_untrusted_ca, read_report, with_param, without_tls,
};
use support::*;

const SECRET: &str = "zq-leak-check-geo-3a8f";

/// One insert line (one batch size, one client): what is tested here is the connection.
const SMALL: &[&str] = &[
    "--workloads",
    "insert",
    "--batch-sizes",
    "100",
    "--clients",
    "1",
];

/// [`args`] with [`SMALL`] and `extra`.
fn small_args<'a>(out: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = SMALL.to_vec();
    all.extend_from_slice(extra);
    args(out, &all)
}

fn wrong_ca() -> String {
    std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").expect("FAIRBENCH_TEST_TLS_WRONG_CA")
}

/// A role of its own with a recognisable password, owning a PostGIS database of its own on
/// the TLS server (made once per server); its URL without the password.
fn leak_target(url: &str) -> String {
    let own = role_with_database(url, "zq_geo", SECRET);
    psql(
        &url.replacen("/postgres?", "/zq_geo?", 1),
        "CREATE EXTENSION IF NOT EXISTS postgis",
    );
    own.replacen("postgres://", "postgis://", 1)
}

#[test]
fn postgis_over_tls_is_verified_recorded_and_its_password_never_written() {
    let Some((url, dir)) = on_server("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let target = leak_target(&url);
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_geo-bench"))
        .args(small_args(&out, &["--target", &format!("geo={target}")]))
        .env("FAIRBENCH_PASSWORD_GEO", SECRET)
        .output()
        .unwrap();
    assert_exited_ok(&ran, &out);
    assert_no_secret(&out, &ran.stdout, &ran.stderr, SECRET);
    let report = read_report(&out);
    let verified = &report.systems[0].verified;
    assert!(
        verified["tls_version"].starts_with("TLSv1."),
        "{verified:?}"
    );
    assert_eq!(verified["tls_verification"], "verify-full");

    let refused = dir.path().join("refused");
    for (bad, expected) in [
        (
            with_param(&target, "sslrootcert", &wrong_ca()),
            "not signed by a trusted CA",
        ),
        (
            target.replacen("127.0.0.1", "127.0.0.2", 1),
            "the certificate of 127.0.0.2 did not verify",
        ),
        (
            with_param(&target, "sslmode", "verify"),
            "unknown sslmode `verify`",
        ),
        (
            with_param(&target, "sslrootcert", "/nonexistent/ca.pem"),
            "CA file /nonexistent/ca.pem",
        ),
        (
            with_param(&target, "sslmode", "disable"),
            "accepts only TLS",
        ),
    ] {
        let ran = Command::new(env!("CARGO_BIN_EXE_geo-bench"))
            .args(small_args(&refused, &["--target", &format!("geo={bad}")]))
            .env("FAIRBENCH_PASSWORD_GEO", SECRET)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(SECRET));
        assert!(!refused.exists(), "nothing made");
    }
}

#[test]
fn libpq_defaults_apply_to_postgis_urls_and_insecure_skip_verify_labels_every_cell() {
    let Some((url, dir)) = on_server("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let target = leak_target(&url);
    let with_password = target.replacen("zq_geo@", &format!("zq_geo:{SECRET}@"), 1);
    // No sslmode: libpq's `prefer`, so a TLS-only server is reached over TLS, unverified.
    let bare = with_password.split('?').next().unwrap().to_owned();
    let prefer = dir.path().join("prefer");
    let summary = run(&small_args(&prefer, &["--target", &bare])).unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:?}", summary.report.cells);
    let verified = &summary.report.systems[0].verified;
    assert!(
        verified["tls_version"].starts_with("TLSv1."),
        "{verified:?}"
    );
    assert_eq!(
        verified["tls_verification"],
        "none (sslmode=prefer, the default)"
    );

    let insecure = dir.path().join("insecure");
    let wrong = with_param(&with_password, "sslrootcert", &wrong_ca());
    let summary = run(&small_args(
        &insecure,
        &["--target", &wrong, "--insecure-skip-verify"],
    ))
    .unwrap();
    assert_all_ok(&summary, &insecure);
    let system = &summary.report.systems[0];
    assert_eq!(
        system.verified["tls_verification"],
        "none (--insecure-skip-verify)"
    );
    assert_every_cell_labelled(&summary.report, "insecure-skip-verify");
}

#[test]
fn redis_over_tls_is_verified_recorded_and_refused_in_one_line() {
    let Some((url, dir)) = on_server("FAIRBENCH_TEST_REDIS_TLS_URL") else {
        return;
    };
    let full = dir.path().join("full");
    let summary = run(&small_args(&full, &["--target", &format!("rtls={url}")])).unwrap();
    assert_all_ok(&summary, &full);
    let verified = &summary.report.systems[0].verified;
    assert!(
        verified["tls_version"].starts_with("TLSv1."),
        "{verified:?}"
    );
    assert!(verified["tls_cipher"].starts_with("TLS_"), "{verified:?}");
    assert_eq!(verified["tls_verification"], "verify-full");

    let out = dir.path().join("refused");
    let refused =
        |target: &str| assert_refused(run(&small_args(&out, &["--target", target])), &out);
    let wrong = with_param(&url, "cacert", &wrong_ca());
    assert_untrusted_ca(&refused(&wrong));
    let plaintext = without_tls(&url, "rediss://", "redis://");
    let error = refused(&plaintext);
    assert!(error.contains("use rediss://"), "{error}");
    let error = refused(&with_param(&plaintext, "cacert", &wrong_ca()));
    assert!(error.contains("use rediss://"), "{error}");

    let insecure = dir.path().join("insecure");
    let summary = run(&small_args(
        &insecure,
        &["--target", &wrong, "--insecure-skip-verify"],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:?}", summary.report.cells);
    let system = &summary.report.systems[0];
    assert_eq!(
        system.verified["tls_verification"],
        "none (--insecure-skip-verify)"
    );
    assert_every_cell_labelled(&summary.report, "insecure-skip-verify");
}

#[test]
fn a_redis_password_from_the_environment_is_never_written_and_a_wrong_one_is_refused() {
    let Some(([tls, plain], dir)) =
        on_servers(["FAIRBENCH_TEST_REDIS_TLS_URL", "FAIRBENCH_TEST_REDIS_URL"])
    else {
        return;
    };
    // A user of the test's own on the shared server (ACLs live in memory only), removed after.
    let acl = [
        "ACL",
        "SETUSER",
        "zq_geo",
        "reset",
        "on",
        &format!(">{SECRET}"),
        "~*",
        "&*",
        "+@all",
    ];
    assert_eq!(redis_cli(&plain, &acl), "OK");
    let target = format!("geo={}", tls.replacen("rediss://", "rediss://zq_geo@", 1));
    let geo_bench = |out: &std::path::Path, password: &str| {
        Command::new(env!("CARGO_BIN_EXE_geo-bench"))
            .args(small_args(out, &["--target", &target]))
            .env("FAIRBENCH_PASSWORD_GEO", password)
            .output()
            .unwrap()
    };
    let out = dir.path().join("run");
    let ran = geo_bench(&out, SECRET);
    let wrong = dir.path().join("wrong");
    let refused = geo_bench(&wrong, "not-the-password");
    assert_eq!(redis_cli(&plain, &["ACL", "DELUSER", "zq_geo"]), "1");

    assert_exited_ok(&ran, &out);
    assert_no_secret(&out, &ran.stdout, &ran.stderr, SECRET);
    assert_eq!(
        read_json(&out)["systems"][0]["verified"]["tls_verification"],
        "verify-full"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("WRONGPASS"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("not-the-password"), "{stderr}");
    assert!(!wrong.exists(), "nothing made");
}
