//! YCSB's key space exactly as Java YCSB defines it (brianfrankcooper/YCSB, core
//! `site.ycsb.generator` and `CoreWorkload`): key names (`user` + FNV-1a 64 of the key number,
//! Java's byte order), the Zipfian generator of Gray et al. with constant 0.99, its scrambled
//! form over 10^10 items, the skewed-latest, hotspot and uniform choosers, the acknowledged
//! insert counter, and the record values. go-ycsb hashes the bytes in the opposite order; the
//! book (docs/src/sql-bench-ycsb.md) says what that changes.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::{Rng, RngExt};
use rand_chacha::ChaCha8Rng;

pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
pub const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val`, least significant byte first, then
/// `Math.abs` (so `i64::MIN` stays negative, as in Java).
pub fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64 as i64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64 as i64);
    }
    hash.wrapping_abs()
}

/// `CoreWorkload.buildKeyName(keynum, zeropadding = 1, orderedinserts = false)`: `user` and the
/// hashed key number, written into `out` (cleared first).
pub fn key_name(keynum: u64, out: &mut String) {
    out.clear();
    write!(out, "user{}", fnvhash64(keynum as i64)).expect("writing to a String");
}

/// The key of `keynum`, as a new string (control paths).
pub fn key_of(keynum: u64) -> String {
    let mut key = String::with_capacity(24);
    key_name(keynum, &mut key);
    key
}

/// The Zipfian constant every YCSB request distribution uses.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// `ScrambledZipfianGenerator.ITEM_COUNT` and its precomputed `ZETAN` (zeta(10^10, 0.99)).
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// `zetastatic(st, n, theta, initialsum)`.
fn zeta(start: u64, n: u64, theta: f64, initial: f64) -> f64 {
    (start..n).fold(initial, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// `ZipfianGenerator`: items `min..=max`, rank 0 (= `min`) the most popular.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Over `min..=max`, zeta computed over every item.
    pub fn new(min: u64, max: u64) -> Zipfian {
        let items = max - min + 1;
        Zipfian::with_zetan(min, max, zeta(0, items, ZIPFIAN_CONSTANT, 0.0))
    }

    /// Over `min..=max` with zeta(items) given (the scrambled generator's precomputed one).
    pub fn with_zetan(min: u64, max: u64, zetan: f64) -> Zipfian {
        let theta = ZIPFIAN_CONSTANT;
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: eta(items, theta, zeta2theta, zetan),
            count_for_zeta: items,
        }
    }

    /// `nextLong(itemcount)`: zeta grows incrementally when `itemcount` does; eta keeps using
    /// the constructor's item count, as Java's does.
    #[inline]
    pub fn next(&mut self, rng: &mut ChaCha8Rng, itemcount: u64) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            self.eta = eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }

    /// `nextValue()`: over the constructor's item count.
    #[inline]
    pub fn next_value(&mut self, rng: &mut ChaCha8Rng) -> u64 {
        self.next(rng, self.items)
    }

    /// The share of draws rank 0 gets: 1 / zeta(n).
    pub fn top_share(&self) -> f64 {
        1.0 / self.zetan
    }
}

fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
}

/// `ScrambledZipfianGenerator(min, max)`: a Zipfian rank over 10^10 items, hashed onto
/// `min..=max`, so the popular keys are spread over the key space.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    zipfian: Zipfian,
    min: u64,
    itemcount: u64,
}

impl ScrambledZipfian {
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            zipfian: Zipfian::with_zetan(0, SCRAMBLED_ITEMS, SCRAMBLED_ZETAN),
            min,
            itemcount: max - min + 1,
        }
    }

    #[inline]
    pub fn next(&mut self, rng: &mut ChaCha8Rng) -> u64 {
        let rank = self.zipfian.next_value(rng);
        self.min + fnvhash64(rank as i64) as u64 % self.itemcount
    }

    /// The key number rank 0 lands on: the most frequent key.
    pub fn hottest(&self) -> u64 {
        self.min + fnvhash64(0) as u64 % self.itemcount
    }

    /// The share of requests the hottest key gets (1 / ZETAN).
    pub fn hottest_share(&self) -> f64 {
        self.zipfian.top_share()
    }
}

/// `SkewedLatestGenerator`: `last - zipfian(last)`, the newest acknowledged key the most
/// popular; the Zipfian's item count grows with the inserts.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// Built when the newest acknowledged key number is `last` (Java: `new
    /// ZipfianGenerator(basis.lastValue())`, items 0..last-1).
    pub fn new(last: u64) -> SkewedLatest {
        SkewedLatest {
            zipfian: Zipfian::new(0, last.max(1) - 1),
        }
    }

    #[inline]
    pub fn next(&mut self, rng: &mut ChaCha8Rng, last: u64) -> u64 {
        last - self.zipfian.next(rng, last)
    }
}

/// `HotspotIntegerGenerator(lb, ub, hotsetFraction, hotOpnFraction)`: the lowest key numbers
/// are the hot set.
#[derive(Debug, Clone, Copy)]
pub struct Hotspot {
    lower: u64,
    hot_interval: u64,
    cold_interval: u64,
    hot_operation_fraction: f64,
}

impl Hotspot {
    pub fn new(lower: u64, upper: u64, data_fraction: f64, operation_fraction: f64) -> Hotspot {
        let interval = upper - lower + 1;
        let hot_interval = ((interval as f64 * data_fraction) as u64).clamp(1, interval);
        Hotspot {
            lower,
            hot_interval,
            cold_interval: (interval - hot_interval).max(1),
            hot_operation_fraction: operation_fraction,
        }
    }

    #[inline]
    pub fn next(&self, rng: &mut ChaCha8Rng) -> u64 {
        let draw = rng.next_u64() >> 1;
        if rng.random::<f64>() < self.hot_operation_fraction {
            self.lower + draw % self.hot_interval
        } else {
            self.lower + self.hot_interval + draw % self.cold_interval
        }
    }
}

/// `UniformLongGenerator(lb, ub)`.
#[inline]
pub fn uniform(rng: &mut ChaCha8Rng, lower: u64, upper: u64) -> u64 {
    lower + (rng.next_u64() >> 1) % (upper - lower + 1)
}

/// Slots of the acknowledgement window (Java's `WINDOW_SIZE`, 2^20).
const WINDOW: u64 = 1 << 20;

/// `AcknowledgedCounterGenerator` for one system's table, shared by its workers across the
/// whole run: inserts take the next key number, and a key is readable (`last`) once it and
/// every key before it is acknowledged. Deletes (fairbench's addition) take the oldest key
/// still present, so choosers redraw below `deleted_below`.
///
/// Everything here counts *positions*: the loaded records `0..records`, then this process's
/// own inserts in order. [`KeySpace::key_number`] names a position's key: the same number
/// for a run alone; on worker `i` of `n` the run's inserts are key numbers `records + i`,
/// `records + i + n`, … (YCSB's counter would hand every client the same ones), so no two
/// workers insert the same key, and a worker's `latest` is the newest of its own inserts.
#[derive(Debug)]
pub struct KeySpace {
    records: u64,
    /// Workers sharing the run's insert sequence, and this one's place in it.
    stride: u64,
    offset: u64,
    next: AtomicU64,
    /// The newest key number every key up to which is acknowledged.
    limit: AtomicU64,
    window: Box<[AtomicBool]>,
    lock: Mutex<()>,
    deleted_below: AtomicU64,
}

impl KeySpace {
    /// After a load of `records` key numbers `0..records` (at least one).
    pub fn new(records: u64) -> KeySpace {
        KeySpace::of_worker(records, 0, 1)
    }

    /// As [`KeySpace::new`], for worker `index` of `count` (see the type's note).
    pub fn of_worker(records: u64, index: u32, count: u32) -> KeySpace {
        KeySpace {
            records,
            stride: u64::from(count.max(1)),
            offset: u64::from(index),
            next: AtomicU64::new(records),
            limit: AtomicU64::new(records - 1),
            window: (0..WINDOW).map(|_| AtomicBool::new(false)).collect(),
            lock: Mutex::new(()),
            deleted_below: AtomicU64::new(0),
        }
    }

    /// The key number at `position`: a loaded record's own, or this worker's insert's.
    #[inline]
    pub fn key_number(&self, position: u64) -> u64 {
        match position.checked_sub(self.records) {
            None => position,
            Some(inserted) => self.records + inserted * self.stride + self.offset,
        }
    }

    /// `lastValue()`: the newest key number that may be read.
    #[inline]
    pub fn last(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Key numbers below this are deleted (or being deleted).
    #[inline]
    pub fn deleted_below(&self) -> u64 {
        self.deleted_below.load(Ordering::Acquire)
    }

    /// Key numbers handed to inserts (and the load) so far.
    pub fn issued(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }

    /// The key number of the next insert.
    #[inline]
    pub fn next_insert(&self) -> u64 {
        self.next.fetch_add(1, Ordering::AcqRel)
    }

    /// `acknowledge(value)`: marks the insert done (whatever its outcome, as Java's `finally`)
    /// and moves `last` over every contiguous acknowledged key when no other worker is.
    pub fn acknowledge(&self, keynum: u64) -> Result<(), String> {
        let slot = &self.window[(keynum % WINDOW) as usize];
        if slot.swap(true, Ordering::AcqRel) {
            return Err("too many unacknowledged insertion keys (more than 2^20 in flight)".into());
        }
        if let Ok(_guard) = self.lock.try_lock() {
            self.sweep_locked();
        }
        Ok(())
    }

    /// Collects the acknowledgements a worker left while another held the lock (after a window).
    pub fn sweep(&self) {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.sweep_locked();
    }

    fn sweep_locked(&self) {
        let mut index = self.limit.load(Ordering::Acquire) + 1;
        for _ in 0..WINDOW {
            let slot = &self.window[(index % WINDOW) as usize];
            if !slot.swap(false, Ordering::AcqRel) {
                break;
            }
            index += 1;
        }
        self.limit.store(index - 1, Ordering::Release);
    }

    /// Claims the oldest key still present for a delete; `None` when only the newest is left.
    pub fn claim_delete(&self) -> Option<u64> {
        let mut current = self.deleted_below.load(Ordering::Acquire);
        loop {
            if current >= self.last() {
                return None;
            }
            match self.deleted_below.compare_exchange(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(current),
                Err(seen) => current = seen,
            }
        }
    }
}

/// The alphabet record values are drawn from: 64 printable characters, one per 6 bits.
const ALPHABET: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

/// Printable ASCII of `len` bytes from `rng`, one random byte per character.
pub fn value(rng: &mut ChaCha8Rng, len: usize) -> String {
    let mut bytes = vec![0u8; len];
    rng.fill_bytes(&mut bytes);
    for b in &mut bytes {
        *b = ALPHABET[(*b & 63) as usize];
    }
    String::from_utf8(bytes).expect("the alphabet is ASCII")
}

/// Generator stream of the loaded record `keynum` (its own, so any record can be regenerated
/// on its own to check what a system returns).
const RECORD_STREAM: u64 = 1 << 48;

/// The field values the load writes for `keynum`, generated from the seed alone.
pub fn record_values(seed: u64, keynum: u64, fields: usize, field_length: usize) -> Vec<String> {
    let mut rng = common::data::rng(seed, RECORD_STREAM | keynum);
    (0..fields).map(|_| value(&mut rng, field_length)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// go-ycsb's `util.Hash64`: the same FNV-1a, most significant byte first.
    fn go_ycsb_hash(n: i64) -> i64 {
        let mut hash = FNV_OFFSET_BASIS_64;
        for byte in (n as u64).to_be_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(FNV_PRIME_64);
        }
        (hash as i64).wrapping_abs()
    }

    #[test]
    fn keys_are_java_ycsbs_and_differ_from_go_ycsbs_after_the_first() {
        assert_eq!(key_of(0), "user6284781860667377211");
        assert_eq!(key_of(1), "user8517097267634966620");
        assert_eq!(go_ycsb_hash(0), 6284781860667377211);
        assert_eq!(go_ycsb_hash(1), 6284782960179005422);
    }

    fn draws(n: usize, mut next: impl FnMut(&mut ChaCha8Rng) -> u64) -> Vec<u64> {
        let mut rng = common::data::rng(7, 1);
        (0..n).map(|_| next(&mut rng)).collect()
    }

    fn top_shares(keys: &[u64], items: usize) -> Vec<(u64, f64)> {
        let mut counts = vec![0u64; items];
        for k in keys {
            counts[*k as usize] += 1;
        }
        let mut ranked: Vec<(u64, f64)> = counts
            .iter()
            .enumerate()
            .map(|(k, c)| (k as u64, *c as f64 / keys.len() as f64))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        ranked
    }

    #[test]
    fn scrambled_zipfian_gives_the_hottest_key_one_over_zetan() {
        let mut chooser = ScrambledZipfian::new(0, 10_000);
        let keys = draws(400_000, |rng| chooser.next(rng));
        let ranked = top_shares(&keys, 10_001);
        assert_eq!(ranked[0].0, 4927, "the hash of rank 0, as the notes found");
        assert_eq!(chooser.hottest(), 4927);
        assert!((ranked[0].1 - 0.0378).abs() < 0.002, "{:?}", &ranked[..3]);
        assert!((ranked[1].1 - 0.019).abs() < 0.002, "{:?}", &ranked[..3]);
        assert!((chooser.hottest_share() - 0.03778).abs() < 1e-4);
    }

    #[test]
    fn plain_zipfian_ranks_from_its_minimum() {
        let mut z = Zipfian::new(1, 100);
        let keys = draws(100_000, |rng| z.next_value(rng));
        assert!(keys.iter().all(|k| (1..=100).contains(k)));
        let ones = keys.iter().filter(|k| **k == 1).count() as f64 / 1e5;
        assert!((ones - z.top_share()).abs() < 0.01, "{ones}");
    }

    #[test]
    fn latest_favours_the_newest_and_follows_inserts() {
        let mut latest = SkewedLatest::new(9_999);
        let keys = draws(100_000, |rng| latest.next(rng, 9_999));
        let newest = keys.iter().filter(|k| **k == 9_999).count() as f64 / 1e5;
        assert!(newest > 0.08, "{newest}");
        assert!(keys.iter().all(|k| *k <= 9_999));
        let recent = keys.iter().filter(|k| **k >= 9_900).count() as f64 / 1e5;
        assert!(recent > 0.4, "{recent}");
        let later = draws(10_000, |rng| latest.next(rng, 20_000));
        assert!(later.iter().filter(|k| **k > 19_900).count() > 4_000);
    }

    #[test]
    fn hotspot_sends_its_share_to_the_lowest_keys() {
        let hot = Hotspot::new(0, 999, 0.2, 0.8);
        let keys = draws(100_000, |rng| hot.next(rng));
        let in_hot = keys.iter().filter(|k| **k < 200).count() as f64 / 1e5;
        assert!((in_hot - 0.8).abs() < 0.01, "{in_hot}");
        assert!(keys.iter().all(|k| *k < 1000));
        let flat = draws(100_000, |rng| uniform(rng, 5, 9));
        assert!(flat.iter().all(|k| (5..=9).contains(k)));
    }

    #[test]
    fn acknowledged_keys_become_readable_in_order() {
        let keys = KeySpace::new(10);
        assert_eq!(keys.last(), 9);
        let (a, b) = (keys.next_insert(), keys.next_insert());
        assert_eq!((a, b), (10, 11));
        keys.acknowledge(b).unwrap();
        assert_eq!(keys.last(), 9, "11 waits for 10");
        keys.acknowledge(a).unwrap();
        keys.sweep();
        assert_eq!(keys.last(), 11);
        assert_eq!(keys.claim_delete(), Some(0));
        assert_eq!(keys.deleted_below(), 1);
    }

    /// Three workers' inserts never meet, and between them they fill the key numbers after
    /// the load without a gap; a run alone keeps YCSB's numbers.
    #[test]
    fn every_worker_inserts_keys_of_its_own() {
        let alone = KeySpace::new(10);
        assert_eq!((alone.key_number(3), alone.key_number(12)), (3, 12));
        let mut seen = std::collections::BTreeSet::new();
        for index in 0..3 {
            let keys = KeySpace::of_worker(10, index, 3);
            assert_eq!(keys.key_number(9), 9, "the loaded records are everyone's");
            for _ in 0..100 {
                let position = keys.next_insert();
                assert!(seen.insert(keys.key_number(position)), "inserted twice");
            }
        }
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            (10..310).collect::<Vec<_>>()
        );
    }

    #[test]
    fn record_values_are_a_function_of_the_seed_and_key() {
        let a = record_values(42, 7, 10, 100);
        assert_eq!(a, record_values(42, 7, 10, 100));
        assert_ne!(a, record_values(42, 8, 10, 100));
        assert_eq!(a.len(), 10);
        assert!(a.iter().all(|v| v.len() == 100 && v.is_ascii()));
    }
}
