//! Every read scenario's exact answer, computed in one pass over the seeded stream of the fill
//! without holding it: what each scenario asks is chosen from the seed before the pass (the
//! point reads as positions in the stream, the inspection and the system by number), and each
//! answer is folded in as the records go by. Only the sorted pages keep records: the
//! `deep page × 50` newest keys, the least any exact answer to "rows n to n + 50 of the sorted
//! listing" can keep in one pass.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use common::data::{Checksum, rng};
use rand::RngExt;

use super::answer::{Answer, Tally};
use super::record::{INSPECTION_PREFIX, Record, SYSTEM_PREFIX, Shape, parent_id, stored};
use super::scenarios::{PAGE_SIZE, POINT_READS, Params, RANGE_BOUND, Scenario, deep_page};

/// What one pass over a stream of records gives the report: its checksum and its size.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamSummary {
    /// FNV-1a 64 over every stored document, in order.
    pub checksum: Checksum,
    pub docs: u64,
    pub doc_bytes: u64,
}

impl StreamSummary {
    pub fn add(&mut self, record: &Record) {
        let json = stored(record).json;
        self.checksum.update(json.as_bytes());
        self.docs += 1;
        self.doc_bytes += json.len() as u64;
    }

    pub fn of(records: impl Iterator<Item = Record>) -> StreamSummary {
        let mut summary = StreamSummary::default();
        for record in records {
            summary.add(&record);
        }
        summary
    }
}

/// The fill's expected answers, what each scenario asks, and the fill's summary.
#[derive(Debug, Clone)]
pub struct Expected {
    pub params: Params,
    pub fill: StreamSummary,
    answers: Vec<(Scenario, Answer)>,
}

impl Expected {
    /// What `scenario` must return (reads only).
    pub fn answer(&self, scenario: Scenario) -> Option<Answer> {
        self.answers
            .iter()
            .find(|(s, _)| *s == scenario)
            .map(|(_, a)| *a)
    }

    /// One pass over `fill` (the `rows` records every engine is filled with, from `seed`).
    pub fn compute(seed: u64, rows: u64, fill: impl Iterator<Item = Record>) -> Expected {
        let mut pass = Pass::new(seed, rows);
        for (position, record) in fill.enumerate() {
            pass.see(position as u64, &record);
        }
        pass.finish()
    }
}

/// The point reads' records, asked for as positions in the fill: each is the first visible
/// record at or after its position, or the last visible one when none follows.
struct Points {
    /// (position, index in the order asked), by position.
    wanted: Vec<(u64, usize)>,
    next: usize,
    /// Asked indices whose position held a record the account cannot see.
    waiting: Vec<usize>,
    ids: Vec<Option<(String, u64)>>,
    last_visible: Option<(String, u64)>,
}

impl Points {
    fn new(positions: Vec<u64>) -> Points {
        let ids = vec![None; positions.len()];
        let mut wanted: Vec<(u64, usize)> = positions.into_iter().zip(0..).collect();
        wanted.sort_unstable();
        Points {
            wanted,
            next: 0,
            waiting: Vec::new(),
            ids,
            last_visible: None,
        }
    }

    fn see(&mut self, position: u64, record: &Record, visible: bool) {
        let entry = || (record.id.clone(), record.digest());
        if visible {
            for index in self.waiting.drain(..) {
                self.ids[index] = Some(entry());
            }
        }
        while let Some(&(at, index)) = self.wanted.get(self.next) {
            if at != position {
                break;
            }
            if visible {
                self.ids[index] = Some(entry());
            } else {
                self.waiting.push(index);
            }
            self.next += 1;
        }
        if visible {
            self.last_visible = Some(entry());
        }
    }

    /// The ids in the order asked, each with its record's digest (none when no record at all
    /// is visible).
    fn finish(mut self) -> Vec<(String, u64)> {
        if let Some(last) = &self.last_visible {
            for index in self.waiting.drain(..) {
                self.ids[index] = Some(last.clone());
            }
        }
        self.ids.into_iter().flatten().collect()
    }
}

/// A record's place in the sorted listing: newest first, ties by id ascending (as every engine
/// is asked to sort).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    created_at: Reverse<Box<str>>,
    id: Box<str>,
    /// The record's digest (after the unique id: it never decides the order).
    digest: u64,
}

/// The first `keep` entries of the sorted listing, kept in a heap whose top is the last of them.
struct Listing {
    keep: usize,
    heap: BinaryHeap<Listed>,
}

impl Listing {
    fn see(&mut self, record: &Record) {
        if self.keep == 0 {
            return;
        }
        if self.heap.len() == self.keep {
            let last = self.heap.peek().expect("a full heap has a top");
            let newer = (Reverse(record.created_at.as_str()), record.id.as_str())
                < (Reverse(&*last.created_at.0), &*last.id);
            if !newer {
                return;
            }
            self.heap.pop();
        }
        self.heap.push(Listed {
            created_at: Reverse(record.created_at.as_str().into()),
            id: record.id.as_str().into(),
            digest: record.digest(),
        });
    }

    /// Page `number` (from 1) of `PAGE_SIZE` rows, in order.
    fn pages(self, numbers: [u64; 2]) -> [Answer; 2] {
        let sorted = self.heap.into_sorted_vec();
        numbers.map(|number| {
            let mut tally = Tally::new(true);
            let start = ((number - 1) * PAGE_SIZE) as usize;
            for entry in sorted.iter().skip(start).take(PAGE_SIZE as usize) {
                tally.add(entry.digest);
            }
            tally.answer()
        })
    }
}

struct Pass {
    params: Params,
    summary: StreamSummary,
    points: Points,
    listing: Listing,
    inspection: Tally,
    flag: Tally,
    range: Tally,
    all: Tally,
}

impl Pass {
    /// What every scenario asks, drawn from the seed before any record is seen.
    fn new(seed: u64, rows: u64) -> Pass {
        let mut rng = rng(seed, 20);
        let positions: Vec<u64> = (0..POINT_READS)
            .map(|_| rng.random_range(0..rows.max(1)))
            .collect();
        let shape = Shape::of(rows);
        let inspection = parent_id(INSPECTION_PREFIX, rng.random_range(0..shape.inspections));
        let system = parent_id(SYSTEM_PREFIX, rng.random_range(0..shape.systems));
        let deep_page = deep_page(rows);
        Pass {
            params: Params {
                point_ids: Vec::new(),
                inspection,
                range_system: system,
                deep_page,
            },
            summary: StreamSummary::default(),
            points: Points::new(positions),
            listing: Listing {
                keep: (deep_page * PAGE_SIZE) as usize,
                heap: BinaryHeap::new(),
            },
            inspection: Tally::new(false),
            flag: Tally::new(false),
            range: Tally::new(false),
            all: Tally::new(false),
        }
    }

    fn see(&mut self, position: u64, record: &Record) {
        self.summary.add(record);
        let visible = record.visible();
        self.points.see(position, record, visible);
        if !visible {
            return;
        }
        let params = &self.params;
        let digest = record.digest();
        if record.inspection_id == params.inspection {
            self.inspection.add(digest);
        }
        if !record.approved {
            self.flag.add(digest);
        }
        if record.system_id == params.range_system && record.value > RANGE_BOUND {
            self.range.add(digest);
        }
        self.all.add(digest);
        self.listing.see(record);
    }

    fn finish(self) -> Expected {
        let mut params = self.params;
        let found = self.points.finish();
        let mut points = Tally::new(true);
        for (_, digest) in &found {
            points.add(*digest);
        }
        params.point_ids = found.into_iter().map(|(id, _)| id).collect();
        let [first, deep] = self.listing.pages([1, params.deep_page]);
        let all = self.all.answer();
        Expected {
            answers: vec![
                (Scenario::PointRead, points.answer()),
                (Scenario::Inspection, self.inspection.answer()),
                (Scenario::FirstPage, first),
                (Scenario::DeepPage, deep),
                (Scenario::FlagScan, self.flag.answer()),
                (Scenario::RangeScan, self.range.answer()),
                (Scenario::Count, Answer::count(all.rows)),
                (Scenario::LoadAll, all),
            ],
            params,
            fill: self.summary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::app::record::Generator;

    /// The answers computed the way the suite did when it held every record: filter, sort
    /// and page the whole collection in memory.
    fn by_holding_everything(records: &[Record], params: &Params, scenario: Scenario) -> Answer {
        let visible: Vec<&Record> = records.iter().filter(|r| r.visible()).collect();
        let tally = |ordered: bool, found: &mut dyn Iterator<Item = &Record>| {
            let mut tally = Tally::new(ordered);
            found.for_each(|r| tally.add(r.digest()));
            tally.answer()
        };
        let mut sorted = visible.clone();
        sorted.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let page = |n: u64| {
            let mut rows = sorted
                .iter()
                .copied()
                .skip(((n - 1) * PAGE_SIZE) as usize)
                .take(PAGE_SIZE as usize);
            tally(true, &mut rows)
        };
        let visible_with = |keep: &dyn Fn(&Record) -> bool| {
            let mut rows = visible.iter().copied().filter(|r| keep(r));
            tally(false, &mut rows)
        };
        match scenario {
            Scenario::PointRead => {
                let mut rows = params
                    .point_ids
                    .iter()
                    .map(|id| *visible.iter().find(|r| &r.id == id).unwrap());
                tally(true, &mut rows)
            }
            Scenario::Inspection => visible_with(&|r| r.inspection_id == params.inspection),
            Scenario::FirstPage => page(1),
            Scenario::DeepPage => page(params.deep_page),
            Scenario::FlagScan => visible_with(&|r| !r.approved),
            Scenario::RangeScan => {
                visible_with(&|r| r.system_id == params.range_system && r.value > RANGE_BOUND)
            }
            Scenario::Count => Answer::count(visible.len() as u64),
            _ => visible_with(&|_| true),
        }
    }

    #[test]
    fn one_pass_gives_the_answers_of_holding_every_record() {
        for rows in [1, 7, 3_000, 20_000] {
            let records: Vec<Record> = Generator::new(42, 10, 0, rows, rows).collect();
            let expected = Expected::compute(42, rows, records.clone().into_iter());
            for scenario in Scenario::ALL.into_iter().filter(|s| !s.is_write()) {
                assert_eq!(
                    expected.answer(scenario).unwrap(),
                    by_holding_everything(&records, &expected.params, scenario),
                    "{rows} rows, {scenario:?}"
                );
            }
            assert_eq!(expected.fill.docs, rows);
        }
    }

    #[test]
    fn the_oracle_gives_the_seed_shapes() {
        let rows = 50_000;
        let expected = Expected::compute(42, rows, Generator::new(42, 10, 0, rows, rows));
        assert_eq!(expected.params.deep_page, 40);
        let rows_of = |s| expected.answer(s).unwrap().rows;
        assert_eq!(rows_of(Scenario::PointRead), 200);
        assert!((400..600).contains(&rows_of(Scenario::Inspection)));
        assert_eq!(rows_of(Scenario::FirstPage), 50);
        assert_eq!(rows_of(Scenario::DeepPage), 50);
        assert!((1_800..2_200).contains(&rows_of(Scenario::FlagScan)));
        assert!((120..220).contains(&rows_of(Scenario::RangeScan)));
        assert_eq!(rows_of(Scenario::Count), rows_of(Scenario::LoadAll));
        assert!(expected.answer(Scenario::Fill).is_none());
    }

    #[test]
    fn a_point_on_a_hidden_record_takes_the_next_visible_one() {
        let records: Vec<Record> = Generator::new(42, 10, 0, 3_000, 3_000).collect();
        let hidden = records.iter().position(|r| !r.visible()).unwrap() as u64;
        let mut points = Points::new(vec![hidden, 0, hidden]);
        for (position, record) in records.iter().enumerate() {
            points.see(position as u64, record, record.visible());
        }
        let ids = points.finish();
        let next_visible = records[hidden as usize..]
            .iter()
            .find(|r| r.visible())
            .unwrap();
        assert_eq!(ids[0], (next_visible.id.clone(), next_visible.digest()));
        assert_eq!(ids[2].0, next_visible.id);
        assert_eq!(ids.len(), 3);
    }

    #[test]
    fn a_wrong_value_in_a_right_row_changes_every_answer_it_is_in() {
        let rows = 3_000;
        let records: Vec<Record> = Generator::new(42, 10, 0, rows, rows).collect();
        let expected = Expected::compute(42, rows, records.clone().into_iter());
        let first = expected.params.point_ids[0].clone();
        let mut wrong = records.clone();
        let record = wrong.iter_mut().find(|r| r.id == first).unwrap();
        record.note.push('!');
        for scenario in [Scenario::PointRead, Scenario::LoadAll] {
            let answer = by_holding_everything(&wrong, &expected.params, scenario);
            let right = expected.answer(scenario).unwrap();
            assert_eq!(answer.rows, right.rows, "{scenario:?}: the same rows");
            assert_ne!(answer.digest, right.digest, "{scenario:?}: a field differs");
        }
    }
}
