//! https, basic auth and API keys end to end against the HTTPS OpenSearch node the test
//! command starts on loopback (its own TLS in the JVM, certificates from the throwaway CA; no
//! security plugin, so the node accepts any credentials: what is tested here is that they are
//! sent and never written): verification by default, the negotiated version and cipher
//! recorded, one line and nothing made for a wrong CA or plaintext to the https port; and the
//! HTTPS Elasticsearch node, verified and named as itself.

mod support;

use std::path::Path;
use std::process::Command;

use common::testing::{
    assert_all_ok, assert_every_cell_labelled, assert_exited_ok, assert_no_secret, assert_refused,
    assert_untrusted_ca, with_param, without_tls,
};
use support::*;

/// Where the test command exports the URL of its OpenSearch over HTTPS.
const OPENSEARCH_TLS: &str = "FAIRBENCH_TEST_OPENSEARCH_TLS_URL";

/// Where the test command exports the URL of its Elasticsearch over HTTPS.
const ELASTICSEARCH_TLS: &str = "FAIRBENCH_TEST_ELASTICSEARCH_TLS_URL";

/// `https://USER@host:port?cacert=…` from the exported URL.
fn with_user(url: &str, user: &str) -> String {
    url.replacen("https://", &format!("https://{user}@"), 1)
}

/// One small workload on a small corpus: what is tested here is the connection, not search.
const SMALL: &[&str] = &["--workloads", "match", "--docs", "1000", "--queries", "16"];

/// [`args`] with [`SMALL`] and `extra`.
fn small_args<'a>(out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = SMALL.to_vec();
    all.extend_from_slice(extra);
    args(out, &all)
}

/// Runs search-bench as a process with `variable=secret`, checks it succeeded and that the
/// secret is nowhere in what it wrote, neither as given nor as `encoded` (the Basic header's
/// base64 of `user:password`); hands back results.json.
fn run_with_secret(
    out: &Path,
    target: &str,
    (variable, secret): (&str, &str),
    encoded: Option<&str>,
) -> serde_json::Value {
    let ran = Command::new(env!("CARGO_BIN_EXE_search-bench"))
        .args(small_args(out, &["--target", target]))
        .env(variable, secret)
        .output()
        .unwrap();
    assert_exited_ok(&ran, out);
    assert_no_secret(out, &ran.stdout, &ran.stderr, secret);
    if let Some(encoded) = encoded {
        assert_no_secret(out, &ran.stdout, &ran.stderr, encoded);
    }
    read_json(out)
}

#[test]
fn https_with_a_password_or_an_api_key_is_verified_recorded_and_never_leaks() {
    let Some((url, dir)) = on_server(OPENSEARCH_TLS) else {
        return;
    };
    let basic = dir.path().join("basic");
    // base64("bench:zq-leak-check-search-pw-51c2"), what the Authorization header carries.
    let encoded = "YmVuY2g6enEtbGVhay1jaGVjay1zZWFyY2gtcHctNTFjMg==";
    let json = run_with_secret(
        &basic,
        &format!("os={}", with_user(&url, "bench")),
        ("FAIRBENCH_PASSWORD_OS", "zq-leak-check-search-pw-51c2"),
        Some(encoded),
    );
    let verified = &json["systems"][0]["verified"];
    assert!(
        verified["tls_version"]
            .as_str()
            .unwrap()
            .starts_with("TLSv1."),
        "{verified}"
    );
    assert!(verified["tls_cipher"].as_str().unwrap().starts_with("TLS_"));
    assert_eq!(verified["tls_verification"], "verify-full");
    assert_eq!(json["systems"][0]["kind"], "opensearch");
    let keyed = dir.path().join("key");
    run_with_secret(
        &keyed,
        &format!("os={url}"),
        ("FAIRBENCH_API_KEY_OS", "zq-leak-check-search-key-7d9e"),
        None,
    );
}

#[test]
fn a_wrong_ca_or_plaintext_is_one_line_and_insecure_skip_verify_labels_the_cells() {
    let Some((url, dir)) = on_server(OPENSEARCH_TLS) else {
        return;
    };
    let wrong_ca = std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").unwrap();
    let wrong = with_param(&url, "cacert", &wrong_ca);
    let out = dir.path().join("refused");
    let refused =
        |target: &str| assert_refused(run(&small_args(&out, &["--target", target])), &out);
    assert_untrusted_ca(&refused(&wrong));
    let plaintext = without_tls(&url, "https://", "http://");
    let error = refused(&plaintext);
    assert!(error.contains("use https://"), "{error}");
    // Bad TLS or credential input, refused before anything is sent.
    let error = refused(&with_param(&url, "cacert", "/nonexistent/ca.pem"));
    assert!(error.contains("CA file /nonexistent/ca.pem"), "{error}");
    let error = refused(&with_param(&url, "cacert", "/etc/hostname"));
    assert!(error.contains("no PEM certificate"), "{error}");
    let error = refused(&with_param(&plaintext, "cacert", &wrong_ca));
    assert!(error.contains("use https://"), "{error}");
    let error = refused(&with_param(&url, "sslmode", "disable"));
    assert!(error.contains("always uses TLS"), "{error}");
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "zq-unused-password\n").unwrap();
    let file_arg = format!("os={}", password_file.display());
    let error = match run(&small_args(
        &out,
        &[
            "--target",
            &format!("os={url}"),
            "--password-file",
            &file_arg,
        ],
    )) {
        Ok(_) => panic!("measured, not refused"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("names no user"), "{error}");
    assert!(!error.contains("zq-unused-password"), "{error}");
    assert!(!out.exists(), "nothing made");

    let insecure = dir.path().join("insecure");
    let summary = run(&small_args(
        &insecure,
        &["--target", &wrong, "--insecure-skip-verify"],
    ))
    .unwrap();
    assert_all_ok(&summary, &insecure);
    let verified = &summary.report.systems[0].verified;
    assert_eq!(
        verified["tls_verification"],
        "none (--insecure-skip-verify)"
    );
    assert_every_cell_labelled(&summary.report, "insecure-skip-verify");
}

#[test]
fn elasticsearch_over_https_is_verified_and_named_as_itself() {
    let Some((url, dir)) = on_server(ELASTICSEARCH_TLS) else {
        return;
    };
    let out = dir.path().join("run");
    let summary = run(&small_args(&out, &["--target", &url])).unwrap();
    assert_all_ok(&summary, &out);
    let system = &summary.report.systems[0];
    assert_eq!(
        (system.name.as_str(), system.kind.as_str()),
        ("elasticsearch", "elasticsearch")
    );
    assert!(
        system.version.starts_with("Elasticsearch 8."),
        "{}",
        system.version
    );
    assert!(
        system.verified["tls_version"].starts_with("TLSv1."),
        "{:?}",
        system.verified
    );
    assert_eq!(system.verified["tls_verification"], "verify-full");
    let wrong_ca = std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").unwrap();
    let refused = dir.path().join("refused");
    assert_untrusted_ca(&assert_refused(
        run(&small_args(
            &refused,
            &["--target", &with_param(&url, "cacert", &wrong_ca)],
        )),
        &refused,
    ));
}
