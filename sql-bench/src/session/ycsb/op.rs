//! One worker's YCSB operation: draws the next kind from the proportions and its key from the
//! request distribution (CoreWorkload's `doTransaction…`), calls its session, checks what came
//! back (every field of every record, exactly one row changed) and keeps per-kind figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::driver::{BlockingOperation, OpError, Operation};
use common::pool::Settle;
use common::watchdog::Interrupt;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::keys::{Hotspot, KeySpace, ScrambledZipfian, SkewedLatest, Zipfian, key_name, uniform};
use super::stats::{Kind, OpStats};
use super::{BlockingYcsbSession, Fetched, YcsbSession};

/// How keys are chosen (CoreWorkload's `requestdistribution`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Request {
    Uniform,
    Zipfian,
    Latest,
    Hotspot {
        data_fraction: f64,
        operation_fraction: f64,
    },
}

impl Request {
    pub fn word(self) -> &'static str {
        match self {
            Request::Uniform => "uniform",
            Request::Zipfian => "zipfian",
            Request::Latest => "latest",
            Request::Hotspot { .. } => "hotspot",
        }
    }
}

/// The length of a scan (`scanlengthdistribution` over `minscanlength..=maxscanlength`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScanLength {
    pub min: u64,
    pub max: u64,
    pub zipfian: bool,
}

/// The shape of every record: `fields` fields of `field_length` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub fields: usize,
    pub field_length: usize,
}

/// What one window's operations draw on; cheap to clone into every worker.
#[derive(Clone, Debug)]
pub struct Mix {
    /// Cumulative proportions in [`Kind::ALL`]'s order (the last is 1).
    pub thresholds: [f64; 6],
    pub request: Request,
    /// Records loaded (key numbers `0..records`).
    pub records: u64,
    /// The scrambled Zipfian's key numbers: `0..=zipfian_max` (records + expected inserts).
    pub zipfian_max: u64,
    pub scan: ScanLength,
    pub shape: Shape,
    /// Field values writes cycle through (pre-generated: nothing is generated per operation).
    pub values: Arc<[String]>,
    /// The system's table: its inserts, acknowledgements and deletes, across the run.
    pub keys: Arc<KeySpace>,
    /// The `latest` chooser as of this window's start (its zeta computed once, not per worker).
    pub latest: Option<SkewedLatest>,
    /// This window's generator streams: the same on every system.
    pub stream: u64,
    pub seed: u64,
    /// How long one operation may take (the window's ceiling), for sessions that bound each
    /// request on the server ([`YcsbSession::deadline`]).
    pub ceiling: Duration,
}

impl Mix {
    /// The proportion of `kind` (thresholds back to shares).
    pub fn proportion(&self, kind: Kind) -> f64 {
        let i = kind.index();
        let before = if i == 0 { 0.0 } else { self.thresholds[i - 1] };
        self.thresholds[i] - before
    }
}

/// A worker's key chooser.
#[derive(Debug, Clone)]
enum Chooser {
    Uniform { upper: u64 },
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
}

/// How many draws a chooser may make before a key that exists (YCSB redraws keys not yet
/// inserted; fairbench also redraws deleted ones).
const REDRAWS: usize = 10_000;

/// What one call does, decided before the session is called.
#[derive(Clone, Copy, Debug)]
enum Step {
    Read,
    Update { field: usize, value: usize },
    Insert { keynum: u64 },
    Scan { length: usize },
    ReadModifyWrite { field: usize, value: usize },
    Delete,
}

/// Worker `worker`'s operation for one window: a session, its random stream, its figures.
pub struct YcsbOp<S> {
    session: S,
    mix: Mix,
    rng: ChaCha8Rng,
    chooser: Chooser,
    scan_zipfian: Option<Zipfian>,
    hottest: Option<u64>,
    key: String,
    /// The number of the key in `self.key`.
    keynum: u64,
    /// The operation under way found its record deleted by another connection.
    raced_delete: bool,
    insert_values: Vec<usize>,
    last: Kind,
    pub stats: OpStats,
}

impl<S> YcsbOp<S> {
    pub fn new(worker: usize, session: S, mix: &Mix) -> YcsbOp<S> {
        let chooser = match mix.request {
            Request::Uniform => Chooser::Uniform {
                upper: mix.records - 1,
            },
            Request::Zipfian => Chooser::Zipfian(ScrambledZipfian::new(0, mix.zipfian_max)),
            Request::Latest => Chooser::Latest(
                mix.latest
                    .clone()
                    .unwrap_or_else(|| SkewedLatest::new(mix.keys.last())),
            ),
            Request::Hotspot {
                data_fraction,
                operation_fraction,
            } => Chooser::Hotspot(Hotspot::new(
                0,
                mix.records - 1,
                data_fraction,
                operation_fraction,
            )),
        };
        let hottest = match &chooser {
            Chooser::Zipfian(z) => Some(z.hottest()),
            _ => None,
        };
        YcsbOp {
            session,
            rng: common::data::rng(mix.seed, (mix.stream << 16) | worker as u64),
            chooser,
            scan_zipfian: mix
                .scan
                .zipfian
                .then(|| Zipfian::new(mix.scan.min, mix.scan.max)),
            hottest,
            key: String::with_capacity(32),
            keynum: 0,
            raced_delete: false,
            insert_values: Vec::with_capacity(mix.shape.fields),
            mix: mix.clone(),
            last: Kind::Read,
            stats: OpStats::default(),
        }
    }

    /// `DiscreteGenerator` over the proportions.
    #[inline]
    fn next_kind(&mut self) -> Kind {
        let u: f64 = self.rng.random();
        let i = self
            .mix
            .thresholds
            .iter()
            .position(|t| u < *t)
            .unwrap_or_else(|| {
                self.mix
                    .thresholds
                    .iter()
                    .rposition(|t| *t > 0.0)
                    .unwrap_or(0)
            });
        Kind::ALL[i]
    }

    /// `nextKeynum()`: a key that exists, into `self.key`.
    #[inline]
    fn choose_key(&mut self) -> Result<(), OpError> {
        for _ in 0..REDRAWS {
            let last = self.mix.keys.last();
            // Uniform and hotspot keys range over the loaded count of records from the oldest
            // still present: deletes slide the range up, so a mix whose inserts keep pace with
            // its deletes keeps as many keys to draw from. Without deletes this is YCSB's range.
            let oldest = self.mix.keys.deleted_below();
            let keynum = match &mut self.chooser {
                Chooser::Uniform { upper } => oldest + uniform(&mut self.rng, 0, *upper),
                Chooser::Zipfian(z) => z.next(&mut self.rng),
                Chooser::Latest(l) => l.next(&mut self.rng, last),
                Chooser::Hotspot(h) => oldest + h.next(&mut self.rng),
            };
            if keynum > last || keynum < self.mix.keys.deleted_below() {
                continue;
            }
            let keys = &mut self.stats.keys;
            keys.chosen += 1;
            keys.hottest += u64::from(Some(keynum) == self.hottest);
            keys.newest += u64::from(keynum == last);
            keys.inserted_by_run += u64::from(keynum >= self.mix.records);
            key_name(self.mix.keys.key_number(keynum), &mut self.key);
            self.keynum = keynum;
            return Ok(());
        }
        Err(OpError::Failed(format!(
            "no existing key in {REDRAWS} draws (every key the distribution reaches is deleted or not yet inserted)"
        )))
    }

    #[inline]
    fn pick_value(&mut self) -> usize {
        self.rng.random_range(0..self.mix.values.len())
    }

    /// Decides the next call: its kind, its key (in `self.key`) and what it writes.
    fn next_step(&mut self) -> Result<Step, OpError> {
        let kind = self.next_kind();
        self.last = kind;
        self.raced_delete = false;
        let step = match kind {
            Kind::Insert => {
                let keynum = self.mix.keys.next_insert();
                key_name(self.mix.keys.key_number(keynum), &mut self.key);
                self.keynum = keynum;
                self.insert_values.clear();
                for _ in 0..self.mix.shape.fields {
                    let v = self.pick_value();
                    self.insert_values.push(v);
                }
                return Ok(Step::Insert { keynum });
            }
            Kind::Delete => match self.mix.keys.claim_delete() {
                Some(keynum) => {
                    key_name(self.mix.keys.key_number(keynum), &mut self.key);
                    self.keynum = keynum;
                    return Ok(Step::Delete);
                }
                None => {
                    return Err(OpError::Failed(
                        "delete: only the newest record is left".into(),
                    ));
                }
            },
            Kind::Read => Step::Read,
            Kind::Update => Step::Update {
                field: self.rng.random_range(0..self.mix.shape.fields),
                value: self.pick_value(),
            },
            Kind::Scan => Step::Scan {
                length: self.scan_length(),
            },
            Kind::ReadModifyWrite => Step::ReadModifyWrite {
                field: self.rng.random_range(0..self.mix.shape.fields),
                value: self.pick_value(),
            },
        };
        self.choose_key()?;
        Ok(step)
    }

    fn scan_length(&mut self) -> usize {
        let ScanLength { min, max, .. } = self.mix.scan;
        match &mut self.scan_zipfian {
            Some(z) => z.next_value(&mut self.rng) as usize,
            None => uniform(&mut self.rng, min, max) as usize,
        }
    }

    /// Every field of every record came back whole.
    fn check_fetched(&self, what: &str, got: Fetched, at_most: usize) -> Result<(), OpError> {
        let shape = self.mix.shape;
        let whole = got.fields == got.records * shape.fields
            && got.bytes == got.fields * shape.field_length
            && (1..=at_most).contains(&got.records);
        if whole {
            Ok(())
        } else {
            Err(OpError::Failed(format!(
                "{what} {}: {} records, {} fields, {} bytes returned; each record has {} fields of {} bytes",
                self.key, got.records, got.fields, got.bytes, shape.fields, shape.field_length
            )))
        }
    }

    /// Whether a delete claimed the key of the operation under way after it was chosen
    /// (choosers redraw keys already claimed, and deletes claim each key once, so no other
    /// absence is explained).
    fn deleted_since_chosen(&self) -> bool {
        self.last != Kind::Delete && self.keynum < self.mix.keys.deleted_below()
    }

    fn check_found(&mut self, what: &str, got: Option<Fetched>) -> Result<(), OpError> {
        match got {
            Some(got) => self.check_fetched(what, got, 1),
            None if self.deleted_since_chosen() => {
                self.raced_delete = true;
                Ok(())
            }
            None => Err(OpError::Failed(format!("{what} {}: not found", self.key))),
        }
    }

    fn check_one_row(&mut self, what: &str, rows: u64) -> Result<(), OpError> {
        if rows == 1 {
            Ok(())
        } else if rows == 0 && self.deleted_since_chosen() {
            self.raced_delete = true;
            Ok(())
        } else {
            Err(OpError::Failed(format!(
                "{what} {}: {rows} rows changed, not 1",
                self.key
            )))
        }
    }

    fn record_completed(&mut self, latency: Duration) {
        self.stats.record_ok(self.last, latency);
        if self.raced_delete {
            self.stats.record_raced_delete(self.last);
        }
    }

    /// Counts the outcome; an insert is acknowledged whatever it was, as YCSB's `finally` does.
    fn settle(&mut self, step: Step, result: Result<(), OpError>) -> Result<(), OpError> {
        if let Step::Insert { keynum } = step
            && let Err(e) = self.mix.keys.acknowledge(keynum)
        {
            return Err(OpError::Fatal(e));
        }
        if let Err(e) = &result {
            self.stats.record_error(self.last, &e.to_string());
        }
        result
    }
}

/// A ycsb window's tally: every operation's statistics, merged.
impl<S> Settle for YcsbOp<S> {
    type Session = S;
    type Tally = OpStats;

    fn settle(self, stats: &mut OpStats) -> S {
        stats.merge(&self.stats);
        self.session
    }
}

impl<S: YcsbSession> Operation for YcsbOp<S> {
    async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        self.session.deadline(Instant::now() + self.mix.ceiling);
        let step = match self.next_step() {
            Ok(step) => step,
            Err(e) => return self.settle(Step::Read, Err(e)),
        };
        let values = &self.mix.values;
        let result = match step {
            Step::Read => {
                let got = self.session.read(&self.key).await;
                got.and_then(|g| self.check_found("read", g))
            }
            Step::Update { field, value } => {
                let rows = self.session.update(&self.key, field, &values[value]).await;
                rows.and_then(|r| self.check_one_row("update", r))
            }
            Step::Insert { .. } => {
                let record: Vec<&str> = self
                    .insert_values
                    .iter()
                    .map(|v| values[*v].as_str())
                    .collect();
                self.session.insert(&self.key, &record).await
            }
            Step::Scan { length } => {
                let got = self.session.scan(&self.key, length).await;
                got.and_then(|g| self.check_fetched("scan from", g, length))
            }
            Step::ReadModifyWrite { field, value } => {
                let got = self
                    .session
                    .read_modify_write(&self.key, field, &values[value])
                    .await;
                got.and_then(|g| self.check_found("read-modify-write", g))
            }
            Step::Delete => {
                let rows = self.session.delete(&self.key).await;
                rows.and_then(|r| self.check_one_row("delete", r))
            }
        };
        self.settle(step, result)
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.session.cancel().await
    }

    #[inline]
    fn completed(&mut self, latency: Duration) {
        self.record_completed(latency);
    }
}

impl<S: BlockingYcsbSession> BlockingOperation for YcsbOp<S> {
    fn interrupt(&self) -> Option<Interrupt> {
        self.session.interrupt()
    }

    fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        let step = match self.next_step() {
            Ok(step) => step,
            Err(e) => return self.settle(Step::Read, Err(e)),
        };
        let values = self.mix.values.clone();
        let result = match step {
            Step::Read => {
                let got = self.session.read(&self.key);
                got.and_then(|g| self.check_found("read", g))
            }
            Step::Update { field, value } => {
                let rows = self.session.update(&self.key, field, &values[value]);
                rows.and_then(|r| self.check_one_row("update", r))
            }
            Step::Insert { .. } => {
                let record: Vec<&str> = self
                    .insert_values
                    .iter()
                    .map(|v| values[*v].as_str())
                    .collect();
                self.session.insert(&self.key, &record)
            }
            Step::Scan { length } => {
                let got = self.session.scan(&self.key, length);
                got.and_then(|g| self.check_fetched("scan from", g, length))
            }
            Step::ReadModifyWrite { field, value } => {
                let got = self
                    .session
                    .read_modify_write(&self.key, field, &values[value]);
                got.and_then(|g| self.check_found("read-modify-write", g))
            }
            Step::Delete => {
                let rows = self.session.delete(&self.key);
                rows.and_then(|r| self.check_one_row("delete", r))
            }
        };
        self.settle(step, result)
    }

    #[inline]
    fn completed(&mut self, latency: Duration) {
        self.record_completed(latency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn mix(shares: [f64; 6], request: Request) -> Mix {
        let mut thresholds = [0.0; 6];
        let mut sum = 0.0;
        for (t, s) in thresholds.iter_mut().zip(shares) {
            sum += s;
            *t = sum;
        }
        Mix {
            thresholds,
            request,
            records: 10_000,
            zipfian_max: 10_000,
            scan: ScanLength {
                min: 1,
                max: 100,
                zipfian: false,
            },
            shape: Shape {
                fields: 10,
                field_length: 100,
            },
            values: vec!["x".repeat(100)].into(),
            keys: Arc::new(KeySpace::new(10_000)),
            latest: None,
            stream: 1,
            seed: 42,
            ceiling: Duration::from_secs(120),
        }
    }

    #[test]
    fn the_mix_follows_the_proportions_and_the_same_stream_repeats() {
        let m = mix([0.5, 0.3, 0.0, 0.15, 0.05, 0.0], Request::Uniform);
        assert!((m.proportion(Kind::Scan) - 0.15).abs() < 1e-12);
        let mut op = YcsbOp::new(0, (), &m);
        let mut counts = [0u32; 6];
        for _ in 0..100_000 {
            counts[op.next_kind().index()] += 1;
        }
        for kind in Kind::ALL {
            let share = f64::from(counts[kind.index()]) / 1e5;
            assert!(
                (share - m.proportion(kind)).abs() < 0.01,
                "{kind:?} {share}"
            );
        }
        let keys = |worker| {
            let mut op = YcsbOp::new(worker, (), &m);
            (0..5)
                .map(|_| {
                    op.choose_key().unwrap();
                    op.key.clone()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(3),
            keys(3),
            "the same worker draws the same keys on every system"
        );
        assert_ne!(keys(3), keys(4));
    }

    #[test]
    fn a_record_deleted_by_another_connection_after_its_key_was_chosen_is_no_error() {
        let m = mix([0.5, 0.5, 0.0, 0.0, 0.0, 0.0], Request::Uniform);
        let mut op = YcsbOp::new(0, (), &m);
        op.last = Kind::Read;
        op.choose_key().unwrap();
        let chosen = op.keynum;
        assert!(
            op.check_found("read", None).is_err(),
            "absent with no delete claimed: an error"
        );
        assert!(op.check_one_row("update", 0).is_err());
        assert!(!op.raced_delete);
        while m.keys.deleted_below() <= chosen {
            m.keys.claim_delete().unwrap();
        }
        op.check_found("read", None).unwrap();
        assert!(op.raced_delete);
        op.raced_delete = false;
        op.last = Kind::Update;
        op.check_one_row("update", 0).unwrap();
        op.record_completed(Duration::from_micros(50));
        assert_eq!(op.stats.kind(Kind::Update).raced_delete, 1);
        assert_eq!(op.stats.kind(Kind::Update).ok, 1);
        assert!(
            op.check_one_row("update", 2).is_err(),
            "two rows changed is wrong whatever was deleted"
        );
    }

    #[test]
    fn deletes_slide_the_uniform_and_hotspot_range_up() {
        for request in [
            Request::Uniform,
            Request::Hotspot {
                data_fraction: 0.2,
                operation_fraction: 0.8,
            },
        ] {
            let m = mix([0.5, 0.0, 0.25, 0.0, 0.0, 0.25], request);
            let mut op = YcsbOp::new(0, (), &m);
            // Every loaded record deleted, as many inserted and acknowledged.
            for _ in 0..10_000 {
                let keynum = m.keys.next_insert();
                m.keys.acknowledge(keynum).unwrap();
            }
            m.keys.sweep();
            for _ in 0..10_000 {
                m.keys.claim_delete().unwrap();
            }
            for _ in 0..1_000 {
                op.choose_key().unwrap();
                assert!((10_000..20_000).contains(&op.keynum), "{request:?}");
            }
        }
    }

    #[test]
    fn zipfian_requests_count_the_hottest_key_and_never_a_missing_one() {
        let m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], Request::Zipfian);
        let mut op = YcsbOp::new(0, (), &m);
        for _ in 0..200_000 {
            op.choose_key().unwrap();
        }
        let share = op.stats.keys.hottest as f64 / op.stats.keys.chosen as f64;
        assert!((share - 0.0378).abs() < 0.003, "{share}");
        assert_eq!(op.stats.keys.inserted_by_run, 0, "keynum 10000 is redrawn");
    }
}
