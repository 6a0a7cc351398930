//! Phases that can hang are bounded: an index build past `--build-ceiling` and a latency pass
//! whose search passes `--ceiling` end their cells as `timeout` with the reason, and the run
//! goes on to the next variant and system (exit 1).

mod support;

use common::exit::Exit;
use common::results::Status;
use support::*;

#[test]
fn a_build_past_the_build_ceiling_is_a_timeout_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    let extra = ["--variants", "f32,int8", "--build-ceiling", "1ms"];
    let summary = run(&args(&out, &cache, &extra)).unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::NotAllOk);
    // The exact scan is measured before any build, and is not touched by them.
    let exact: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.system == "exact-scan")
        .collect();
    assert_eq!(exact.len(), 3);
    assert!(exact.iter().all(|c| c.status == Status::Ok), "{exact:#?}");
    // Both variants were tried (the first one's timeout did not stop the run): every point of
    // each is a timeout that says which bound stopped it.
    let usearch: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.system == "usearch")
        .collect();
    assert_eq!(usearch.len(), 18, "2 variants × 3 filters × 3 ef points");
    for cell in &usearch {
        assert_eq!(cell.status, Status::Timeout, "{cell:?}");
        let reason = cell.reason.as_deref().unwrap();
        assert!(
            reason.starts_with(
                "building the index still running 1ms after it started: stopped at its bound (--build-ceiling 1ms); "
            ) && reason.ends_with("rows sent by then"),
            "{reason}"
        );
    }
    let builds = report.extra["builds"].as_array().unwrap();
    assert_eq!(builds.len(), 2, "{builds:#?}");
    for build in builds {
        assert!(
            build["problem"]
                .as_str()
                .unwrap()
                .contains("--build-ceiling")
        );
    }
    let json = read_json(&out);
    assert_eq!(json["options"]["build_ceiling_s"], 0.001);
    let written = json["cells"].as_array().unwrap();
    let timeouts = written.iter().filter(|c| c["status"] == "timeout").count();
    assert_eq!(timeouts, 18, "results.json holds them as written");
}

#[test]
fn a_latency_pass_whose_search_passes_the_ceiling_is_a_timeout_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("run"), dir.path().join("cache"));
    // No exact scan finishes in a microsecond, not even of the 200 rows the 1% filter admits
    // (1 ms was not enough: on an idle core those finish inside it). The usearch build is cut
    // short too, so the test stays quick.
    let extra = [
        "--rows",
        "20000",
        "--dims",
        "256",
        "--variants",
        "f32",
        "--ceiling",
        "1us",
        "--build-ceiling",
        "1ms",
    ];
    let summary = run(&args(&out, &cache, &extra)).unwrap();
    let report = &summary.report;
    assert_eq!(summary.exit, Exit::NotAllOk);
    let exact: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.system == "exact-scan")
        .collect();
    assert_eq!(exact.len(), 3, "every query family was tried");
    for cell in exact {
        assert_eq!(cell.status, Status::Timeout, "{cell:?}");
        let reason = cell.reason.as_deref().unwrap();
        assert!(
            reason.starts_with("warm-up 1: latency pass: the search of query 0 was still running at the ceiling (--ceiling 1µs)"),
            "{reason}"
        );
        // The cell ended there: no window was run on it.
        assert!(cell.throughput.is_none(), "{cell:?}");
    }
    // The sweep went on after the exact scan.
    let usearch = report.cells.iter().filter(|c| c.system == "usearch");
    assert_eq!(usearch.count(), 9);
}
