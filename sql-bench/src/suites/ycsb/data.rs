//! The YCSB records: every loaded record is a function of the seed and its key number, so
//! any of them can be regenerated to check what a system holds; after the load a sample is
//! read back from each system and compared, field by field. Writes cycle through a pool of
//! pre-generated field values.

use common::data::{Checksum, rng};
use common::results::DataInfo;

use crate::session::ycsb::keys::{key_of, record_values, value};
use crate::session::ycsb::op::Shape;

/// How many records the load check reads back (all of them below this).
pub const SAMPLE: u64 = 1000;
/// How many distinct field values updates and inserts cycle through.
pub const WRITE_VALUES: usize = 1024;
const WRITE_VALUES_STREAM: u64 = 3;

/// The sample of loaded records each system must hold exactly.
pub struct YcsbData {
    pub records: u64,
    pub shape: Shape,
    pub seed: u64,
    /// The sample's keys and their field values.
    pub sample: Vec<(String, Vec<String>)>,
    pub write_values: Vec<String>,
    pub info: DataInfo,
}

impl YcsbData {
    pub fn generate(seed: u64, records: u64, shape: Shape) -> YcsbData {
        let step = (records / SAMPLE).max(1);
        let mut checksum = Checksum::default();
        let sample: Vec<(String, Vec<String>)> = (0..records)
            .step_by(step as usize)
            .chain(std::iter::once(records - 1))
            .collect::<std::collections::BTreeSet<u64>>()
            .into_iter()
            .map(|keynum| {
                let key = key_of(keynum);
                let values = record_values(seed, keynum, shape.fields, shape.field_length);
                checksum.update(key.as_bytes());
                values.iter().for_each(|v| checksum.update(v.as_bytes()));
                (key, values)
            })
            .collect();
        let mut write_rng = rng(seed, WRITE_VALUES_STREAM);
        let write_values = (0..WRITE_VALUES)
            .map(|_| value(&mut write_rng, shape.field_length))
            .collect();
        let thousands = common::human::format_thousands(records as f64);
        YcsbData {
            records,
            shape,
            seed,
            info: DataInfo {
                seed,
                checksum: checksum.hex(),
                description: format!(
                    "{thousands} YCSB records (keys user + FNV-1a 64 of the key number, Java YCSB's byte order; {} fields of {} printable bytes); the checksum covers the {} sampled records read back after the load",
                    shape.fields,
                    shape.field_length,
                    sample.len()
                ),
            },
            sample,
            write_values,
        }
    }

    pub fn sample_keys(&self) -> Vec<String> {
        self.sample.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Compares what a system returned for the sample with what was loaded; `None` when equal.
    pub fn sample_mismatch(&self, found: &[Option<Vec<String>>]) -> Option<String> {
        let mut missing = 0;
        let mut differing = 0;
        let mut first = None;
        for ((key, expected), got) in self.sample.iter().zip(found) {
            match got {
                None => missing += 1,
                Some(values) if values != expected => differing += 1,
                Some(_) => continue,
            }
            first.get_or_insert_with(|| key.clone());
        }
        first.map(|key| {
            format!(
                "of {} sampled records, {missing} are missing and {differing} differ from what was loaded (first: {key})",
                self.sample.len()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_spans_the_records_and_checks_field_by_field() {
        let shape = Shape {
            fields: 3,
            field_length: 8,
        };
        let data = YcsbData::generate(42, 5_000, shape);
        assert_eq!(data.sample.len(), 1001, "every 5th record and the last");
        assert_eq!(data.sample[0].0, key_of(0));
        assert_eq!(data.sample.last().unwrap().0, key_of(4_999));
        assert_eq!(data.write_values.len(), WRITE_VALUES);
        let exact: Vec<Option<Vec<String>>> =
            data.sample.iter().map(|(_, v)| Some(v.clone())).collect();
        assert_eq!(data.sample_mismatch(&exact), None);
        let mut wrong = exact.clone();
        wrong[3] = None;
        wrong[7].as_mut().unwrap()[1] = "x".repeat(8);
        let message = data.sample_mismatch(&wrong).unwrap();
        assert!(message.contains("1 are missing and 1 differ"), "{message}");
        assert_eq!(
            YcsbData::generate(42, 5_000, shape).info.checksum,
            data.info.checksum
        );
        assert_eq!(YcsbData::generate(7, 10, shape).sample.len(), 10);
    }
}
