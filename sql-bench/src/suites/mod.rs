//! The suites sql-bench runs, one folder each, and what they share.

pub mod app;
pub mod crud;
pub mod systems;
