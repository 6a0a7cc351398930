//! The CRUD data: the read table's rows and the values writes cycle through, generated from the
//! seed so every system holds byte-identical data.

use common::data::{Checksum, ascii, rng};
use common::results::DataInfo;

fn human_count(n: u64) -> String {
    common::human::format_thousands(n as f64)
}

/// Generator streams, one per purpose.
const READ_ROWS_STREAM: u64 = 1;
const WRITE_VALUES_STREAM: u64 = 2;
/// How many distinct values writes cycle through.
pub const WRITE_VALUES: usize = 64;

pub struct CrudData {
    /// `(k, v)` for k in 1..=rows.
    pub read_rows: Vec<(i64, String)>,
    pub write_values: Vec<String>,
    pub info: DataInfo,
}

impl CrudData {
    pub fn generate(seed: u64, rows: u64, value_len: usize) -> CrudData {
        let mut checksum = Checksum::default();
        let mut read_rng = rng(seed, READ_ROWS_STREAM);
        let read_rows: Vec<(i64, String)> = (1..=rows as i64)
            .map(|k| {
                let v = ascii(&mut read_rng, value_len);
                checksum.update(&k.to_le_bytes());
                checksum.update(v.as_bytes());
                (k, v)
            })
            .collect();
        let mut write_rng = rng(seed, WRITE_VALUES_STREAM);
        let write_values: Vec<String> = (0..WRITE_VALUES)
            .map(|_| {
                let v = ascii(&mut write_rng, value_len);
                checksum.update(v.as_bytes());
                v
            })
            .collect();
        CrudData {
            read_rows,
            write_values,
            info: DataInfo {
                seed,
                checksum: checksum.hex(),
                description: format!(
                    "read table of {} rows (BIGINT key, {value_len}-byte value); writes insert unique keys cycling through {WRITE_VALUES} values of {value_len} bytes",
                    human_count(rows)
                ),
            },
        }
    }

    /// Compares what a system returned with what was written; `None` when identical.
    pub fn read_table_mismatch(&self, found: &[(i64, String)]) -> Option<String> {
        if found.len() != self.read_rows.len() {
            return Some(format!(
                "the read table holds {} rows; {} were written",
                human_count(found.len() as u64),
                human_count(self.read_rows.len() as u64)
            ));
        }
        let differing: Vec<i64> = self
            .read_rows
            .iter()
            .zip(found)
            .filter(|(a, b)| a != b)
            .map(|(a, _)| a.0)
            .collect();
        differing.first().map(|first| {
            format!(
                "{} rows of the read table differ from what was written (first: key {first})",
                differing.len()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_data_and_checksum() {
        let a = CrudData::generate(42, 100, 16);
        let b = CrudData::generate(42, 100, 16);
        let c = CrudData::generate(43, 100, 16);
        assert_eq!(a.read_rows, b.read_rows);
        assert_eq!(a.info.checksum, b.info.checksum);
        assert_ne!(a.info.checksum, c.info.checksum);
        assert_eq!(a.read_rows.len(), 100);
        assert!(a.read_rows.iter().all(|(_, v)| v.len() == 16));
        assert_eq!(a.read_rows[0].0, 1);
        assert_eq!(a.write_values.len(), WRITE_VALUES);
    }

    #[test]
    fn mismatches_are_described() {
        let data = CrudData::generate(1, 10, 8);
        assert_eq!(data.read_table_mismatch(&data.read_rows), None);
        let short = &data.read_rows[..9];
        assert!(
            data.read_table_mismatch(short)
                .unwrap()
                .contains("holds 9 rows")
        );
        let mut changed = data.read_rows.clone();
        changed[3].1 = "x".repeat(8);
        assert!(
            data.read_table_mismatch(&changed)
                .unwrap()
                .contains("first: key 4")
        );
    }
}
