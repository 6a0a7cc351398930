//! pgvector's connection over TLS and with a password from the environment, against the TLS-only
//! PostgreSQL 15 the test command starts on loopback (scripts/service/postgres.sh). That server
//! has no pgvector (Debian packages none for it, and the PostgreSQL 18 with pgvector here is
//! built without OpenSSL), so a good connection ends, after TLS and the password, at the
//! extension check: its one line says the handshake verified and the password was taken.

mod support;

use std::process::Command;

use common::testing::{server_url, with_param};

const SECRET_VAR: &str = "FAIRBENCH_PASSWORD_PGV";
const SECRET: &str = "zq-leak-check-vec-51c2";

/// vector-bench on `url` (named `pgv`) with `password` in the environment: exit code, stderr,
/// whether a results folder was made.
fn vector_bench(url: &str, password: &str) -> (Option<i32>, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_vector-bench"))
        .args(["--target", &format!("pgv={url}"), "--output"])
        .arg(&out)
        .args(["--quiet", "--rows", "100", "--dims", "8", "--queries", "5"])
        .env(SECRET_VAR, password)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr).trim().to_owned();
    (ran.status.code(), stderr, out.exists())
}

/// A role of the test's own with a recognisable password on the shared server (made once per
/// server); its URL without the password.
fn leak_target(url: &str) -> String {
    common::testing::psql(
        url,
        &format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'zq_vec') THEN
                 CREATE ROLE zq_vec LOGIN PASSWORD '{SECRET}';
               END IF;
             END $$"
        ),
    );
    let rest = url.split_once('@').unwrap().1;
    format!("postgres://zq_vec@{rest}")
}

#[test]
fn pgvector_connects_over_verified_tls_with_a_password_from_the_environment() {
    let Some(url) = server_url("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let _servers = support::lock_servers();
    let target = leak_target(&url);
    let wrong_ca = std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").unwrap();
    for (target, password, says) in [
        // TLS verified and the password taken: only the missing extension stops it.
        (
            target.clone(),
            SECRET,
            "the pgvector extension is not installed",
        ),
        (
            target.clone(),
            "not-the-password",
            "password authentication failed",
        ),
        (
            with_param(&target, "sslrootcert", &wrong_ca),
            SECRET,
            "not signed by a trusted CA",
        ),
        (
            target.replacen("127.0.0.1", "127.0.0.2", 1),
            SECRET,
            "the certificate of 127.0.0.2 did not verify",
        ),
        (
            with_param(&target, "sslmode", "disable"),
            SECRET,
            "accepts only TLS",
        ),
    ] {
        let (code, stderr, made) = vector_bench(&target, password);
        assert_eq!(code, Some(2), "{target}: {stderr}");
        assert!(stderr.contains(says), "{target}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(password), "{stderr}");
        assert!(!made, "nothing made: {target}");
    }
}

#[test]
fn a_url_asking_chroma_or_qdrant_for_tls_is_refused_not_served_in_plaintext() {
    for target in [
        "chroma://127.0.0.1:8000?cacert=/etc/ssl/certs/ca-certificates.crt",
        "chroma://127.0.0.1:8000?sslmode=require",
        "qdrant://127.0.0.1:6334?sslmode=verify-full",
    ] {
        let (code, stderr, made) = vector_bench(target, SECRET);
        assert_eq!(code, Some(2), "{target}: {stderr}");
        assert!(
            stderr.contains("is not supported yet; connect in plaintext"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!made, "nothing made: {target}");
    }
}
