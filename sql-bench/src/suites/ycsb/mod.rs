//! `sql-bench ycsb`'s suite: workloads defined in TOML files (YCSB's core workloads A–F as
//! shipped presets) and the records they load and check. `crate::run::ycsb` drives it; the
//! operations themselves are in `crate::session::ycsb`.

pub mod cells;
pub mod data;
pub mod workload;
