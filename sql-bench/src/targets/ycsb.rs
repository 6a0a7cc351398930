//! The ycsb suite's control path of an engine: its YCSB table (a text key and `field0…` text
//! fields, created, verified from the catalog, counted, sampled, dropped), the worker sessions
//! it opens, and what it cannot do (refused with the reason) or answers another way (recorded
//! as `answered_by`). Each engine implements it in its own `ycsb.rs`.

use std::collections::BTreeMap;

use common::pool::BoxFuture;

use super::{Marked, TargetError};
use crate::session::ycsb::YcsbWorkers;
use crate::session::ycsb::op::Shape;
use crate::session::ycsb::stats::Kind;

/// The table of YCSB records, by logical name; each engine maps it into its namespace.
#[derive(Debug, Clone, Copy)]
pub struct YcsbTable {
    pub name: &'static str,
    pub shape: Shape,
}

impl YcsbTable {
    /// `field0, field1, …`.
    pub fn field_list(&self) -> String {
        (0..self.shape.fields)
            .map(|i| format!("field{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The longest key: `user` and a signed 64-bit number.
pub const KEY_LENGTH: usize = 64;

pub trait YcsbTarget: Marked {
    /// Why this engine cannot do `kind` as the workload means it (so the cell is refused
    /// rather than faked); `None` when it can.
    fn refuses(&self, kind: Kind) -> Option<String> {
        let _ = kind;
        None
    }

    /// How the engine answers `kind` when its adapter emulates it (the report says so).
    fn answered_by(&self, kind: Kind) -> Option<String> {
        let _ = kind;
        None
    }

    /// Fails with [`TargetError::Foreign`] when the table exists without fairbench's marker.
    fn check_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        self.ensure_ours_or_absent(table.name)
    }

    /// (Re)creates the table empty, marked as fairbench's, and returns the catalog's evidence
    /// that it is as declared (primary key on the record key, durable storage).
    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>>;

    /// Records the table holds, exactly.
    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>>;

    /// Every field of each record asked for (`None` for a missing one), in the order asked.
    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>>;

    /// Drops fairbench's own table.
    fn drop_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        self.drop_own(table.name)
    }

    /// Opens `size` worker sessions on the table (the load opens its own), before any clock starts.
    fn open_ycsb_workers<'a>(
        &'a self,
        size: usize,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<Box<dyn YcsbWorkers>, TargetError>>;
}

/// Puts rows `(key, fields)` found by a batch read in the order `keys` asked for them.
pub fn in_order(keys: &[String], found: Vec<(String, Vec<String>)>) -> Vec<Option<Vec<String>>> {
    let mut by_key: BTreeMap<String, Vec<String>> = found.into_iter().collect();
    keys.iter().map(|k| by_key.remove(k)).collect()
}
