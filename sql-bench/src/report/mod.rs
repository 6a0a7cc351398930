//! sql-bench's reports, pure functions of a [`common::results::Report`]: the crud suite's
//! (seed 000's tables and the durability evidence) and the app suite's (seed 003's table and
//! seed 004's summary) and the ycsb suite's (with what its merge adds up), each a
//! [`common::export::ToolReport`].

pub mod app;
pub mod crud;
pub mod evidence;
pub mod ycsb;
pub mod ycsb_merged;
