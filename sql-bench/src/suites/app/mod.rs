//! `sql-bench app`'s suite: seeds 003/004's application-shaped scenarios. Every engine is
//! seeded with the same generated records, its index set is checked against the declaration,
//! every scenario's answer is checked against the generator before it is timed, and every
//! request goes through the application's data layer. The records are streamed, never held,
//! so the client's memory does not grow with `--rows`. `crate::run::app` drives it.

pub mod answer;
pub mod cells;
pub mod data;
pub mod layer;
pub mod oracle;
pub mod record;
pub mod scenarios;

pub use self::data::Data;
use self::record::INDEXED_FIELDS;
use crate::query::Collection;

/// The collection every engine holds, with the declared index set.
pub const COLLECTION: Collection = Collection {
    name: "app_records",
    indexed: &INDEXED_FIELDS,
};
