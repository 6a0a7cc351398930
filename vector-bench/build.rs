//! Names the qdrant-edge version the binary was built with: the crate has no version constant,
//! so it is read from the workspace's Cargo.lock (the exact pin in Cargo.toml keeps them equal).

fn main() {
    let manifest =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock = manifest.join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let mut lines = text.lines();
    let mut version = String::from("unknown");
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"qdrant-edge\"" {
            if let Some(next) = lines.next() {
                version = next
                    .trim()
                    .trim_start_matches("version = ")
                    .trim_matches('"')
                    .to_owned();
            }
            break;
        }
    }
    println!("cargo:rustc-env=QDRANT_EDGE_VERSION={version}");
}
