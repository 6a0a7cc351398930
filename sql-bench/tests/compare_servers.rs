//! `sql-bench compare` on two real runs against PostgreSQL beside the embedded SQLite (three
//! short rounds each): everything `compare` promises on any two runs, and a baseline whose
//! server settings read back or whose data differ is refused with the difference named.

use std::path::{Path, PathBuf};

use common::testing::tooling::{assert_compare_and_report, run_bin};

const BIN: &str = env!("CARGO_BIN_EXE_sql-bench");

fn run(url: &str, output: &Path) {
    let target = format!("pg={url}");
    let args = [
        "crud",
        "--quiet",
        "--target",
        &target,
        "--target",
        "sqlite",
        "--duration",
        "200ms",
        "--rounds",
        "3",
        "--warmup",
        "1",
        "--forks",
        "1",
        "--connections",
        "2",
        "--output",
        output.to_str().unwrap(),
    ];
    let ran = run_bin(Path::new(BIN), &args);
    // 1: a cell that is not ok (a loaded machine can do that); compare takes such a run too.
    assert!(matches!(ran.code, Some(0 | 1)), "{ran:#?}");
}

/// A copy of the run in `from` whose `results.json` is changed by `edit`.
fn doctored(from: &Path, to: PathBuf, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    std::fs::create_dir_all(&to).unwrap();
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(from.join("results.json")).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(to.join("results.json"), serde_json::to_vec(&json).unwrap()).unwrap();
    to
}

fn compare(a: &Path, b: &Path) -> (Option<i32>, String, String) {
    let ran = run_bin(
        Path::new(BIN),
        &["compare", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    (ran.code, ran.stdout, ran.stderr)
}

#[test]
fn two_postgres_runs_compare_and_a_changed_server_setting_or_dataset_is_refused() {
    let Some((url, dir)) = common::testing::on_server("FAIRBENCH_TEST_POSTGRES_URL") else {
        return;
    };
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&url, &a);
    run(&url, &b);
    assert_compare_and_report(Path::new(BIN), &a, &b, &dir.path().join("scratch"));

    // The server's settings as read back: the same run with PostgreSQL's synchronous_commit
    // read as off is another environment.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("results.json")).unwrap()).unwrap();
    let pg = json["systems"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| s["name"] == "pg")
        .expect("the pg system");
    let setting = json["systems"][pg]["verified"]["synchronous_commit"]
        .as_str()
        .expect("synchronous_commit read back from the server")
        .to_owned();
    let unsynced = doctored(&a, dir.path().join("unsynced"), |j| {
        j["systems"][pg]["verified"]["synchronous_commit"] = "off".into();
    });
    let (code, stdout, stderr) = compare(&a, &unsynced);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("pg verified synchronous_commit {setting} → off")),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");

    // Another dataset (its checksum) is another environment too.
    let checksum = json["data"]["checksum"]
        .as_str()
        .expect("data.checksum")
        .to_owned();
    let other_data = doctored(&a, dir.path().join("data"), |j| {
        j["data"]["checksum"] = "0000000000000000".into();
    });
    let (code, _, stderr) = compare(&a, &other_data);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("data: checksum {checksum} → 0000000000000000")),
        "{stderr}"
    );
}
