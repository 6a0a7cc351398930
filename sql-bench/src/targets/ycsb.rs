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

/// YCSB's statements in SQL for one table, in an engine's spelling of parameters; an engine
/// prepares those it runs.
#[derive(Debug, Clone)]
pub struct YcsbSql {
    /// The table as the engine names it (`schema.table`).
    pub name: String,
    /// `field0, field1, …`.
    pub fields: String,
    pub read: String,
    /// One per field: that field set, by key.
    pub updates: Vec<String>,
    pub insert: String,
    pub scan: String,
    /// The read of a read-modify-write that holds the row until the update commits
    /// (`… FOR UPDATE`), for an engine with row locks.
    pub lock: String,
    pub delete: String,
}

impl YcsbSql {
    /// The statements on `name`, whose `i`-th parameter (from 1) the engine spells `param(i)`:
    /// `$1` (PostgreSQL), `?1` (SQLite), `?` (MySQL).
    pub fn of(table: &YcsbTable, name: String, param: impl Fn(usize) -> String) -> YcsbSql {
        let fields = table.field_list();
        let n = table.shape.fields;
        let (p1, p2) = (param(1), param(2));
        let values: Vec<String> = (1..=n + 1).map(&param).collect();
        YcsbSql {
            read: format!("SELECT {fields} FROM {name} WHERE ycsb_key = {p1}"),
            updates: (0..n)
                .map(|i| format!("UPDATE {name} SET field{i} = {p1} WHERE ycsb_key = {p2}"))
                .collect(),
            insert: format!(
                "INSERT INTO {name} (ycsb_key, {fields}) VALUES ({})",
                values.join(", ")
            ),
            scan: format!(
                "SELECT {fields} FROM {name} WHERE ycsb_key >= {p1} ORDER BY ycsb_key LIMIT {p2}"
            ),
            lock: format!("SELECT {fields} FROM {name} WHERE ycsb_key = {p1} FOR UPDATE"),
            delete: format!("DELETE FROM {name} WHERE ycsb_key = {p1}"),
            name,
            fields,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_s_spelling_of_parameters_is_used_in_every_statement() {
        let table = YcsbTable {
            name: "usertable",
            shape: Shape {
                fields: 2,
                field_length: 10,
            },
        };
        let pg = YcsbSql::of(&table, "s.usertable".into(), |i| format!("${i}"));
        assert_eq!(
            pg.read,
            "SELECT field0, field1 FROM s.usertable WHERE ycsb_key = $1"
        );
        assert_eq!(
            pg.updates,
            [
                "UPDATE s.usertable SET field0 = $1 WHERE ycsb_key = $2",
                "UPDATE s.usertable SET field1 = $1 WHERE ycsb_key = $2",
            ]
        );
        assert_eq!(
            pg.insert,
            "INSERT INTO s.usertable (ycsb_key, field0, field1) VALUES ($1, $2, $3)"
        );
        assert_eq!(
            pg.scan,
            "SELECT field0, field1 FROM s.usertable WHERE ycsb_key >= $1 ORDER BY ycsb_key LIMIT $2"
        );
        assert_eq!(
            pg.lock,
            "SELECT field0, field1 FROM s.usertable WHERE ycsb_key = $1 FOR UPDATE"
        );
        assert_eq!(pg.delete, "DELETE FROM s.usertable WHERE ycsb_key = $1");
        let my = YcsbSql::of(&table, "t".into(), |_| "?".to_owned());
        assert_eq!(
            my.insert,
            "INSERT INTO t (ycsb_key, field0, field1) VALUES (?, ?, ?)"
        );
        assert_eq!(my.updates[1], "UPDATE t SET field1 = ? WHERE ycsb_key = ?");
        let lite = YcsbSql::of(&table, "t".into(), |i| format!("?{i}"));
        assert_eq!(
            lite.scan,
            "SELECT field0, field1 FROM t WHERE ycsb_key >= ?1 ORDER BY ycsb_key LIMIT ?2"
        );
    }
}
