//! Records the version of the embedded broker as Cargo resolved it (from the workspace's
//! Cargo.lock), so reports state it without anyone typing it by hand.

use std::path::Path;

fn main() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let version = locked_version(&text, "rumqttd").unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=FAIRBENCH_RUMQTTD_VERSION={version}");
}

/// The `version` of the `[[package]]` named `name` in a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next()?.trim().strip_prefix("version = \"")?;
            return version.strip_suffix('"').map(str::to_owned);
        }
    }
    None
}
