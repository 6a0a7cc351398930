//! Latency per second of a window, for the HDR interval log and the latency-over-time chart.
//! A worker records each completed operation once, into the histogram of the current 1 s
//! interval: one comparison per operation decides whether the second is over, and only then
//! (once a second, never per operation) is the finished second added to the worker's pooled
//! histogram, packed (HdrHistogram V2 without deflate: fast to write, a few KiB) and reset for
//! the next. Seconds are counted from the opening of the window and an operation belongs to
//! the second in which it completed, as in HdrHistogram's own interval logs.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};

/// The length of one interval.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// One worker's latency per second (or, merged, one window's).
#[derive(Clone, Debug)]
pub struct PerSecond {
    origin: Instant,
    /// The end of the current second: the one comparison made per operation.
    boundary: Instant,
    current: Histogram<u64>,
    /// The seconds before the current one, packed; an empty packing is a second in which
    /// nothing completed. Always as many as the current second's index.
    packed: Vec<Vec<u8>>,
}

impl PerSecond {
    /// Seconds counted from `origin` (the opening of the window).
    pub fn new(origin: Instant) -> PerSecond {
        PerSecond {
            origin,
            boundary: origin + INTERVAL,
            current: crate::histogram::new_histogram(),
            packed: Vec::new(),
        }
    }

    /// Records one latency (ns) of an operation that completed at `ended`; a finished second
    /// is first added to `pooled`.
    #[inline]
    pub fn record(&mut self, ended: Instant, latency_ns: u64, pooled: &mut Histogram<u64>) {
        if ended >= self.boundary {
            self.rotate(ended, pooled);
        }
        crate::histogram::record_ns(&mut self.current, latency_ns);
    }

    /// The second being recorded (not yet in the pooled histogram).
    pub fn current(&self) -> &Histogram<u64> {
        &self.current
    }

    /// Adds the finished second to `pooled`, packs it (and an empty one for each second
    /// without a completion) and moves the boundary to the end of the second `ended` is in.
    #[cold]
    fn rotate(&mut self, ended: Instant, pooled: &mut Histogram<u64>) {
        crate::histogram::add(pooled, &self.current);
        self.packed.push(pack(&self.current));
        self.current.reset();
        let index = ended.saturating_duration_since(self.origin).as_secs();
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        while self.packed.len() < index {
            self.packed.push(Vec::new());
        }
        let next = u32::try_from(self.packed.len() + 1).unwrap_or(u32::MAX);
        self.boundary = self.origin + INTERVAL * next;
    }

    /// Adds the current second to `pooled` and packs it: the series is finished, and every
    /// operation is in `pooled`. A second call finds nothing current and does nothing.
    pub fn close(&mut self, pooled: &mut Histogram<u64>) {
        if !self.current.is_empty() {
            crate::histogram::add(pooled, &self.current);
            self.packed.push(pack(&self.current));
            self.current.reset();
        }
    }

    /// Every second so far, in order: the packed ones, then the current one unless nothing
    /// has completed in it.
    pub fn histograms(&self) -> Vec<Histogram<u64>> {
        let mut seconds: Vec<Histogram<u64>> = self.packed.iter().map(|p| unpack(p)).collect();
        if !self.current.is_empty() {
            seconds.push(self.current.clone());
        }
        seconds
    }

    /// How many seconds [`PerSecond::histograms`] returns.
    pub fn len(&self) -> usize {
        self.packed.len() + usize::from(!self.current.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The seconds of several workers of one window added second by second (each packing
    /// decoded once), or `None` when none recorded per second.
    pub fn merge_all<'a>(parts: impl IntoIterator<Item = &'a PerSecond>) -> Option<PerSecond> {
        let mut origin = None;
        let mut sums: Vec<Histogram<u64>> = Vec::new();
        for part in parts {
            origin.get_or_insert(part.origin);
            for (index, second) in part.histograms().into_iter().enumerate() {
                match sums.get_mut(index) {
                    Some(sum) => crate::histogram::add(sum, &second),
                    None => {
                        while sums.len() < index {
                            sums.push(crate::histogram::new_histogram());
                        }
                        sums.push(second);
                    }
                }
            }
        }
        let origin = origin?;
        Some(PerSecond::from_histograms(origin, &sums))
    }

    /// A finished series made of `seconds` (every one packed, nothing current).
    fn from_histograms(origin: Instant, seconds: &[Histogram<u64>]) -> PerSecond {
        let mut series = PerSecond::new(origin);
        series.packed = seconds.iter().map(pack).collect();
        series.boundary = origin + INTERVAL * u32::try_from(seconds.len() + 1).unwrap_or(u32::MAX);
        series
    }

    /// Each second as HdrHistogram V2 + deflate in base64 (the encoding of interval logs and
    /// of `histogram_b64`), for `results.json`.
    pub fn encode(&self) -> Vec<String> {
        self.histograms()
            .iter()
            .map(crate::histogram::encode_histogram)
            .collect()
    }
}

fn pack(histogram: &Histogram<u64>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if !histogram.is_empty() {
        V2Serializer::new()
            .serialize(histogram, &mut bytes)
            .expect("serializing a histogram into memory cannot fail");
    }
    bytes
}

fn unpack(bytes: &[u8]) -> Histogram<u64> {
    if bytes.is_empty() {
        return crate::histogram::new_histogram();
    }
    let mut histogram: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .expect("a packing made by pack() always reads back");
    histogram.auto(true);
    histogram
}

/// Reads back one round's seconds written by [`PerSecond::encode`].
pub fn decode_round(seconds: &[String]) -> Result<Vec<Histogram<u64>>, String> {
    seconds
        .iter()
        .enumerate()
        .map(|(i, text)| {
            crate::histogram::decode_histogram(text).map_err(|e| format!("second {}: {e}", i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(origin: Instant, ms: u64) -> Instant {
        origin + Duration::from_millis(ms)
    }

    #[test]
    fn operations_land_in_the_second_they_completed_in() {
        let origin = Instant::now();
        let mut pooled = crate::histogram::new_histogram();
        let mut s = PerSecond::new(origin);
        s.record(at(origin, 10), 1_000, &mut pooled);
        s.record(at(origin, 999), 2_000, &mut pooled);
        s.record(at(origin, 1_000), 3_000, &mut pooled);
        assert_eq!(pooled.len(), 2, "a second reaches the pool when it is over");
        // Nothing completes in second 3; second 4 gets one.
        s.record(at(origin, 3_500), 4_000, &mut pooled);
        assert_eq!(s.current().len(), 1);
        s.close(&mut pooled);
        s.close(&mut pooled);
        assert_eq!(pooled.len(), 4, "closing adds the last second, once");
        let seconds = s.histograms();
        let counts: Vec<u64> = seconds.iter().map(Histogram::len).collect();
        assert_eq!(counts, [2, 1, 0, 1]);
        assert!(seconds[3].value_at_quantile(0.5) >= 3_990);
    }

    #[test]
    fn workers_merge_second_by_second() {
        let origin = Instant::now();
        let mut pooled = crate::histogram::new_histogram();
        let mut a = PerSecond::new(origin);
        let mut b = PerSecond::new(origin);
        a.record(at(origin, 100), 10, &mut pooled);
        a.record(at(origin, 1_100), 10, &mut pooled);
        b.record(at(origin, 2_100), 10, &mut pooled);
        b.record(at(origin, 2_200), 10, &mut pooled);
        let merged = PerSecond::merge_all([&a, &b]).unwrap();
        let counts: Vec<u64> = merged.histograms().iter().map(Histogram::len).collect();
        assert_eq!(counts, [1, 1, 2]);
        let decoded = decode_round(&merged.encode()).unwrap();
        assert_eq!(decoded.iter().map(Histogram::len).sum::<u64>(), 4);
        assert!(PerSecond::merge_all(std::iter::empty()).is_none());
    }
}
