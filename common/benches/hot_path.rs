//! Micro-benchmarks of the client's own per-operation costs: recording into a worker's
//! histogram, and asking the schedule for the next tick.

use std::time::{Duration, Instant};

use common::pacing::{Pace, Schedule};
use common::recorder::Recorder;
use criterion::{Criterion, criterion_group, criterion_main};

fn recording(c: &mut Criterion) {
    let mut recorder = Recorder::new(false);
    let mut latency = 20_000u64;
    c.bench_function("record one closed-loop operation", |b| {
        b.iter(|| {
            latency = (latency * 7 + 13) % 5_000_000 + 10_000;
            let d = Duration::from_nanos(latency);
            recorder.record_ok(std::hint::black_box(d), d);
        })
    });
    let mut open = Recorder::new(true);
    c.bench_function(
        "record one open-loop operation (latency, service, lag)",
        |b| {
            b.iter(|| {
                latency = (latency * 7 + 13) % 5_000_000 + 10_000;
                let d = Duration::from_nanos(latency);
                open.record_ok(std::hint::black_box(d), d / 2);
                open.record_lag(d / 4, false);
            })
        },
    );
}

fn pacing(c: &mut Criterion) {
    let start = Instant::now();
    let mut closed = Schedule::new(start, Duration::from_secs(3600), Pace::Closed);
    c.bench_function("closed-loop tick", |b| {
        b.iter(|| std::hint::black_box(closed.tick(Instant::now())))
    });
    let pace = Pace::for_worker(Some(1e9), 1, 0);
    let mut open = Schedule::new(start, Duration::from_secs(3600), pace);
    c.bench_function("open-loop tick (always due)", |b| {
        b.iter(|| std::hint::black_box(open.tick(start + Duration::from_secs(3000))))
    });
    c.bench_function("Instant::now (for scale)", |b| {
        b.iter(|| std::hint::black_box(Instant::now()))
    });
}

criterion_group!(benches, recording, pacing);
criterion_main!(benches);
