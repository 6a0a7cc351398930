//! The workload families: `_bulk` ingest (count-bounded) and the timed query windows.

pub mod ingest;
pub mod search;
