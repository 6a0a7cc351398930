//! The app suite's data: the records every engine is filled with and those appended, generated
//! from the seed, and the parameters each scenario asks with.

use common::results::DataInfo;

use super::record::{Dataset, generate};
use super::scenarios::Params;

/// Generator streams of the fill and of the append.
const FILL_STREAM: u64 = 10;
const APPEND_STREAM: u64 = 11;

/// The generated records and what each scenario must answer.
pub struct Data {
    pub fill: Dataset,
    pub append: Dataset,
    pub params: Params,
}

impl Data {
    /// `rows` records to fill with and `append_rows` more to append, from `seed`.
    pub fn generate(seed: u64, rows: u64, append_rows: u64) -> Data {
        let fill = generate(seed, FILL_STREAM, 0, rows, rows);
        let append = generate(seed, APPEND_STREAM, rows, append_rows, rows);
        let params = Params::choose(&fill.records, seed);
        Data {
            fill,
            append,
            params,
        }
    }

    /// The seed, the checksum over both sets and what they hold, for the report.
    pub fn info(&self, seed: u64) -> DataInfo {
        let mut checksum = self.fill.checksum;
        checksum.update(self.append.checksum.hex().as_bytes());
        let count = |n: usize| common::human::format_thousands(n as f64);
        DataInfo {
            seed,
            checksum: checksum.hex(),
            description: format!(
                "{} measurement records filled, {} appended (JSON documents, about {} bytes each)",
                count(self.fill.docs.len()),
                count(self.append.docs.len()),
                self.fill.docs.iter().map(|d| d.json.len()).sum::<usize>()
                    / self.fill.docs.len().max(1)
            ),
        }
    }
}
