//! Merging workers' parts: exact histograms (and why averaging percentiles is wrong),
//! throughput summed per round before the median, and every way parts that are not one
//! run are refused.

use super::*;
use crate::environment::Environment;
use crate::histogram::{decode_histogram, encode_histogram, new_histogram, record_ns};
use crate::recorder::percentiles;
use crate::results::{Cell, Counts, Status, Throughput, WorkerInfo};
use crate::scale::BarrierRecord;

/// Worker `index` of `count`, one cell whose latencies are `samples_ns` and whose rounds
/// measured `rounds` ops/s.
fn part(index: u32, count: u32, samples_ns: &[u64], rounds: &[f64]) -> (String, Report) {
    let mut report = Report::begin(
        "geo-bench",
        "0.1.0",
        "geo",
        "s",
        serde_json::json!({"rounds": rounds.len(), "worker_index": index, "output": format!("w{index}")}),
        Environment::default(),
    );
    report.finished_at = Some(format!("2026-12-01T10:00:0{index}Z"));
    let mut cell = Cell::new("insert b1 c2", "redis", "events/s", 1, rounds.len() as u32);
    let mut histogram = new_histogram();
    let mut seconds = Vec::new();
    for chunk in samples_ns.chunks(samples_ns.len().div_ceil(rounds.len()).max(1)) {
        let mut round = new_histogram();
        for &ns in chunk {
            record_ns(&mut histogram, ns);
            record_ns(&mut round, ns);
        }
        seconds.push(vec![encode_histogram(&round)]);
    }
    cell.histogram_b64 = Some(encode_histogram(&histogram));
    cell.latency_ns = percentiles(&histogram);
    cell.latency_per_second_b64 = seconds;
    cell.throughput = Throughput::from_rounds(rounds.to_vec());
    cell.counts = Counts {
        ok: samples_ns.len() as u64,
        error: 0,
        timeout: 0,
    };
    cell.client_cpu_ns_per_op = Some(1_000.0 * f64::from(index + 1));
    report.cells.push(cell);
    report.worker = Some(WorkerInfo {
        index,
        count,
        run_id: "run-7".into(),
        host: format!("node-{index}"),
        options_hash: "h".into(),
        barrier: Some(BarrierRecord::default()),
    });
    (format!("w{index}/results.json"), report)
}

#[test]
fn merged_histograms_are_one_histogram_of_every_sample_and_not_an_average() {
    // A skewed run: worker 0 answered 9,900 operations at 1 ms, worker 1 answered 100 at
    // 1 ms and 100 at 200 ms (its share of the load went to a slow replica).
    let fast = vec![1_000_000; 9_900];
    let mut slow = vec![1_000_000; 100];
    slow.extend(vec![200_000_000; 100]);
    let parts = vec![part(0, 2, &fast, &[100.0]), part(1, 2, &slow, &[2.0])];
    let merged = merge(&parts, 2).unwrap();
    let cell = &merged.cells[0];
    let mut all = new_histogram();
    for &ns in fast.iter().chain(&slow) {
        record_ns(&mut all, ns);
    }
    assert_eq!(
        cell.latency_ns,
        percentiles(&all),
        "exactly one histogram of all samples"
    );
    assert_eq!(
        decode_histogram(cell.histogram_b64.as_ref().unwrap()).unwrap(),
        all
    );
    let p99 = cell.latency_ns.unwrap().p99;
    let averaged = parts
        .iter()
        .map(|(_, r)| r.cells[0].latency_ns.unwrap().p99 as f64)
        .sum::<f64>()
        / 2.0;
    // 1% of the 10,100 samples is 101: the 99th percentile is just inside the slow tail's
    // first... no: 100 slow samples are 0.99% of all, so the p99 is 1 ms, while the average of
    // the workers' p99s (1 ms and 200 ms) claims about 100 ms.
    assert!(p99 < 1_100_000, "merged p99 {p99}");
    assert!(averaged > 90_000_000.0, "averaged p99 {averaged}");
    assert_eq!(cell.counts.ok, 10_100);
    assert_eq!(cell.connections, 2);
    // Client CPU is weighted by each worker's operations: (1000·9900 + 2000·200) / 10100.
    let cpu = cell.client_cpu_ns_per_op.unwrap();
    assert!((cpu - (1_000.0 * 9_900.0 + 2_000.0 * 200.0) / 10_100.0).abs() < 1e-6);
    assert_eq!(merged.workers.len(), 2);
    assert!(merged.worker.is_none());
    assert!(merged.options.get("worker_index").is_none());
}

#[test]
fn throughput_is_summed_per_round_before_the_median() {
    let samples = vec![1_000; 6];
    // Worker 0 is fast in rounds 1 and 2, worker 1 in round 3: the medians (20 and 10) sum
    // to 30, the median of the per-round sums is 22.
    let parts = vec![
        part(0, 2, &samples, &[20.0, 21.0, 1.0]),
        part(1, 2, &samples, &[1.0, 1.0, 30.0]),
    ];
    let cell = &merge(&parts, 2).unwrap().cells[0];
    let t = cell.throughput.as_ref().unwrap();
    assert_eq!(t.rounds, [21.0, 22.0, 31.0]);
    assert_eq!((t.median, t.min, t.max), (22.0, 21.0, 31.0));
    assert_eq!(
        cell.latency_rounds_ns.len(),
        3,
        "each round's latency from its seconds"
    );
    assert_eq!(cell.latency_per_second_b64.len(), 3);
}

/// A histogram a tool keeps in a cell's `extra` is added exactly too, and the percentiles
/// beside it are the sum's, not worker 0's.
#[test]
fn a_tools_own_histograms_in_extra_are_added_and_their_percentiles_recomputed() {
    let mut parts = vec![part(0, 2, &[1_000], &[1.0]), part(1, 2, &[1_000], &[1.0])];
    for (i, (_, report)) in parts.iter_mut().enumerate() {
        let mut h = new_histogram();
        for _ in 0..(1 + 99 * i) {
            record_ns(&mut h, 1_000_000 * (1 + 9 * i as u64));
        }
        let extra = &mut report.cells[0].extra;
        extra.insert("at_load_histogram_b64".into(), encode_histogram(&h).into());
        extra.insert("at_load_ns".into(), serde_json::json!(percentiles(&h)));
    }
    let cell = &merge(&parts, 2).unwrap().cells[0];
    let sum = decode_histogram(cell.extra["at_load_histogram_b64"].as_str().unwrap()).unwrap();
    assert_eq!(sum.len(), 1 + 100);
    let p50 = cell.extra["at_load_ns"]["p50"].as_u64().unwrap();
    // Worker 0's single 1 ms sample is not the median of 101 samples, 100 of them near 10 ms.
    assert!(p50 > 9_000_000, "{p50}");
}

#[test]
fn parts_that_are_not_one_run_are_refused_with_one_line() {
    let samples = [1_000];
    let ok = || vec![part(0, 2, &samples, &[1.0]), part(1, 2, &samples, &[1.0])];
    let refused = |parts: Vec<(String, Report)>, expected: u32| {
        merge(&parts, expected).unwrap_err().to_string()
    };
    let mut other_run = ok();
    other_run[1].1.worker.as_mut().unwrap().run_id = "run-8".into();
    assert_eq!(
        refused(other_run, 2),
        "w1/results.json is not part of the same run as w0/results.json: run id run-8, not run-7"
    );
    let mut other_options = ok();
    other_options[1].1.worker.as_mut().unwrap().options_hash = "x".into();
    assert!(refused(other_options, 2).contains("options hash x, not h"));
    let mut twice = ok();
    twice[1].1.worker.as_mut().unwrap().index = 0;
    assert_eq!(
        refused(twice, 2),
        "worker 0 is given twice: w0/results.json and w1/results.json"
    );
    let one = vec![part(0, 2, &samples, &[1.0])];
    assert_eq!(
        refused(one, 2),
        "worker 1 of 2 is missing: give every worker's results folder"
    );
    assert!(refused(ok(), 3).contains("is worker 0 of 2, but --expect-workers is 3"));
    let mut unfinished = ok();
    unfinished[1].1.finished_at = None;
    assert!(refused(unfinished, 2).starts_with("worker 1 (w1/results.json) did not finish"));
    let mut stopped = ok();
    stopped[0]
        .1
        .worker
        .as_mut()
        .unwrap()
        .barrier
        .as_mut()
        .unwrap()
        .failure = Some("worker(s) 1 never arrived".into());
    assert!(refused(stopped, 2).contains("stopped at the barrier: worker(s) 1 never arrived"));
    let mut alone = ok();
    alone[0].1.worker = None;
    assert!(refused(alone, 2).contains("no worker block"));
    let mut other_cells = ok();
    other_cells[1].1.cells[0].workload = "query".into();
    assert!(refused(other_cells, 2).contains("has other cells"));
}

#[test]
fn a_worker_that_measured_fewer_rounds_makes_the_cell_an_error() {
    let samples = [1_000, 2_000];
    let parts = vec![
        part(0, 2, &samples, &[1.0, 2.0]),
        part(1, 2, &samples, &[1.0]),
    ];
    let cell = &merge(&parts, 2).unwrap().cells[0];
    assert_eq!(cell.status, Status::Error);
    assert!(
        cell.reason
            .as_ref()
            .unwrap()
            .contains("worker 0: 2, worker 1: 1")
    );
    assert!(cell.throughput.is_none());
}

/// The merge's own cost (a figure for the note): 64 workers' parts of 4 cells, each
/// with a histogram of 10,000 samples and 5 rounds of 3 per-second histograms (kept small:
/// a debug build inflates and deflates slowly).
#[test]
fn sixty_four_workers_merge() {
    let samples: Vec<u64> = (0..10_000u64)
        .map(|i| 50_000 + i * 37 % 5_000_000)
        .collect();
    let mut template = part(0, 64, &samples, &[1.0, 2.0, 3.0, 4.0, 5.0]).1;
    let seconds: Vec<String> = (0..3)
        .map(|s| {
            let mut h = new_histogram();
            samples
                .iter()
                .skip(s * 1_000)
                .take(1_000)
                .for_each(|&v| record_ns(&mut h, v));
            encode_histogram(&h)
        })
        .collect();
    let base = template.cells[0].clone();
    template.cells = (0..4)
        .map(|i| {
            let mut c = base.clone();
            c.workload = format!("w{i}");
            c.latency_per_second_b64 = vec![seconds.clone(); 5];
            c
        })
        .collect();
    let parts: Vec<(String, Report)> = (0..64)
        .map(|i| {
            let mut r = template.clone();
            r.worker.as_mut().unwrap().index = i;
            (format!("w{i}"), r)
        })
        .collect();
    let started = std::time::Instant::now();
    let merged = merge(&parts, 64).unwrap();
    let took = started.elapsed();
    eprintln!("merge of 64 workers × 4 cells: {took:?}");
    assert_eq!(merged.cells[0].counts.ok, 64 * 10_000);
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// A part that says it stopped (a worker interrupted) is refused at once, even while another
/// part is still missing and `--wait` would wait for it.
#[test]
fn a_stopped_part_is_refused_at_once_without_waiting_for_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut stopped) = part(1, 2, &[1_000], &[1.0]);
    stopped.finished_at = None;
    if let Some(barrier) = stopped.worker.as_mut().and_then(|w| w.barrier.as_mut()) {
        barrier.failure = Some("worker 1 was interrupted (SIGTERM)".into());
    }
    let one = dir.path().join("worker-1");
    std::fs::create_dir_all(&one).unwrap();
    std::fs::write(
        one.join("results.json"),
        serde_json::to_vec(&stopped).unwrap(),
    )
    .unwrap();
    let args = MergeArgs {
        parts: vec![dir.path().join("worker-0"), one],
        expect_workers: 2,
        output: dir.path().join("merged"),
        wait: Some(Duration::from_secs(20)),
    };
    let began = Instant::now();
    let error = load_all(&args, "geo-bench").err().unwrap().to_string();
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    assert!(
        error.contains("worker 1 (")
            && error.contains(
                "stopped at the barrier: worker 1 was interrupted (SIGTERM); the run is incomplete"
            ),
        "{error}"
    );
}
