//! The suites sql-bench runs, one folder each: their workloads, data and cells. A suite names
//! no concrete system; `crate::run` drives it over the targets.

pub mod app;
pub mod crud;
pub mod ycsb;
