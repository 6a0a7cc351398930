//! Micro-benchmarks of the client's own per-operation costs: recording into a worker's
//! histogram (with and without its 1 s interval, as the driver records), packing a finished
//! second (once a second, not per operation), and asking the schedule for the next tick.

use std::time::{Duration, Instant};

use common::pacing::{Pace, Schedule};
use common::recorder::Recorder;
use common::seconds::PerSecond;
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
    // What the driver calls: one comparison deciding whether the second is over, then one
    // record into the current second's histogram. Every operation here completes inside the
    // first second, so this is the steady per-operation cost; crossing a boundary is `rotation`.
    let origin = Instant::now();
    let mut seconds = Recorder::with_seconds(false, origin);
    c.bench_function(
        "record one closed-loop operation and its second (record_ok_at)",
        |b| {
            b.iter(|| {
                latency = (latency * 7 + 13) % 5_000_000 + 10_000;
                let d = Duration::from_nanos(latency);
                seconds.record_ok_at(std::hint::black_box(origin), d, d);
            })
        },
    );
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

fn rotation(c: &mut Criterion) {
    // A second of 100,000 operations from 10 µs to 5 ms, added to the pooled histogram and
    // packed when the next one starts.
    let origin = Instant::now();
    let mut latency = 20_000u64;
    c.bench_function(
        "pack one finished second (once per second per worker)",
        |b| {
            b.iter_batched(
                || {
                    let mut s = PerSecond::new(origin);
                    let mut pooled = Recorder::new(false).latency;
                    for _ in 0..100_000 {
                        latency = (latency * 7 + 13) % 5_000_000 + 10_000;
                        s.record(origin, latency, &mut pooled);
                    }
                    (s, pooled)
                },
                |(mut s, mut pooled)| {
                    s.record(origin + Duration::from_secs(1), 1_000, &mut pooled);
                    (s, pooled)
                },
                criterion::BatchSize::LargeInput,
            )
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

criterion_group!(benches, recording, rotation, pacing);
criterion_main!(benches);
