//! One worker's share of any quantity: worker i of n gets ⌊(i+1)X/n⌋ − ⌊iX/n⌋ of X, starting
//! at ⌊iX/n⌋, so the shares are contiguous, never overlap, and add up to X for every X.

use serde::{Deserialize, Serialize};

/// Worker `index` of `count`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub index: u32,
    pub count: u32,
}

impl Segment {
    /// The whole of everything: a run without workers.
    pub const WHOLE: Segment = Segment { index: 0, count: 1 };

    /// Worker `index` of `count`; `None` unless `index < count`.
    pub fn new(index: u32, count: u32) -> Option<Segment> {
        (index < count).then_some(Segment { index, count })
    }

    /// Where this worker's share of `total` starts: ⌊iX/n⌋.
    pub fn start(&self, total: u64) -> u64 {
        floor_share(total, self.index, self.count)
    }

    /// This worker's share of `total`: ⌊(i+1)X/n⌋ − ⌊iX/n⌋.
    pub fn share(&self, total: u64) -> u64 {
        floor_share(total, self.index + 1, self.count) - self.start(total)
    }

    /// This worker's share of `total` as the range `start..start + share`.
    pub fn range(&self, total: u64) -> std::ops::Range<u64> {
        self.start(total)..self.start(total) + self.share(total)
    }

    /// This worker's share of a rate (an open-loop `--rate`): the same split, in proportion.
    pub fn share_of_rate(&self, rate_per_s: f64) -> f64 {
        rate_per_s * (self.share(1_000_000) as f64 / 1_000_000.0)
    }

    /// The seed of this worker's own draws (which keys to read): `seed` itself for a run
    /// without workers, otherwise a mix of `seed` and the index (data generation always uses
    /// `seed`, so every worker generates the same data).
    pub fn seed(&self, seed: u64) -> u64 {
        if self.count == 1 {
            return seed;
        }
        splitmix64(seed ^ u64::from(self.index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn is_leader(&self) -> bool {
        self.index == 0
    }
}

fn floor_share(total: u64, part: u32, count: u32) -> u64 {
    // u128: X·n does not overflow for any u64 X.
    (u128::from(total) * u128::from(part) / u128::from(count)) as u64
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Every X (small ones exhaustively, then random ones up to u64::MAX) is covered exactly
    /// once, contiguously and in order, for n = 1 … 64.
    #[test]
    fn the_shares_cover_every_quantity_exactly_once() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(19);
        let mut totals: Vec<u64> = (0..=300).collect();
        totals.extend((0..200).map(|_| rng.random::<u64>()));
        totals.extend([u64::MAX, u64::MAX - 1, 1 << 63]);
        for count in 1..=64u32 {
            for &total in &totals {
                let mut next = 0u64;
                let mut sum = 0u128;
                for index in 0..count {
                    let segment = Segment::new(index, count).unwrap();
                    let range = segment.range(total);
                    assert_eq!(range.start, next, "X={total} n={count} i={index}");
                    next = range.end;
                    sum += u128::from(segment.share(total));
                    // Shares differ by at most one: no worker gets a lopsided part.
                    let even = total / u64::from(count);
                    assert!(segment.share(total) - even <= 1);
                }
                assert_eq!(next, total, "X={total} n={count}: the last share ends at X");
                assert_eq!(sum, u128::from(total));
            }
        }
    }

    #[test]
    fn a_run_without_workers_keeps_everything_and_its_seed() {
        let whole = Segment::WHOLE;
        assert_eq!((whole.start(16), whole.share(16)), (0, 16));
        assert_eq!(whole.seed(42), 42);
        assert_eq!(whole.share_of_rate(5_000.0), 5_000.0);
        assert!(Segment::new(3, 3).is_none());
        let seeds: std::collections::BTreeSet<u64> = (0..8)
            .map(|i| Segment::new(i, 8).unwrap().seed(42))
            .collect();
        assert_eq!(seeds.len(), 8, "every worker draws its own reads");
        let rates: f64 = (0..3)
            .map(|i| Segment::new(i, 3).unwrap().share_of_rate(5_000.0))
            .sum();
        assert!((rates - 5_000.0).abs() < 1e-6);
    }
}
