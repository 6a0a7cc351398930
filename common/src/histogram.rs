//! The HDR histograms every recorder keeps (nanoseconds, 3 significant figures,
//! auto-resizing, never clamped) and their encoding in results.json: HdrHistogram's V2 format
//! with deflate, in base64, the encoding of HdrHistogram's own interval logs.

use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};

/// Significant figures kept by every histogram (0.1% value resolution).
const SIGFIG: u8 = 3;

/// An empty, auto-resizing histogram of the precision every recorder keeps.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new(SIGFIG).expect("3 significant figures is a valid histogram precision")
}

#[inline]
pub fn nanos(value: Duration) -> u64 {
    u64::try_from(value.as_nanos()).unwrap_or(u64::MAX)
}

#[inline]
pub fn record(histogram: &mut Histogram<u64>, value: Duration) {
    record_ns(histogram, nanos(value));
}

#[inline]
pub fn record_ns(histogram: &mut Histogram<u64>, ns: u64) {
    // `record` grows the histogram as needed; only a value it cannot track at all falls back
    // to saturation, so no sample is ever dropped. (`saturating_record` alone would clamp to
    // the current size without growing.)
    if histogram.record(ns).is_err() {
        histogram.saturating_record(ns);
    }
}

pub fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from)
        .expect("auto-resizing histograms of equal precision always merge");
}

/// Adds `from` into `into`, creating it when empty; nothing when there is no `from`.
pub fn pool(into: &mut Option<Histogram<u64>>, from: Option<&Histogram<u64>>) {
    let Some(from) = from else { return };
    match into {
        Some(into) => add(into, from),
        None => *into = Some(from.clone()),
    }
}

/// Serializes a histogram as HdrHistogram's V2 compressed format in base64, the encoding
/// HdrHistogram's own log tools read.
pub fn encode_histogram(histogram: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(histogram, &mut bytes)
        .expect("serializing a histogram into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Reads back a histogram written by [`encode_histogram`].
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram does not decode: {e:?}"))
}
