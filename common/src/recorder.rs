//! One worker's measurements: HDR histograms (ns, auto-resizing, no upper clamp) and counts.
//! Each worker owns one; they are merged once, after the window.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::histogram::{add, nanos, new_histogram, record, record_ns};
pub use crate::histogram::{decode_histogram, encode_histogram};
use crate::results::{Counts, Percentiles};
use crate::seconds::PerSecond;

/// What one worker (or, merged, one window) measured.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// Completed operations' latency: from the intended start in open loop, else from the start.
    pub latency: Histogram<u64>,
    /// Open loop only: from the actual start.
    pub service: Option<Histogram<u64>>,
    /// Open loop only: actual start minus intended start.
    pub lag: Option<Histogram<u64>>,
    pub counts: Counts,
    pub missed_ticks: u64,
    /// The first error message seen, with the number of the operation that failed.
    pub first_error: Option<String>,
    /// Set when the connection was lost and the worker stopped early.
    pub fatal: Option<String>,
    /// The latency of each second of the window, when recorded with [`Recorder::record_ok_at`].
    pub per_second: Option<PerSecond>,
}

impl Recorder {
    pub fn new(open_loop: bool) -> Recorder {
        Recorder {
            latency: new_histogram(),
            service: open_loop.then(new_histogram),
            lag: open_loop.then(new_histogram),
            counts: Counts::default(),
            missed_ticks: 0,
            first_error: None,
            fatal: None,
            per_second: None,
        }
    }

    /// A recorder that also keeps the latency of each second from `origin` (the opening of
    /// the window), for [`Recorder::record_ok_at`].
    pub fn with_seconds(open_loop: bool, origin: Instant) -> Recorder {
        Recorder {
            per_second: Some(PerSecond::new(origin)),
            ..Recorder::new(open_loop)
        }
    }

    /// As [`Recorder::record_ok`], for an operation that completed at `ended`. A recorder
    /// made [`Recorder::with_seconds`] records it once, into the histogram of its second, and
    /// adds each finished second to `latency` when the next begins: `latency` lacks the
    /// current second until [`Recorder::close_seconds`] (the driver calls it at the end of
    /// every window; [`Recorder::merge`] and the progress snapshots account for it).
    #[inline]
    pub fn record_ok_at(&mut self, ended: Instant, latency: Duration, service: Duration) {
        let latency_ns = nanos(latency);
        self.counts.ok += 1;
        match &mut self.per_second {
            Some(seconds) => seconds.record(ended, latency_ns, &mut self.latency),
            None => record_ns(&mut self.latency, latency_ns),
        }
        if let Some(h) = &mut self.service {
            record(h, service);
        }
    }

    /// Adds the current second to `latency` and closes it: from here on `latency` holds every
    /// operation. Calling it again does nothing.
    pub fn close_seconds(&mut self) {
        if let Some(seconds) = &mut self.per_second {
            seconds.close(&mut self.latency);
        }
    }

    /// The pooled latency including a second not yet closed (for progress snapshots).
    pub fn latency_so_far(&self) -> Histogram<u64> {
        let mut latency = self.latency.clone();
        if let Some(seconds) = &self.per_second {
            add(&mut latency, seconds.current());
        }
        latency
    }

    /// Records a completed operation. `latency` includes any schedule lag; `service` does not.
    #[inline]
    pub fn record_ok(&mut self, latency: Duration, service: Duration) {
        self.counts.ok += 1;
        record(&mut self.latency, latency);
        if let Some(h) = &mut self.service {
            record(h, service);
        }
    }

    /// Records how late an open-loop operation started.
    #[inline]
    pub fn record_lag(&mut self, lag: Duration, missed: bool) {
        if let Some(h) = &mut self.lag {
            record(h, lag);
        }
        self.missed_ticks += u64::from(missed);
    }

    /// Records a failed operation; the first message is kept.
    pub fn record_error(&mut self, message: &str) {
        self.counts.error += 1;
        if self.first_error.is_none() {
            self.first_error = Some(message.to_owned());
        }
    }

    /// Folds another worker's measurements into this one.
    pub fn merge(&mut self, other: &Recorder) {
        self.close_seconds();
        add(&mut self.latency, &other.latency);
        if let Some(seconds) = &other.per_second {
            // The other's current second is not in its `latency` yet.
            add(&mut self.latency, seconds.current());
        }
        merge_optional(&mut self.service, &other.service);
        merge_optional(&mut self.lag, &other.lag);
        self.counts.ok += other.counts.ok;
        self.counts.error += other.counts.error;
        self.counts.timeout += other.counts.timeout;
        self.missed_ticks += other.missed_ticks;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        if self.fatal.is_none() {
            self.fatal.clone_from(&other.fatal);
        }
        if other.per_second.is_some() {
            self.per_second =
                PerSecond::merge_all(self.per_second.iter().chain(other.per_second.as_ref()));
        }
    }
}

fn merge_optional(into: &mut Option<Histogram<u64>>, from: &Option<Histogram<u64>>) {
    match (into.as_mut(), from) {
        (Some(into), Some(from)) => add(into, from),
        (None, Some(from)) => *into = Some(from.clone()),
        _ => {}
    }
}

/// The published percentiles of a histogram; `None` when it holds nothing.
pub fn percentiles(histogram: &Histogram<u64>) -> Option<Percentiles> {
    if histogram.is_empty() {
        return None;
    }
    Some(Percentiles {
        p50: histogram.value_at_quantile(0.50),
        p95: histogram.value_at_quantile(0.95),
        p99: histogram.value_at_quantile(0.99),
        p999: histogram.value_at_quantile(0.999),
        max: histogram.max(),
        mean: histogram.mean(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_workers_pool_their_samples() {
        let mut a = Recorder::new(false);
        let mut b = Recorder::new(false);
        for _ in 0..99 {
            a.record_ok(Duration::from_micros(100), Duration::from_micros(100));
        }
        b.record_ok(Duration::from_secs(300), Duration::from_secs(300));
        b.record_error("boom");
        a.merge(&b);
        assert_eq!(a.counts.ok, 100);
        assert_eq!(a.counts.error, 1);
        assert_eq!(a.first_error.as_deref(), Some("boom"));
        let p = percentiles(&a.latency).unwrap();
        assert!((99_000..=101_000).contains(&p.p50), "{p:?}");
        // No upper clamp: a five-minute outlier keeps its value.
        assert!(p.max >= 299_000_000_000, "{p:?}");
        assert!(a.service.is_none());
    }

    #[test]
    fn seconds_reach_the_pool_when_merged_or_closed() {
        let origin = Instant::now();
        let d = Duration::from_micros(100);
        let mut worker = Recorder::with_seconds(false, origin);
        worker.record_ok_at(origin, d, d);
        worker.record_ok_at(origin + Duration::from_millis(1_500), d, d);
        assert_eq!(
            worker.latency.len(),
            1,
            "the current second is not pooled yet"
        );
        assert_eq!(worker.latency_so_far().len(), 2);
        let mut window = Recorder::new(false);
        window.merge(&worker);
        window.merge(&worker);
        assert_eq!(window.latency.len(), 4);
        let seconds = window.per_second.as_ref().unwrap().histograms();
        assert_eq!(
            seconds.iter().map(Histogram::len).collect::<Vec<_>>(),
            [2, 2]
        );
        worker.close_seconds();
        worker.close_seconds();
        assert_eq!(worker.latency.len(), 2);
    }

    #[test]
    fn open_loop_records_service_time_and_lag_separately() {
        let mut r = Recorder::new(true);
        r.record_ok(Duration::from_millis(5), Duration::from_millis(1));
        r.record_lag(Duration::from_millis(4), true);
        assert_eq!(r.missed_ticks, 1);
        let service = percentiles(r.service.as_ref().unwrap()).unwrap();
        let latency = percentiles(&r.latency).unwrap();
        assert!(latency.p50 > 4 * service.p50);
        assert!(percentiles(r.lag.as_ref().unwrap()).unwrap().p50 >= 3_990_000);
    }

    #[test]
    fn histograms_round_trip_through_base64() {
        let mut r = Recorder::new(false);
        for us in 1..=1000 {
            r.record_ok(Duration::from_micros(us), Duration::ZERO);
        }
        let decoded = decode_histogram(&encode_histogram(&r.latency)).unwrap();
        assert_eq!(decoded.len(), 1000);
        assert_eq!(
            decoded.value_at_quantile(0.5),
            r.latency.value_at_quantile(0.5)
        );
        assert!(decode_histogram("not base64!").is_err());
    }
}
