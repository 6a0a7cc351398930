//! A small synthetic run made the way a real one is (workers' per-second recorders, the cell
//! builder, the judgement), for the tests of the exporters, the charts, `compare` and `report`:
//! three systems, three workloads whose throughputs differ by orders of magnitude, five rounds,
//! one invalid cell.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::environment::Environment;
use crate::protocol::{CellBuilder, rounds};
use crate::recorder::Recorder;
use crate::results::{Cell, DataInfo, Report, Status, SystemInfo};
use crate::window::WindowOutcome;

/// Seconds per synthetic round.
pub const SECONDS: u64 = 3;
pub const ROUNDS: u32 = 5;

/// A seeded generator of uniform numbers in [0, 1) (no `rand` API in a fixture).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// (workload, system, median throughput, typical latency ns)
const CELLS: [(&str, &str, f64, f64); 9] = [
    ("write 1c", "sqlite", 4_386.0, 220_000.0),
    ("write 1c", "postgres", 1_900.0, 510_000.0),
    ("write 1c", "mariadb", 2_050.0, 480_000.0),
    ("read 16c", "sqlite", 1_017_878.0, 14_000.0),
    ("read 16c", "postgres", 61_000.0, 250_000.0),
    ("read 16c", "mariadb", 58_500.0, 270_000.0),
    ("mixed 16c", "sqlite", 9_800.0, 1_500_000.0),
    ("mixed 16c", "postgres", 15_500.0, 950_000.0),
    ("mixed 16c", "mariadb", 0.0, 0.0),
];

/// One measured window: `per_second` operations in each of [`SECONDS`] seconds.
fn window(random: &mut Lcg, throughput: f64, latency_ns: f64, per_second: u64) -> WindowOutcome {
    let origin = Instant::now();
    let mut recorder = Recorder::with_seconds(false, origin);
    for second in 0..SECONDS {
        for i in 0..per_second {
            // A long tail: most operations near the typical figure, one in fifty far out.
            let tail = if random.next() < 0.02 { 8.0 } else { 1.0 };
            let ns = latency_ns * (0.6 + random.next()) * tail;
            let d = Duration::from_nanos(ns as u64);
            let ended = origin + Duration::from_millis(second * 1_000 + i * 1_000 / per_second);
            recorder.record_ok_at(ended, d, d);
        }
    }
    recorder.close_seconds();
    let rate = throughput * (0.97 + 0.06 * random.next());
    WindowOutcome {
        elapsed: Duration::from_secs_f64(recorder.counts.ok as f64 / rate),
        recorder,
        workers: 16,
        stuck_workers: 0,
        client_cpu_ns: 0,
        client_busy: None,
        client_busy_least: None,
        busy_is_the_clients: false,
        target_rate: None,
    }
}

fn cell(random: &mut Lcg, workload: &str, system: &str, throughput: f64, latency: f64) -> Cell {
    if throughput == 0.0 {
        return Cell::unmeasured(
            workload,
            system,
            "ops/s",
            Status::Invalid,
            "read 999 rows, wrote 1,000",
        );
    }
    let connections = if workload.ends_with("1c") { 1 } else { 16 };
    let mut builder = CellBuilder::new(
        Cell::new(workload, system, "ops/s", connections, ROUNDS),
        Duration::from_secs(120),
    );
    for round in rounds(0, ROUNDS) {
        builder.add(round, &window(random, throughput, latency, 40));
    }
    builder.to_cell()
}

fn system(name: &str, version: &str, verified: &[(&str, &str)]) -> SystemInfo {
    SystemInfo {
        name: name.into(),
        kind: name.into(),
        url_redacted: format!("{name}://127.0.0.1/fairbench"),
        version: version.into(),
        verified: verified
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        ..SystemInfo::default()
    }
}

/// The synthetic run, judged (made once per test binary).
pub fn report() -> Report {
    static REPORT: std::sync::OnceLock<Report> = std::sync::OnceLock::new();
    REPORT.get_or_init(make).clone()
}

fn make() -> Report {
    let mut random = Lcg(42);
    let environment = Environment {
        cpu_model: "Synthetic CPU @ 3.0GHz".into(),
        cores: 2,
        memory_bytes: 24 << 30,
        kernel: "6.1.0-test".into(),
        hostname: "bench".into(),
        loadavg_start: [0.4, 0.3, 0.2],
        loadavg_end: Some([0.9, 0.5, 0.3]),
        durable_write_floor_ns: Some(1_400_000),
        durable_write_floor_path: Some("/tmp/run".into()),
        load_gate: None,
        calibration: None,
    };
    let options = serde_json::json!({
        "targets": ["sqlite", "postgres=postgres://bench:***@127.0.0.1:5432/db", "mariadb=mysql://127.0.0.1/db"],
        "reference": null, "duration_s": SECONDS as f64, "warmup": 1, "rounds": ROUNDS,
        "connections": 16, "rate_per_s": null, "seed": 42, "output": "/tmp/run",
        "ceiling_s": 120.0, "load_gate": null, "quiet": true, "threshold": 0.05,
        "insecure_skip_verify": false, "password_files": [], "config": "C0",
        "workloads": [], "allow_unmatched_durability": false, "replicas": [],
        "read_from": "primary", "read_rows": 1000, "value_size": 100, "keep_data": false
    });
    let mut report = Report::begin(
        "sql-bench",
        "0.1.0",
        "crud",
        "C0 — 1 node, no replication",
        options,
        environment,
    );
    report.run_id = "sql-bench-crud-20261201T000000Z-1".into();
    report.started_at = "2026-12-01T00:00:00Z".into();
    report.finished_at = Some("2026-12-01T00:02:00Z".into());
    report.git_commit = Some("0123456789abcdef".into());
    report.systems = vec![
        system(
            "sqlite",
            "3.46.0",
            &[("journal_mode", "wal"), ("synchronous", "full")],
        ),
        system(
            "postgres",
            "PostgreSQL 16.4",
            &[("fsync", "on"), ("synchronous_commit", "on")],
        ),
        system(
            "mariadb",
            "11.4.2-MariaDB",
            &[("innodb_flush_log_at_trx_commit", "1")],
        ),
    ];
    report.reference = Some("sqlite".into());
    report.data = Some(DataInfo {
        seed: 42,
        checksum: "9f86d081884c7d65".into(),
        description: "10,000 rows of 4 columns".into(),
    });
    for (workload, system, throughput, latency) in CELLS {
        let cell = cell(&mut random, workload, system, throughput, latency);
        report.upsert_cell(cell);
    }
    report.notes = vec!["All clients ran on the machine they measured.".into()];
    let judgement = crate::report::judge(&report);
    report.verdicts = judgement.verdicts;
    report.no_verdicts = judgement.no_verdicts;
    report
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fixture_is_a_judged_run_with_seconds() {
        let report = super::report();
        assert_eq!(report.cells.len(), 9);
        let cell = &report.cells[0];
        assert_eq!(cell.latency_per_second_b64.len(), super::ROUNDS as usize);
        assert_eq!(
            cell.latency_per_second_b64[0].len(),
            super::SECONDS as usize
        );
        assert_eq!(cell.counts.ok, 40 * 3 * 5);
        assert!(!report.verdicts.is_empty());
    }

    #[cfg(feature = "schema")]
    #[test]
    fn the_fixture_with_its_seconds_matches_the_schema() {
        let mut report = serde_json::to_value(super::report()).unwrap();
        crate::testing::schema_violations(&report).unwrap();
        report["cells"][0]["latency_per_second_b64"][0] = serde_json::json!([""]);
        let violations = crate::testing::schema_violations(&report).unwrap_err();
        assert!(
            violations.contains("/cells/0/latency_per_second_b64/0/0"),
            "{violations}"
        );
    }
}
