//! The suites sql-bench runs, one folder each.

pub mod crud;
