//! What a YCSB window measured per kind of operation (counts, the first error, an HDR
//! histogram of latency from the intended start) and what its key chooser asked for (the
//! hottest key's share, reads of keys this run inserted), per worker and merged.

use std::time::Duration;

use common::histogram::pool;
use hdrhistogram::Histogram;

/// The operations of YCSB's core workload, in `CoreWorkload`'s order, then fairbench's delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
    Delete,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Read,
        Kind::Update,
        Kind::Insert,
        Kind::Scan,
        Kind::ReadModifyWrite,
        Kind::Delete,
    ];

    /// The name a workload file and the report use.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Update => "update",
            Kind::Insert => "insert",
            Kind::Scan => "scan",
            Kind::ReadModifyWrite => "read_modify_write",
            Kind::Delete => "delete",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the operation adds or removes records (the count is checked after its window).
    pub fn changes_count(self) -> bool {
        matches!(self, Kind::Insert | Kind::Delete)
    }
}

/// One kind's measurements.
#[derive(Clone, Debug, Default)]
pub struct KindStats {
    pub ok: u64,
    /// Of `ok`, operations whose record another connection deleted after this one chose its
    /// key: "not found" or "0 rows changed" was then the right answer, not an error.
    pub raced_delete: u64,
    pub error: u64,
    pub first_error: Option<String>,
    /// Latency of each completed operation, from its intended start (ns).
    pub latency: Option<Histogram<u64>>,
}

impl KindStats {
    fn merge(&mut self, other: &KindStats) {
        self.ok += other.ok;
        self.raced_delete += other.raced_delete;
        self.error += other.error;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        pool(&mut self.latency, other.latency.as_ref());
    }
}

/// What the key chooser asked for, to check it against the distribution's definition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyStats {
    /// Operations that chose an existing key (all but inserts).
    pub chosen: u64,
    /// Of those, the distribution's most frequent key (zipfian: the hash of rank 0).
    pub hottest: u64,
    /// Of those, the newest readable key at the moment it was chosen.
    pub newest: u64,
    /// Of those, keys inserted by this run (beyond the loaded records).
    pub inserted_by_run: u64,
}

impl KeyStats {
    fn merge(&mut self, other: &KeyStats) {
        self.chosen += other.chosen;
        self.hottest += other.hottest;
        self.newest += other.newest;
        self.inserted_by_run += other.inserted_by_run;
    }
}

/// One worker's (or, merged, one window's) measurements per kind.
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    pub kinds: [KindStats; 6],
    pub keys: KeyStats,
}

impl OpStats {
    pub fn kind(&self, kind: Kind) -> &KindStats {
        &self.kinds[kind.index()]
    }

    #[inline]
    pub fn record_ok(&mut self, kind: Kind, latency: Duration) {
        let stats = &mut self.kinds[kind.index()];
        stats.ok += 1;
        let histogram = stats.latency.get_or_insert_with(|| {
            Histogram::new(3).expect("3 significant figures is a valid precision")
        });
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        if histogram.record(ns).is_err() {
            histogram.saturating_record(ns);
        }
    }

    /// The operation just recorded as completed found its record deleted under it.
    pub fn record_raced_delete(&mut self, kind: Kind) {
        self.kinds[kind.index()].raced_delete += 1;
    }

    pub fn record_error(&mut self, kind: Kind, message: &str) {
        let stats = &mut self.kinds[kind.index()];
        stats.error += 1;
        if stats.first_error.is_none() {
            stats.first_error = Some(message.to_owned());
        }
    }

    pub fn merge(&mut self, other: &OpStats) {
        for (into, from) in self.kinds.iter_mut().zip(&other.kinds) {
            into.merge(from);
        }
        self.keys.merge(&other.keys);
    }

    /// Operations of every kind, completed or failed.
    pub fn total(&self) -> u64 {
        self.kinds.iter().map(|k| k.ok + k.error).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_merge_and_keep_their_first_error() {
        let mut a = OpStats::default();
        a.record_ok(Kind::Read, Duration::from_micros(100));
        a.keys.chosen = 1;
        let mut b = OpStats::default();
        b.record_ok(Kind::Read, Duration::from_micros(300));
        b.record_error(Kind::Update, "no such key");
        b.keys.hottest = 1;
        a.merge(&b);
        assert_eq!(a.kind(Kind::Read).ok, 2);
        assert_eq!(a.kind(Kind::Read).latency.as_ref().unwrap().len(), 2);
        assert_eq!(
            a.kind(Kind::Update).first_error.as_deref(),
            Some("no such key")
        );
        assert!(a.kind(Kind::Scan).latency.is_none());
        assert_eq!((a.keys.chosen, a.keys.hottest), (1, 1));
        assert_eq!(a.total(), 3);
        assert_eq!(Kind::ReadModifyWrite.word(), "read_modify_write");
    }
}
