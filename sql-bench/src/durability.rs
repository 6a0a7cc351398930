//! The durability configurations of seed 000: what every system must guarantee before a write
//! is acknowledged. Each target checks its own settings against the configuration asked for.

use serde::Serialize;

/// A durability configuration. Only C0 (one node) exists so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Durability {
    /// One node, no replication: a write is acknowledged after a local WAL/journal fsync.
    C0,
}

impl Durability {
    /// The section title of a report measured in this configuration.
    pub fn section(self) -> &'static str {
        match self {
            Durability::C0 => {
                "C0 — 1 node each, a write is acknowledged after a local WAL/journal fsync"
            }
        }
    }
}
