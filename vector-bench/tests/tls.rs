//! pgvector's connection over TLS and with a password from the environment, against the TLS-only
//! PostgreSQL 15 the test command starts on loopback (scripts/service/postgres.sh). That server
//! has no pgvector (Debian packages none for it, and the PostgreSQL 18 with pgvector here is
//! built without OpenSSL), so a good connection ends, after TLS and the password, at the
//! extension check: its one line says the handshake verified and the password was taken.
//! Chroma over https through the TLS terminator the test command starts in front of a Chroma
//! (scripts/service/chroma-tls.sh), with a token from the environment; the Qdrant server's
//! https against the same terminator, as far as a server that is not Qdrant can take it.

mod support;

use std::process::Command;

use common::testing::{on_server, with_param};

const SECRET_VAR: &str = "FAIRBENCH_PASSWORD_PGV";
const SECRET: &str = "zq-leak-check-vec-51c2";

/// What a short run that is expected to stop in the connect phase left: exit code, stdout,
/// stderr (trimmed), and whether a results folder was made.
struct Refused {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    made: bool,
}

/// vector-bench on `target` (`NAME=URL`), small sizes, with `env` set and `extra` arguments.
fn refused_run(target: &str, env: &[(&str, &str)], extra: &[&str]) -> Refused {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_vector-bench"))
        .args(["--target", target, "--output"])
        .arg(&out)
        .args(["--quiet", "--rows", "100", "--dims", "8", "--queries", "5"])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Refused {
        code: ran.status.code(),
        stdout: String::from_utf8_lossy(&ran.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&ran.stderr).trim().to_owned(),
        made: out.exists(),
    }
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
    let Some((url, _servers)) = on_server("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
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
        let Refused {
            code, stderr, made, ..
        } = refused_run(&format!("pgv={target}"), &[(SECRET_VAR, password)], &[]);
        assert_eq!(code, Some(2), "{target}: {stderr}");
        assert!(stderr.contains(says), "{target}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(password), "{stderr}");
        assert!(!made, "nothing made: {target}");
    }
}

const QDRANT_KEY_VAR: &str = "FAIRBENCH_API_KEY_QD";
const QDRANT_KEY: &str = "zq-leak-check-qdrant-0b9f";

/// vector-bench on `url` (named `qd`) with the API key in the environment and `SSL_CERT_FILE`
/// naming `roots` (the system's roots, for qdrant-client and for the probe).
fn qdrant_run(url: &str, roots: &str, extra: &[&str]) -> Refused {
    refused_run(
        &format!("qd={url}"),
        &[(QDRANT_KEY_VAR, QDRANT_KEY), ("SSL_CERT_FILE", roots)],
        extra,
    )
}

/// The Qdrant server's https, against the TLS terminator of the Chroma test (no Qdrant server
/// can be installed here). qdrant-client trusts only the system's roots, so `SSL_CERT_FILE`
/// names the test CA: with it, the probe and the client's own handshake verify and the run stops
/// at the gRPC health check, which that HTTP/1 server cannot answer; with the wrong CA the
/// certificate is refused. What the client cannot do (a CA file in the URL, a weaker mode,
/// `--insecure-skip-verify`) is refused before anything is connected. One line and exit 2
/// each, no results folder, and the API key in none of it.
#[test]
fn qdrant_over_https_verifies_against_the_system_roots_and_refuses_what_its_client_cannot_do() {
    let Some((chroma, _servers)) = on_server("FAIRBENCH_TEST_CHROMA_TLS_URL") else {
        return;
    };
    let ca = std::env::var("FAIRBENCH_TEST_TLS_CA").unwrap();
    let wrong_ca = std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").unwrap();
    let authority = chroma
        .split_once("://")
        .unwrap()
        .1
        .split_once('?')
        .unwrap()
        .0;
    let url = format!("qdrant://{authority}?sslmode=verify-full");
    for (url, roots, extra, says) in [
        (
            url.clone(),
            &ca,
            &[][..],
            "is the server running, and is this its gRPC port?",
        ),
        (
            url.clone(),
            &wrong_ca,
            &[],
            "did not verify: it is not signed by a trusted CA (UnknownIssuer); qdrant-client \
             trusts only the system's roots: point SSL_CERT_FILE at the CA that signed it",
        ),
        (
            with_param(&url, "cacert", &ca),
            &ca,
            &[],
            "point SSL_CERT_FILE at the CA bundle",
        ),
        (
            url.replace("verify-full", "require"),
            &ca,
            &[],
            "sslmode=require asks for less than the client checks",
        ),
        (
            url.clone(),
            &ca,
            &["--insecure-skip-verify"],
            "--insecure-skip-verify cannot apply",
        ),
    ] {
        let Refused {
            code,
            stdout,
            stderr,
            made,
        } = qdrant_run(&url, roots, extra);
        assert_eq!(code, Some(2), "{url}: {stderr}");
        assert_eq!(stdout, "", "{url}");
        assert!(stderr.contains(says), "{url}: {stderr}");
        if roots == &ca && extra.is_empty() && !url.contains("cacert") {
            assert!(!stderr.contains("certificate"), "{url}: {stderr}");
        }
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(QDRANT_KEY), "{stderr}");
        assert!(!made, "nothing made: {url}");
    }
}

const CHROMA_TOKEN_VAR: &str = "FAIRBENCH_PASSWORD_CHR";
const CHROMA_TOKEN: &str = "zq-leak-check-chroma-7d3e";

/// What one run of vector-bench against Chroma (named `chr`) left: exit code, stdout, stderr,
/// the results folder (if made) and the folder holding it.
struct ChromaRun {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A short sweep (one ef, one round) on `url` with the token in the environment.
fn chroma_run(url: &str, extra: &[&str]) -> ChromaRun {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let ran = Command::new(env!("CARGO_BIN_EXE_vector-bench"))
        .args(["--target", &format!("chr={url}"), "--output"])
        .arg(&out)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args([
            "--quiet",
            "--namespace",
            "fbtls",
            "--variants",
            "f32",
            "--filters",
            "none",
            "--ef",
            "16",
            "--rounds",
            "1",
            "--warmup",
            "1",
            "--duration",
            "200ms",
            "--connections",
            "2",
            "--rows",
            "300",
            "--dims",
            "8",
            "--queries",
            "10",
        ])
        .args(extra)
        .env(CHROMA_TOKEN_VAR, CHROMA_TOKEN)
        .output()
        .unwrap();
    ChromaRun {
        code: ran.status.code(),
        stdout: ran.stdout,
        stderr: String::from_utf8_lossy(&ran.stderr).trim().to_owned(),
        out,
        _dir: dir,
    }
}

/// Chroma behind the test command's TLS terminator (scripts/service/chroma-tls.sh: stunnel with
/// the test CA's certificate): verified with the right CA the sweep runs and the system records
/// what TLS negotiated; `--insecure-skip-verify` runs and labels every cell; the token from
/// `FAIRBENCH_PASSWORD_CHR` is in no byte either run wrote.
#[test]
fn chroma_runs_over_verified_https_and_the_token_is_never_written() {
    let Some((url, _servers)) = on_server("FAIRBENCH_TEST_CHROMA_TLS_URL") else {
        return;
    };
    let verified = chroma_run(&url, &[]);
    let insecure_url = url.split_once('?').unwrap().0.to_owned() + "?sslmode=require";
    let insecure = chroma_run(&insecure_url, &["--insecure-skip-verify"]);
    for (run, verification) in [
        (&verified, "verify-full"),
        (&insecure, "none (--insecure-skip-verify)"),
    ] {
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let report = common::testing::read_json(&run.out);
        let system = report["systems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "chr")
            .expect("the Chroma system");
        let tls = &system["verified"];
        assert!(
            tls["tls_version"].as_str().unwrap().starts_with("TLSv1."),
            "{tls}"
        );
        assert!(
            tls["tls_cipher"].as_str().unwrap().starts_with("TLS"),
            "{tls}"
        );
        assert_eq!(tls["tls_verification"], verification, "{tls}");
        let cells: Vec<_> = report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["system"] == "chr")
            .collect();
        assert!(!cells.is_empty());
        let labelled = |c: &&serde_json::Value| {
            c["labels"]
                .as_array()
                .is_some_and(|l| l.iter().any(|l| l == "insecure-skip-verify"))
        };
        if verification == "verify-full" {
            assert_eq!(
                tls["tls_ca"],
                std::env::var("FAIRBENCH_TEST_TLS_CA").unwrap()
            );
            assert!(!cells.iter().any(labelled), "no label when verified");
        } else {
            assert!(cells.iter().all(labelled), "every cell labelled");
            assert!(
                run.stderr.contains("--insecure-skip-verify"),
                "{}",
                run.stderr
            );
        }
        common::testing::assert_no_secret(
            &run.out,
            &run.stdout,
            run.stderr.as_bytes(),
            CHROMA_TOKEN,
        );
    }
}

/// The wrong CA and a plaintext request to the TLS
/// port: one line each, exit 2, no results folder, no token in it.
#[test]
fn chroma_over_https_refuses_a_bad_certificate_and_plaintext_in_one_line() {
    let Some((url, _servers)) = on_server("FAIRBENCH_TEST_CHROMA_TLS_URL") else {
        return;
    };
    let wrong_ca = std::env::var("FAIRBENCH_TEST_TLS_WRONG_CA").unwrap();
    let plain = url.split_once('?').unwrap().0.to_owned();
    for (target, says) in [
        (
            with_param(&url, "cacert", &wrong_ca),
            "the certificate of 127.0.0.1 did not verify",
        ),
        (plain, "is this a TLS port?"),
    ] {
        let run = chroma_run(&target, &[]);
        assert_eq!(run.code, Some(2), "{target}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{target}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(!run.stderr.contains(CHROMA_TOKEN), "{}", run.stderr);
        assert!(!run.out.exists(), "nothing made: {target}");
    }
}
