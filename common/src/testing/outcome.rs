//! What a server test asserts of a run's outcome: a run that measured every cell (and wrote
//! results that match the schema), a run refused in one line before anything was made (and
//! why: a CA that did not sign the server's certificate), the settings a system read back,
//! the label every cell of a run carries, and a child process that exited 0.

use std::path::Path;
use std::process::Output;

use crate::results::{Report, SystemInfo};

/// Fails the test unless the run measured every cell (exit 0; the cells are shown
/// otherwise) and `dir`'s `results.json` validates against the schema.
#[cfg(feature = "schema")]
pub fn assert_all_ok(summary: &crate::run::Summary, dir: &Path) {
    assert_eq!(
        summary.exit,
        crate::exit::Exit::AllOk,
        "{:#?}",
        summary.report.cells
    );
    super::assert_matches_schema(dir);
}

/// Fails the test unless `report` judged some pair and every pair against `reference`, as a
/// verdict or as the reason there is none (two rounds give no verdict): an empty list would
/// pass an `all`, so the pairs must be there.
pub fn assert_judged_against(report: &Report, reference: &str) {
    let references: Vec<&str> = report
        .verdicts
        .iter()
        .map(|v| v.reference.as_str())
        .chain(report.no_verdicts.iter().map(|n| n.reference.as_str()))
        .collect();
    assert!(
        !references.is_empty() && references.iter().all(|r| *r == reference),
        "{references:?}"
    );
}

/// The names of `report`'s systems, in its order.
pub fn system_names(report: &Report) -> Vec<&str> {
    report.systems.iter().map(|s| s.name.as_str()).collect()
}

/// The message of a call that must be refused (its outermost error alone); panics when the
/// call was accepted.
pub fn refusal<T, E: std::fmt::Display>(result: Result<T, E>) -> String {
    match result {
        Ok(_) => panic!("accepted, not refused"),
        Err(e) => e.to_string(),
    }
}

/// The error of a run that must be refused: it is one line, and `out` was not made.
pub fn assert_refused<T>(ran: anyhow::Result<T>, out: &Path) -> String {
    let error = refusal(ran);
    assert!(!error.contains('\n'), "one line: {error}");
    assert!(!out.exists(), "nothing made for a refused run");
    error
}

/// Fails the test unless `error` (of a refused run) says the certificate of the server on
/// 127.0.0.1 did not verify because the CA given did not sign it.
pub fn assert_untrusted_ca(error: &str) {
    assert!(
        error.contains("the certificate of 127.0.0.1 did not verify")
            && error.contains("not signed by a trusted CA"),
        "{error}"
    );
}

/// Fails the test unless `system` read back each setting of `expected` (setting, value) with
/// that value, naming the setting and showing every one it read.
pub fn assert_verified(system: &SystemInfo, expected: &[(&str, &str)]) {
    for &(setting, value) in expected {
        assert_eq!(
            system.verified.get(setting).map(String::as_str),
            Some(value),
            "{}: {setting} in {:?}",
            system.name,
            system.verified
        );
    }
}

/// Fails the test unless `report` has cells and every one carries `label`.
pub fn assert_every_cell_labelled(report: &Report, label: &str) {
    assert!(!report.cells.is_empty(), "no cell measured");
    for cell in &report.cells {
        assert!(cell.labels.iter().any(|l| l == label), "{cell:?}");
    }
}

/// `url` with the scheme `tls` replaced by `plain` and its query (the TLS parameters)
/// dropped: the same server asked for without TLS.
pub fn without_tls(url: &str, tls: &str, plain: &str) -> String {
    let url = url.replacen(tls, plain, 1);
    url.split('?').next().unwrap_or_default().to_owned()
}

/// Fails the test unless the run that wrote to `out` exited 0, showing its stderr and, when
/// it got as far as results.json, every cell that was not ok with its reason (a `--quiet` run
/// that exits 1 says nothing else).
pub fn assert_exited_ok(ran: &Output, out: &Path) {
    if ran.status.success() {
        return;
    }
    let cells = std::fs::read(out.join("results.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Report>(&bytes).ok())
        .map(|report| super::job::not_ok(&report));
    panic!(
        "exited {:?}; stderr: {}; cells not ok: {cells:?}",
        ran.status.code(),
        String::from_utf8_lossy(&ran.stderr)
    );
}
