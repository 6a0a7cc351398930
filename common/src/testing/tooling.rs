//! The check every tool's tests make of its `compare` and `report` subcommands, on two real runs
//! of the tool's own binary: the verdict lines, the exit codes (a doctored candidate whose
//! rounds are a quarter as fast exits 1 with `--fail-on regression`), the refusals (different
//! options, another tool, a corrupt or missing file: one line, exit 2), and `report` rebuilding
//! every export from results.json alone; and [`Tool::assert_two_runs`], which makes the two runs
//! and checks all of that (each tool's tests/tooling.rs is one call of it); and [`manifest`],
//! `k8s-manifest` in-process, for the tests of what a tool's manifest refuses.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::read_json;

/// The arguments every two-run check adds: three measured rounds (a verdict needs three a side)
/// after one warm-up, no progress output.
const THREE_ROUNDS: [&str; 7] = ["--quiet", "--rounds", "3", "--warmup", "1", "--forks", "1"];

/// The files every run writes (and `report` rebuilds).
const RUN_FILES: [&str; 3] = ["results.csv", "report.html", "report.md"];

/// A tool's binary and the short run its `compare`/`report` check is made on.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tool {
    /// The binary (`env!("CARGO_BIN_EXE_<tool>")`).
    pub bin: &'static str,
    /// What comes before `--output DIR` (a suite's name), space-separated.
    pub before: &'static str,
    /// The tool's own short settings, space-separated (three rounds, one warm-up and `--quiet`
    /// are added).
    pub quick: &'static str,
    /// A flag given a folder both runs share (a cache, as a user's runs would share it).
    pub shared_dir_flag: Option<&'static str>,
    /// Files the run writes besides results.csv, report.html and report.md.
    pub files: &'static [&'static str],
    /// Words the run's stdout must hold.
    pub stdout_says: &'static [&'static str],
}

impl Tool {
    /// Runs the tool twice into `dir` (`a` and `b`), checks what the first run wrote, then
    /// [`assert_compare_and_report`] on the two, and (feature `browser`) that the first run's
    /// report.html renders in chromium.
    pub fn assert_two_runs(&self, dir: &Path) {
        let (a, b) = (dir.join("a"), dir.join("b"));
        self.run(&a, dir);
        self.run(&b, dir);
        for file in RUN_FILES.iter().chain(self.files) {
            assert!(a.join(file).is_file(), "the run wrote no {file}");
        }
        let bin = Path::new(self.bin);
        assert_compare_and_report(bin, &a, &b, &dir.join("scratch"));
        #[cfg(feature = "browser")]
        super::assert_html_renders(&a);
    }

    /// One run into `output`; `shared` goes to [`Tool::shared_dir_flag`].
    fn run(&self, output: &Path, shared: &Path) {
        let mut args: Vec<&str> = self.before.split_whitespace().collect();
        args.extend(["--output", text(output)]);
        if let Some(flag) = self.shared_dir_flag {
            args.extend([flag, text(shared)]);
        }
        args.extend(THREE_ROUNDS);
        args.extend(self.quick.split_whitespace());
        let ran = run_bin(Path::new(self.bin), &args);
        // 1: the run finished with a cell that is not ok (a loaded machine can do that);
        // compare and report take such a run as they take any other.
        assert!(matches!(ran.code, Some(0 | 1)), "{ran:#?}");
        for says in self.stdout_says {
            assert!(
                ran.stdout.contains(says),
                "the run's summary: {}",
                ran.stdout
            );
        }
    }
}

/// What one command left: its exit code, stdout and stderr.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `bin ARGS…` to its end.
pub fn run_bin(bin: &Path, args: &[&str]) -> Ran {
    let output = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Runs `bin` on `args` and requires exit `code`, returning what it printed.
fn expect(bin: &Path, args: &[&str], code: i32) -> Ran {
    let ran = run_bin(bin, args);
    assert_eq!(
        ran.code,
        Some(code),
        "{} {}: {ran:#?}",
        bin.display(),
        args.join(" ")
    );
    ran
}

/// A copy of the run in `from` (results.json only) at `to`, `edit`ed.
fn doctored(from: &Path, to: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    let mut json = read_json(from);
    edit(&mut json);
    std::fs::write(
        to.join("results.json"),
        serde_json::to_vec_pretty(&json).unwrap(),
    )
    .unwrap();
    to.to_owned()
}

/// Every per-round throughput (and its median, min and max) of every cell times `factor`.
fn scale_throughput(json: &mut Value, factor: f64) {
    for cell in json["cells"].as_array_mut().expect("cells") {
        let Some(throughput) = cell.get_mut("throughput").filter(|t| t.is_object()) else {
            continue;
        };
        for key in ["median", "min", "max"] {
            if let Some(v) = throughput[key].as_f64() {
                throughput[key] = (v * factor).into();
            }
        }
        if let Some(rounds) = throughput["rounds"].as_array_mut() {
            for r in rounds.iter_mut() {
                *r = (r.as_f64().expect("a figure") * factor).into();
            }
        }
    }
}

/// The `workload · system` of every cell in both runs.
fn common_cells(a: &Value, b: &Value) -> Vec<String> {
    let key = |c: &Value| {
        format!(
            "{} · {}",
            c["workload"].as_str().unwrap(),
            c["system"].as_str().unwrap()
        )
    };
    let theirs: Vec<String> = b["cells"].as_array().unwrap().iter().map(key).collect();
    a["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(key)
        .filter(|k| theirs.contains(k))
        .collect()
}

/// The throughput verdict of each cell of `compare --format json`'s output.
fn throughput_verdicts(json: &str) -> Vec<(String, Option<String>)> {
    let comparison: Value = serde_json::from_str(json).expect("compare --format json parses");
    comparison["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let key = format!(
                "{} · {}",
                c["workload"].as_str().unwrap(),
                c["system"].as_str().unwrap()
            );
            let throughput = c["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == "throughput")
                .expect("a throughput metric");
            let verdict = throughput["verdict"]["verdict"].as_str().map(str::to_owned);
            (key, verdict)
        })
        .collect()
}

/// Checks `bin compare` and `bin report` on the real runs `a` and `b` of `bin`'s tool (each
/// with 3 measured rounds or more, the same options), using `scratch` for doctored copies.
pub fn assert_compare_and_report(bin: &Path, a: &Path, b: &Path, scratch: &Path) {
    let (ja, jb) = (read_json(a), read_json(b));
    let cells = common_cells(&ja, &jb);
    assert!(!cells.is_empty(), "the two runs share no cell");

    // Two real runs: every common cell gets a line with a verdict or a reason, exit 0.
    let ran = expect(bin, &["compare", text(a), text(b)], 0);
    for cell in &cells {
        let line = ran
            .stdout
            .lines()
            .find(|l| l.starts_with(cell.as_str()))
            .unwrap_or_else(|| panic!("no line for {cell}:\n{}", ran.stdout));
        assert!(
            [
                "faster",
                "slower",
                "parity",
                "inconclusive",
                "no verdict",
                "—"
            ]
            .iter()
            .any(|v| line.contains(v)),
            "{line}"
        );
    }
    let ran = expect(bin, &["compare", text(a), text(b), "--format", "json"], 0);
    assert_eq!(throughput_verdicts(&ran.stdout).len(), cells.len());

    // A run against itself never regresses: its throughput is at parity or inconclusive.
    let ran = expect(
        bin,
        &[
            "compare",
            text(a),
            text(a),
            "--fail-on",
            "regression",
            "--format",
            "json",
        ],
        0,
    );
    for (cell, verdict) in throughput_verdicts(&ran.stdout) {
        assert!(
            matches!(verdict.as_deref(), None | Some("parity" | "inconclusive")),
            "{cell} against itself: {verdict:?}"
        );
    }

    // A candidate whose rounds are a quarter as fast, both runs of one process: no verdict
    // across runs (run-to-run variance is not measured), unless assumed stable; then slower,
    // and exit 1 for CI.
    let slow = doctored(a, &scratch.join("quarter"), |j| scale_throughput(j, 0.25));
    let ran = expect(
        bin,
        &["compare", text(a), text(&slow), "--fail-on", "regression"],
        0,
    );
    assert!(ran.stdout.contains("Regressions (0)"), "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("one process: run-to-run variance not measured")
    );
    let ran = expect(
        bin,
        &[
            "compare",
            text(a),
            text(&slow),
            "--fail-on",
            "regression",
            "--assume-stable",
        ],
        1,
    );
    let slower: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.contains(": throughput 0.25× [") && l.ends_with("slower"))
        .collect();
    assert!(!slower.is_empty(), "{}", ran.stdout);
    let out = scratch.join("compare-out");
    let out_arg = text(&out).to_owned();
    expect(
        bin,
        &[
            "compare",
            text(a),
            text(b),
            "--format",
            "md",
            "--output",
            &out_arg,
        ],
        0,
    );
    assert!(out.join("compare.md").is_file() && out.join("compare.html").is_file());

    // Different options: refused with the difference named, unless allowed.
    let seed = ja["options"]["seed"].as_u64().expect("options.seed");
    let other = doctored(a, &scratch.join("seed"), |j| {
        j["options"]["seed"] = (seed + 1).into()
    });
    let ran = expect(bin, &["compare", text(a), text(&other)], 2);
    let named = format!("options: seed {seed} → {}", seed + 1);
    assert!(ran.stderr.contains(&named), "{}", ran.stderr);
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
    let ran = expect(
        bin,
        &[
            "compare",
            text(a),
            text(&other),
            "--allow-different-environment",
        ],
        0,
    );
    assert!(
        ran.stdout.contains(&format!("seed {seed} → {}", seed + 1)),
        "{}",
        ran.stdout
    );

    // Another tool's run, a corrupt file, a missing folder: one line, exit 2.
    let foreign = doctored(a, &scratch.join("foreign"), |j| {
        j["tool"] = "other-bench".into()
    });
    let corrupt = scratch.join("corrupt");
    std::fs::create_dir_all(&corrupt).unwrap();
    std::fs::write(corrupt.join("results.json"), "{\"schema_version\": ").unwrap();
    let missing = scratch.join("missing");
    for (bad, says) in [
        (&foreign, "is a other-bench run"),
        (&corrupt, "is not valid JSON"),
        (&missing, "no such file or folder"),
    ] {
        let ran = expect(bin, &["compare", text(a), text(bad)], 2);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
        assert!(ran.stderr.contains(says), "{}", ran.stderr);
    }

    // `report` rebuilds every export from results.json alone, the same as the run wrote them.
    let rebuilt = doctored(a, &scratch.join("rebuilt"), |_| {});
    let before = std::fs::read(rebuilt.join("results.json")).unwrap();
    expect(bin, &["report", text(&rebuilt)], 0);
    assert_eq!(std::fs::read(rebuilt.join("results.json")).unwrap(), before);
    for file in ["report.md", "report.html", "results.csv"] {
        assert!(rebuilt.join(file).is_file(), "report wrote no {file}");
    }
    assert_eq!(
        std::fs::read_to_string(rebuilt.join("report.md")).unwrap(),
        std::fs::read_to_string(a.join("report.md")).unwrap(),
        "report.md rebuilt from results.json is the run's own"
    );
    let hdr = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("hdr"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    assert_eq!(hdr(&rebuilt), hdr(a), "the same HDR files");
    expect(bin, &["report", text(&missing)], 2);
}

/// `TOOL k8s-manifest --workers 2 --image … --run-id run-1 -- ARGS…` in-process, with the
/// tool's `report` (and so its check of worker mode); the YAML goes to stdout.
pub fn manifest(
    tool: &str,
    report: &dyn crate::export::ToolReport,
    args: &[&str],
) -> anyhow::Result<crate::exit::Exit> {
    let manifest = crate::scale::manifest::ManifestArgs {
        workers: 2,
        image: "registry.example/fairbench:0.1".into(),
        name: None,
        run_id: Some("run-1".into()),
        port: 7447,
        deadline: std::time::Duration::from_secs(3600),
        storage: "1Gi".into(),
        token_secret: None,
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    crate::cli::run_tooling(&crate::cli::Tooling::K8sManifest(manifest), tool, report)
}
