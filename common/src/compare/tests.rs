//! `compare` on synthetic runs: parity with itself, a 30% regression, refused differences,
//! and every kind of bad input.

use std::path::{Path, PathBuf};

use super::*;
use crate::results::Throughput;

const TOOL: &str = "sql-bench";

fn write(dir: &Path, name: &str, report: &Report) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("results.json"),
        crate::export::results_json(report),
    )
    .unwrap();
    folder
}

fn args(baseline: &Path, candidate: &Path) -> CompareArgs {
    CompareArgs {
        baseline: baseline.to_owned(),
        candidate: candidate.to_owned(),
        threshold: 0.05,
        fail_on: Some(FailOn::Regression),
        allow_different_environment: false,
        assume_stable: true,
        format: Format::Text,
        output: None,
    }
}

/// The fixture with every round of every cell's throughput scaled by `factor`.
fn scaled(factor: f64) -> Report {
    let mut report = crate::export::fixture::report();
    for cell in &mut report.cells {
        if let Some(t) = &cell.throughput {
            let rounds = t.rounds.iter().map(|r| r * factor).collect();
            cell.throughput = Throughput::from_rounds(rounds);
        }
    }
    report
}

fn loaded(dir: &Path) -> crate::load::Loaded {
    crate::load::load(dir, TOOL).unwrap()
}

#[test]
fn a_run_is_at_parity_with_itself() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", &crate::export::fixture::report());
    let c = compare_runs(&loaded(&a), &loaded(&a), 0.05, true);
    assert_eq!(c.cells.len(), 9);
    assert!(c.differences.is_empty() && c.appeared.is_empty() && c.disappeared.is_empty());
    for cell in c.cells.iter().filter(|x| x.candidate_status == Status::Ok) {
        let t = &cell.metrics[0];
        let v = t.verdict.as_ref().unwrap();
        assert_eq!((v.ratio, v.verdict), (1.0, VerdictKind::Parity), "{cell:?}");
        assert_eq!(cell.metrics.len(), 3, "throughput, p50, p99");
        assert!(!cell.regressed);
    }
    assert!(c.regressions.is_empty());
    assert_eq!(run(&args(&a, &a), TOOL).unwrap(), Exit::AllOk);
}

#[test]
fn rounds_30_percent_slower_fail_with_fail_on_regression() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", &crate::export::fixture::report());
    let b = write(dir.path(), "b", &scaled(0.7));
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, true);
    let slower = c
        .cells
        .iter()
        .filter(|x| {
            x.metrics[0]
                .verdict
                .as_ref()
                .is_some_and(|v| v.verdict == VerdictKind::Slower)
        })
        .count();
    assert_eq!(slower, 8, "every measured cell");
    assert_eq!(c.regressions.len(), 8);
    assert!(
        c.regressions[0].starts_with("write 1c · sqlite: throughput 0.70× ["),
        "{}",
        c.regressions[0]
    );
    assert_eq!(run(&args(&a, &b), TOOL).unwrap(), Exit::NotAllOk);
    let without = CompareArgs {
        fail_on: None,
        ..args(&a, &b)
    };
    assert_eq!(
        run(&without, TOOL).unwrap(),
        Exit::AllOk,
        "only --fail-on fails"
    );
    // The other way round it is faster: no regression.
    assert_eq!(run(&args(&b, &a), TOOL).unwrap(), Exit::AllOk);
}

#[test]
fn a_cell_that_lost_its_ok_or_left_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let base = crate::export::fixture::report();
    let mut next = base.clone();
    next.cells[0].status = Status::Timeout;
    next.cells[0].reason = Some("still busy".into());
    next.cells.remove(1);
    let mut extra = next.cells[1].clone();
    extra.workload = "scan 16c".into();
    next.cells.push(extra);
    let (a, b) = (write(dir.path(), "a", &base), write(dir.path(), "b", &next));
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, true);
    assert!(
        c.regressions
            .contains(&"write 1c · sqlite: was ok, now timeout".to_owned())
    );
    assert_eq!((c.appeared.len(), c.disappeared.len()), (1, 1));
    let text = render_text(&c);
    assert!(text.contains("ok → timeout"), "{text}");
    assert!(text.contains("only in the candidate: scan 16c · mariadb (ok)"));
    assert!(text.contains("only in the baseline: write 1c · postgres (ok)"));
    assert_eq!(run(&args(&a, &b), TOOL).unwrap(), Exit::NotAllOk);
}

#[test]
fn different_options_or_data_are_refused_naming_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let base = crate::export::fixture::report();
    let mut other = base.clone();
    other.options["connections"] = 32.into();
    let mut data = base.clone();
    data.data.as_mut().unwrap().checksum = "0000000000000000".into();
    let a = write(dir.path(), "a", &base);
    let b = write(dir.path(), "b", &other);
    let d = write(dir.path(), "d", &data);
    assert_eq!(run(&args(&a, &b), TOOL).unwrap(), Exit::BadInput);
    assert_eq!(run(&args(&a, &d), TOOL).unwrap(), Exit::BadInput);
    let lines: Vec<String> = compare_runs(&loaded(&a), &loaded(&d), 0.05, true)
        .differences
        .iter()
        .map(Difference::line)
        .collect();
    assert_eq!(
        lines,
        ["data: checksum 9f86d081884c7d65 → 0000000000000000"]
    );
    // Allowed, every line says so.
    let allowed = CompareArgs {
        allow_different_environment: true,
        ..args(&a, &b)
    };
    assert_eq!(run(&allowed, TOOL).unwrap(), Exit::AllOk);
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, true);
    let table = render::table(&c);
    assert!(
        table
            .rows
            .iter()
            .all(|r| r.last().unwrap() == "[runs differ: options]")
    );
    let md = render_markdown(&c);
    assert!(md.contains("- options: connections 16 → 32"), "{md}");
    assert!(
        md.contains("- [runs differ: options] none: no cell is slower"),
        "{md}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let base = crate::export::fixture::report();
    let a = write(dir.path(), "a", &base);
    let mut geo = base.clone();
    geo.tool = "geo-bench".into();
    write(dir.path(), "g", &geo);
    let mut future = serde_json::to_value(&base).unwrap();
    future["schema_version"] = 2.into();
    std::fs::create_dir(dir.path().join("f")).unwrap();
    std::fs::write(dir.path().join("f/results.json"), future.to_string()).unwrap();
    std::fs::create_dir(dir.path().join("corrupt")).unwrap();
    std::fs::write(
        dir.path().join("corrupt/results.json"),
        "{\"schema_version\": 1,",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let error = |candidate: &str| {
        let e = run(&args(&a, &dir.path().join(candidate)), TOOL).unwrap_err();
        let text = format!("{e:#}");
        assert!(!text.contains('\n'), "one line: {text}");
        text
    };
    assert!(error("g").contains("is a geo-bench run, not a sql-bench one"));
    assert!(error("f").contains("has schema_version 2, this sql-bench reads version 1"));
    assert!(error("corrupt").contains("is not valid JSON"));
    assert!(error("empty").contains("has no results.json"));
    assert!(error("missing").contains("missing: no such file or folder"));
    // An output folder that cannot be made: refused, nothing written anywhere.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "keep").unwrap();
    let unwritable = CompareArgs {
        output: Some(blocker.join("out")),
        ..args(&a, &a)
    };
    let e = format!("{:#}", run(&unwritable, TOOL).unwrap_err());
    assert!(e.contains("cannot write the comparison into"), "{e}");
    assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "keep");
}

#[test]
fn output_writes_the_format_and_compare_html() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", &crate::export::fixture::report());
    let b = write(dir.path(), "b", &scaled(0.7));
    let out = dir.path().join("out");
    for format in [Format::Md, Format::Json] {
        let with = CompareArgs {
            output: Some(out.clone()),
            format,
            ..args(&a, &b)
        };
        assert_eq!(run(&with, TOOL).unwrap(), Exit::NotAllOk);
    }
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.starts_with("# sql-bench compare — crud"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(json["regressions"].as_array().unwrap().len(), 8);
    assert_eq!(
        json["cells"][0]["metrics"][0]["verdict"]["verdict"],
        "slower"
    );
    let html = out.join("compare.html");
    let systems = ["sqlite", "postgres", "mariadb"].map(str::to_owned);
    let png = out.join("compare.png");
    if let Some(summary) = crate::testing::check_page(&html, &systems, Some(&png)).unwrap() {
        assert!(
            summary.contains("compare-throughput (3 systems)"),
            "{summary}"
        );
    }
    if let Some(keep) = std::env::var_os("FAIRBENCH_KEEP_HTML") {
        for file in ["compare.html", "compare.png", "compare.md"] {
            let _ = std::fs::copy(out.join(file), Path::new(&keep).join(file));
        }
    }
}

/// The fixture's first ok cell measured in forks whose medians are `medians`, each fork's two
/// rounds within ±0.5% of its median.
fn forked(medians: &[f64]) -> Report {
    let mut report = crate::export::fixture::report();
    report.forks = medians
        .iter()
        .enumerate()
        .map(|(i, _)| crate::results::ForkRun {
            fork: i as u32 + 1,
            pid: 1000 + i as u32,
            ended: "exit 0".into(),
            started_at: None,
            finished_at: None,
            results: format!("forks/{}", i + 1),
            calibration: None,
        })
        .collect();
    report
        .cells
        .retain(|c| c.status == Status::Ok && c.throughput.is_some());
    report.cells.truncate(1);
    let cell = &mut report.cells[0];
    cell.latency_rounds_ns.clear();
    cell.forks = medians
        .iter()
        .enumerate()
        .map(|(i, m)| crate::results::ForkFigures {
            fork: i as u32 + 1,
            status: Status::Ok,
            reason: None,
            throughput: Some(*m),
            latency_p50_ns: None,
            latency_p99_ns: None,
            rounds: vec![m * 0.995, m * 1.005],
        })
        .collect();
    let rounds: Vec<f64> = cell.forks.iter().flat_map(|f| f.rounds.clone()).collect();
    cell.throughput = Throughput::from_rounds(rounds);
    report
}

fn throughput_verdict(c: &Comparison) -> &MetricComparison {
    &c.cells[0].metrics[0]
}

#[test]
fn forks_that_disagree_widely_give_no_verdict_though_each_ones_rounds_agree() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", &forked(&[100.0, 101.0, 99.0]));
    let b = write(dir.path(), "b", &forked(&[100.0, 65.0, 140.0]));
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, false);
    let m = throughput_verdict(&c);
    let v = m.verdict.as_ref().unwrap();
    assert_eq!(v.verdict, VerdictKind::Inconclusive, "{v:?}");
    assert!(c.regressions.is_empty());
    // The interval is the forks' (three a side), not the six rounds' of each side.
    let forks =
        crate::verdict::ratio_interval(&[100.0, 65.0, 140.0], &[100.0, 101.0, 99.0]).unwrap();
    assert_eq!(v.interval, [forks.low, forks.high]);
    // The same rounds judged as rounds of one process would have looked decisive: the forks,
    // not the rounds, are what the interval is computed over.
    let tight = write(dir.path(), "c", &forked(&[65.0, 66.0, 65.5]));
    let slower = compare_runs(&loaded(&a), &loaded(&tight), 0.05, false);
    assert_eq!(
        throughput_verdict(&slower)
            .verdict
            .as_ref()
            .unwrap()
            .verdict,
        VerdictKind::Slower
    );
}

#[test]
fn two_one_process_runs_thirty_percent_apart_get_no_verdict_unless_assumed_stable() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", &crate::export::fixture::report());
    let b = write(dir.path(), "b", &scaled(0.7));
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, false);
    for cell in c.cells.iter().filter(|x| x.candidate_status == Status::Ok) {
        let m = &cell.metrics[0];
        assert!(m.verdict.is_none(), "{m:?}");
        assert_eq!(m.no_verdict.as_deref(), Some(ONE_PROCESS));
    }
    assert!(c.regressions.is_empty());
    let text = render_text(&c);
    assert!(
        text.contains("baseline one process, candidate one process"),
        "{text}"
    );
    let assumed = compare_runs(&loaded(&a), &loaded(&b), 0.05, true);
    assert!(!assumed.regressions.is_empty());
    assert!(render_text(&assumed).contains("--assume-stable"));
}

#[test]
fn a_calibration_probe_thirty_percent_off_refuses_every_verdict_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let probe = crate::calibration::Probe {
        cpu_ns_per_iter: 1.0,
        memory_ns_per_load: 90.0,
    };
    let mut base = forked(&[100.0, 101.0, 99.0]);
    base.environment.calibration = Some(crate::calibration::Calibration {
        start: probe,
        end: Some(probe),
    });
    let mut slow = forked(&[65.0, 66.0, 65.5]);
    let off = crate::calibration::Probe {
        cpu_ns_per_iter: 1.3,
        ..probe
    };
    slow.environment.calibration = Some(crate::calibration::Calibration {
        start: off,
        end: Some(off),
    });
    let (a, b) = (write(dir.path(), "a", &base), write(dir.path(), "b", &slow));
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, false);
    let reason = c.refused.clone().expect("refused");
    assert!(reason.contains("cpu 1.30×"), "{reason}");
    assert!(throughput_verdict(&c).verdict.is_none());
    assert!(c.regressions.is_empty());
    assert!(render_text(&c).contains(&reason));
    let mut args = args(&a, &b);
    args.assume_stable = false;
    assert_eq!(run(&args, TOOL).unwrap(), Exit::AllOk);
    // Within the tolerance, the same runs get their verdict.
    slow.environment.calibration = base.environment.calibration;
    let b = write(dir.path(), "b2", &slow);
    let c = compare_runs(&loaded(&a), &loaded(&b), 0.05, false);
    assert!(c.refused.is_none() && !c.regressions.is_empty());
}

#[test]
fn runs_on_different_machines_are_shown_side_by_side_without_verdicts_and_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", &crate::export::fixture::report());
    let mut other = scaled(0.7);
    other.environment.cores += 2;
    other.environment.kernel = "6.12.0".into();
    let b = write(dir.path(), "b", &other);
    // A 30% regression on another machine: no verdict, no failure, one line why.
    let out = dir.path().join("out");
    let asked = CompareArgs {
        output: Some(out.clone()),
        format: Format::Json,
        ..args(&a, &b)
    };
    assert_eq!(run(&asked, TOOL).unwrap(), Exit::AllOk);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let refused = json["refused"].as_str().unwrap();
    assert!(
        refused.starts_with(
            "no verdicts: the runs were measured on different machines (machine: cores"
        ) && refused.contains("kernel: "),
        "{refused}"
    );
    assert_eq!(json["regressions"].as_array().unwrap().len(), 0);
    for cell in json["cells"].as_array().unwrap() {
        assert!(cell["metrics"][0]["verdict"].is_null(), "{cell}");
    }
    // Judged anyway when asked: the regression is there, every line labelled.
    let allowed = CompareArgs {
        allow_different_environment: true,
        ..args(&a, &b)
    };
    assert_eq!(run(&allowed, TOOL).unwrap(), Exit::NotAllOk);
}
