//! The app suite's data: the seeded streams every engine is filled and appended from, generated
//! batch by batch as they are written (nothing holds the collection), and what one pass over
//! them gives before anything is timed: every read's exact answer and the data's checksum.

use common::results::DataInfo;

use super::answer::Answer;
use super::oracle::{Expected, StreamSummary};
use super::record::{Generator, stored};
use super::scenarios::{Params, Scenario};
use crate::query::Doc;

/// Generator streams of the fill and of the append.
const FILL_STREAM: u64 = 10;
const APPEND_STREAM: u64 = 11;

/// The run's data, as streams to generate again each time they are written.
pub struct Data {
    seed: u64,
    rows: u64,
    append_rows: u64,
    expected: Expected,
    append: StreamSummary,
}

impl Data {
    /// `rows` records to fill with and `append_rows` more to append, from `seed`: one pass
    /// over each stream.
    pub fn prepare(seed: u64, rows: u64, append_rows: u64) -> Data {
        let expected = Expected::compute(seed, rows, fill_stream(seed, rows));
        let append = StreamSummary::of(append_stream(seed, rows, append_rows));
        Data {
            seed,
            rows,
            append_rows,
            expected,
            append,
        }
    }

    /// The fill, in batches of `batch` documents, generated as they are taken.
    pub fn fill_batches(&self, batch: u64) -> Batches {
        Batches {
            records: fill_stream(self.seed, self.rows),
            size: batch as usize,
        }
    }

    /// The append, likewise.
    pub fn append_batches(&self, batch: u64) -> Batches {
        Batches {
            records: append_stream(self.seed, self.rows, self.append_rows),
            size: batch as usize,
        }
    }

    /// What `scenario` must return over the filled collection (reads only).
    pub fn expected(&self, scenario: Scenario) -> Option<Answer> {
        self.expected.answer(scenario)
    }

    pub fn params(&self) -> &Params {
        &self.expected.params
    }

    /// The seed, the checksum over both sets and what they hold, for the report.
    pub fn info(&self) -> DataInfo {
        let (fill, append) = (&self.expected.fill, &self.append);
        let mut checksum = fill.checksum;
        checksum.update(append.checksum.hex().as_bytes());
        let count = |n: u64| common::human::format_thousands(n as f64);
        DataInfo {
            seed: self.seed,
            checksum: checksum.hex(),
            description: format!(
                "{} measurement records filled, {} appended (JSON documents, about {} bytes each)",
                count(fill.docs),
                count(append.docs),
                fill.doc_bytes / fill.docs.max(1)
            ),
        }
    }
}

fn fill_stream(seed: u64, rows: u64) -> Generator {
    Generator::new(seed, FILL_STREAM, 0, rows, rows)
}

fn append_stream(seed: u64, rows: u64, append_rows: u64) -> Generator {
    Generator::new(seed, APPEND_STREAM, rows, append_rows, rows)
}

/// Documents of a stream, one batch at a time.
pub struct Batches {
    records: Generator,
    size: usize,
}

impl Iterator for Batches {
    type Item = Vec<Doc>;

    fn next(&mut self) -> Option<Vec<Doc>> {
        let batch: Vec<Doc> = self
            .records
            .by_ref()
            .take(self.size)
            .map(|r| stored(&r))
            .collect();
        (!batch.is_empty()).then_some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batches_are_the_stream_the_answers_were_computed_from() {
        let data = Data::prepare(42, 2_500, 1_200);
        let mut fill = StreamSummary::default();
        let sizes: Vec<usize> = data.fill_batches(1_000).map(|b| b.len()).collect();
        assert_eq!(sizes, [1_000, 1_000, 500]);
        for record in fill_stream(42, 2_500) {
            fill.add(&record);
        }
        let mut batched = common::data::Checksum::default();
        for doc in data.fill_batches(1_000).flatten() {
            batched.update(doc.json.as_bytes());
        }
        assert_eq!(batched.hex(), fill.checksum.hex());
        assert_eq!(batched.hex(), data.expected.fill.checksum.hex());
        let appended: Vec<Doc> = data.append_batches(1_000).flatten().collect();
        assert_eq!(appended.len(), 1_200);
        assert!(
            appended[0].id.starts_with("000009c4"),
            "numbered after the fill"
        );
        assert!(
            data.info()
                .description
                .starts_with("2,500 measurement records filled, 1,200")
        );
    }
}
