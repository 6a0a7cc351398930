//! What a read scenario returned, reduced as the rows stream past to its row count and a
//! digest of the returned records, every field of each ([`Record::digest`]): an exact ordered
//! digest where the scenario's order is part of the answer (sorted pages, the point reads in
//! the order asked), and one that does not depend on order where the engine may return rows
//! in any order. Neither needs the rows kept.
//!
//! [`Record::digest`]: super::record::Record::digest

use common::data::Checksum;

/// A read's answer: how many rows, and the digest of their records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub rows: u64,
    pub digest: u64,
}

impl Answer {
    /// An exact count: the count is the whole answer.
    pub fn count(rows: u64) -> Answer {
        Answer { rows, digest: rows }
    }

    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.digest)
    }
}

/// Folds record digests into an [`Answer`] one at a time.
#[derive(Debug, Clone, Copy)]
pub enum Tally {
    /// FNV-1a 64 over each record's digest in the order returned.
    Ordered { checksum: Checksum, rows: u64 },
    /// The wrapping sum of each record's mixed digest: the same for every order of the same
    /// multiset of records, and different (but for a 2⁻⁶⁴ chance) when one is missing,
    /// duplicated or replaced, or one of its fields differs.
    Unordered { sum: u64, rows: u64 },
}

impl Tally {
    pub fn new(ordered: bool) -> Tally {
        if ordered {
            Tally::Ordered {
                checksum: Checksum::default(),
                rows: 0,
            }
        } else {
            Tally::Unordered { sum: 0, rows: 0 }
        }
    }

    /// One record, by its digest ([`super::record::Record::digest`]).
    pub fn add(&mut self, digest: u64) {
        match self {
            Tally::Ordered { checksum, rows } => {
                checksum.update(&digest.to_le_bytes());
                *rows += 1;
            }
            Tally::Unordered { sum, rows } => {
                *sum = sum.wrapping_add(mix(digest));
                *rows += 1;
            }
        }
    }

    pub fn answer(&self) -> Answer {
        match *self {
            Tally::Ordered { checksum, rows } => Answer {
                rows,
                digest: checksum.value(),
            },
            Tally::Unordered { sum, rows } => Answer { rows, digest: sum },
        }
    }
}

/// SplitMix64's finalizer: spreads FNV's output over all 64 bits, so that sums of digests of
/// similar records (which differ in a few low bits) do not cancel.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(ordered: bool, ids: &[&str]) -> Answer {
        let mut tally = Tally::new(ordered);
        for id in ids {
            let mut checksum = Checksum::default();
            checksum.update(id.as_bytes());
            tally.add(checksum.value());
        }
        tally.answer()
    }

    #[test]
    fn order_matters_only_for_the_ordered_digest() {
        let (forward, backward) = (["a1", "b2", "c3"], ["c3", "b2", "a1"]);
        assert_eq!(of(false, &forward), of(false, &backward));
        assert_ne!(of(true, &forward), of(true, &backward));
        assert_eq!(of(true, &forward).rows, 3);
    }

    #[test]
    fn a_replaced_duplicated_or_missing_id_changes_the_unordered_digest() {
        let right = of(false, &["a1", "b2", "c3"]);
        for wrong in [
            of(false, &["a1", "b2", "c4"]),
            of(false, &["a1", "b2", "b2"]),
            of(false, &["a1", "b2"]),
        ] {
            assert_ne!(right.digest, wrong.digest);
        }
    }
}
