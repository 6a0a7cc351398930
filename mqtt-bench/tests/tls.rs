//! `mqtts://` end to end against a Mosquitto of the test's own whose only listener is TLS (on
//! loopback, with the test CA's certificate: the test command's, or one `scripts/tls-certs`
//! makes here) and which takes only a password: a verified connection records the TLS version
//! and cipher, the password given by `FAIRBENCH_PASSWORD_<NAME>` reaches no byte the run
//! writes; a wrong CA, a plaintext client against the TLS port and bad TLS input are each one
//! line, exit 2, no results folder; `--insecure-skip-verify` connects and labels every cell.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::testing::{assert_exited_ok, assert_no_secret, with_param};
use support::*;

const SECRET: &str = "zq-leak-check-mqtt-7c1e";
const MQTT_BENCH: &str = env!("CARGO_BIN_EXE_mqtt-bench");

/// A folder with the test CA (`ca.pem`), the server's certificate and key for 127.0.0.1, and
/// a CA that signed nothing (`wrong-ca.pem`): the test command's, else made by
/// `scripts/tls-certs` in `scratch`.
fn certificates(scratch: &Path) -> PathBuf {
    if let Ok(ca) = std::env::var("FAIRBENCH_TEST_TLS_CA") {
        return Path::new(&ca).parent().unwrap().to_owned();
    }
    let dir = scratch.join("tls");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/tls-certs");
    let made = Command::new(script).arg(&dir).status().unwrap();
    assert!(made.success(), "scripts/tls-certs failed");
    dir
}

/// A Mosquitto whose one listener is TLS and which takes user `fairbench` with [`SECRET`] only.
fn tls_mosquitto() -> Option<OwnMosquitto> {
    if !mosquitto_installed() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    // Mosquitto started as root reads its files as user mosquitto.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let certs = certificates(dir.path());
    let passwords = dir.path().join("passwords");
    std::fs::write(&passwords, "").unwrap();
    let set = Command::new("mosquitto_passwd")
        .arg("-b")
        .arg(&passwords)
        .args(["fairbench", SECRET])
        .status()
        .expect("mosquitto_passwd (Debian's mosquitto package) runs");
    assert!(set.success());
    std::fs::set_permissions(
        &passwords,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let port = common::testing::free_port();
    let c = |file: &str| certs.join(file).display().to_string();
    let config = format!(
        "per_listener_settings false\nallow_anonymous false\npassword_file {}\npersistence false\n\
         log_dest stderr\nlistener {port} 127.0.0.1\ncafile {}\ncertfile {}\nkeyfile {}\n\
         tls_version tlsv1.2\n",
        passwords.display(),
        c("ca.pem"),
        c("server.pem"),
        c("server.key"),
    );
    let mut broker = OwnMosquitto::launch(&config, ("127.0.0.1", port), "mqtts", dir);
    broker.url = format!("mqtts://fairbench@127.0.0.1:{port}?cacert={}", c("ca.pem"));
    Some(broker)
}

/// One short QoS 1 window on `broker` as system `m`, its password from the variable.
/// A paced QoS 1 window (5,000 messages/s): what is checked here is TLS and the password, and a
/// closed-loop window of a debug build over TLS on a busy machine can outrun its own subscriber
/// past Mosquitto's queue of 1,000 (seed 000's setting), which then drops messages.
fn mqtt_bench(out: &Path, broker: &str, extra: &[&str]) -> Output {
    Command::new(MQTT_BENCH)
        .args(["--broker", &format!("m={broker}")])
        .args(["--scenarios", "qos1", "--duration", "300ms", "--rate", "5k"])
        .args(["--rounds", "1", "--warmup", "0", "--quiet", "--output"])
        .arg(out)
        .args(extra)
        .env("FAIRBENCH_PASSWORD_M", SECRET)
        .output()
        .unwrap()
}

/// A refusal: exit 2, one line containing every one of `expected`, nothing made, no secret.
fn assert_refused(out: &Path, broker: &str, expected: &[&str]) {
    let ran = mqtt_bench(out, broker, &[]);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "{broker}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    for text in expected {
        assert!(stderr.contains(text), "{broker}: {stderr}");
    }
    assert!(!stderr.contains(SECRET), "{stderr}");
    assert!(!out.exists(), "nothing made for {broker}");
}

fn wrong_ca(url: &str) -> String {
    let ca = common::urlparts::param(url, &["cacert"]).unwrap().1;
    let wrong = Path::new(&ca).with_file_name("wrong-ca.pem");
    let bare = common::tls::strip_params(url);
    with_param(&bare, "cacert", &wrong.display().to_string())
}

#[test]
fn mqtts_is_verified_recorded_and_its_password_never_written() {
    let Some(broker) = tls_mosquitto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("verified");
    let ran = mqtt_bench(&out, &broker.url, &[]);
    assert_exited_ok(&ran, &out);
    assert_no_secret(&out, &ran.stdout, &ran.stderr, SECRET);
    assert_matches_schema(&out);
    let json = read_json(&out);
    let system = &json["systems"][0];
    let verified = &system["verified"];
    let text = |key: &str| verified[key].as_str().unwrap_or_default().to_owned();
    assert!(text("tls_version").starts_with("TLSv1."), "{verified}");
    assert!(text("tls_cipher").starts_with("TLS_"), "{verified}");
    assert_eq!(text("tls_verification"), "verify-full");
    assert!(text("tls_ca").ends_with("ca.pem"), "{verified}");
    assert!(text("tls_handshake_ms").parse::<f64>().unwrap() > 0.0);
    assert_eq!(system["labels"].as_array().map_or(0, Vec::len), 0);
    let cell = &json["cells"][0];
    assert_eq!(cell["status"], "ok", "{cell}");
    let delivery = &cell["extra"]["delivery"];
    assert!(delivery["sent"].as_u64().unwrap() > 0, "{delivery}");
    assert_eq!(delivery["lost"], 0, "{delivery}");

    let refused = dir.path().join("refused");
    let wrong = wrong_ca(&broker.url);
    assert_refused(
        &refused,
        &wrong,
        &[
            "the certificate of 127.0.0.1 did not verify",
            "not signed by a trusted CA",
        ],
    );
    let plaintext = common::tls::strip_params(&broker.url).replacen("mqtts://", "mqtt://", 1);
    assert_refused(&refused, &plaintext, &["use mqtts://"]);
    let ca_on_plaintext = with_param(&plaintext, "cacert", "/nonexistent/ca.pem");
    assert_refused(&refused, &ca_on_plaintext, &["use mqtts://"]);
    let missing = wrong.replace("wrong-ca.pem", "missing-ca.pem");
    assert_refused(&refused, &missing, &["CA file", "missing-ca.pem"]);
    assert_refused(
        &refused,
        &with_param(&broker.url, "sslmode", "disable"),
        &["mqtts:// always uses TLS"],
    );
}

#[test]
fn insecure_skip_verify_takes_the_wrong_ca_and_labels_every_cell() {
    let Some(broker) = tls_mosquitto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("insecure");
    let ran = mqtt_bench(&out, &wrong_ca(&broker.url), &["--insecure-skip-verify"]);
    assert_exited_ok(&ran, &out);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("--insecure-skip-verify"), "loud: {stderr}");
    assert_no_secret(&out, &ran.stdout, &ran.stderr, SECRET);
    let report = common::testing::read_report(&out);
    let system = &report.systems[0];
    assert_eq!(
        system.verified["tls_verification"],
        "none (--insecure-skip-verify)"
    );
    assert!(system.verified["tls_version"].starts_with("TLSv1."));
    assert!(!report.cells.is_empty());
    for cell in &report.cells {
        assert!(
            cell.labels.iter().any(|l| l == "insecure-skip-verify"),
            "{cell:?}"
        );
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("insecure-skip-verify"), "{markdown}");
}

/// A connect storm against the TLS Mosquitto: every connection's TLS handshake is recorded on
/// its own (percentiles in the cell's extra, its figures, the report's storm table), apart from
/// the CONNACK latency, which is then TCP, CONNECT and CONNACK only.
#[test]
fn a_connect_storm_over_mqtts_records_the_tls_handshake_apart_from_the_connack() {
    let Some(broker) = tls_mosquitto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storm");
    let ran = Command::new(MQTT_BENCH)
        .args(["--broker", &format!("m={}", broker.url)])
        .args(["--scenarios", "connect", "--clients", "60"])
        .args(["--connect-rate", "300", "--rounds", "1", "--warmup", "0"])
        .args(["--quiet", "--output"])
        .arg(&out)
        .env("FAIRBENCH_PASSWORD_M", SECRET)
        .output()
        .unwrap();
    assert_exited_ok(&ran, &out);
    assert_no_secret(&out, &ran.stdout, &ran.stderr, SECRET);
    let json = read_json(&out);
    let cell = &json["cells"][0];
    assert_eq!(cell["status"], "ok", "{cell}");
    let extra = &cell["extra"];
    let round = &extra["rounds"][0];
    let tls = &round["tls_handshake_ns"];
    let connack = &round["connack_latency_ns"];
    let at = |p: &serde_json::Value, key: &str| p[key].as_u64().unwrap_or(0);
    assert!(
        at(tls, "p50") > 0,
        "a handshake time per connection: {extra}"
    );
    assert!(at(tls, "p99") >= at(tls, "p50"), "{tls}");
    assert!(at(connack, "p50") > 0, "{extra}");
    let figures = &extra["figures"];
    assert_eq!(figures["connected"], 60.0, "{figures}");
    assert_eq!(figures["tls_handshake_p50_ns"], at(tls, "p50") as f64);
    // The cell's latency is the CONNACK's, with the handshake taken out.
    assert_eq!(cell["latency_ns"]["p50"], connack["p50"], "{cell}");
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    let row = markdown
        .lines()
        .find(|l| l.contains("TLS handshake p50 / p99 (not in the CONNACK figures)"))
        .unwrap_or_else(|| panic!("a TLS handshake row in the storm table: {markdown}"));
    assert!(!row.contains('–'), "{row}");
}
