//! `sql-bench crud`'s suite: seed 000's CRUD workloads and the data they read and write.
//! `crate::run::crud` drives it.

pub mod data;
pub mod workload;
