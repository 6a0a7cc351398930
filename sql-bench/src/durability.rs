//! The durability configurations of seed 000: what every system must guarantee before a write
//! is acknowledged. Each target checks its own settings against the configuration asked for,
//! and reads its cluster (standbys, replicas) from the servers' own status beside its engine
//! (`targets/postgres/cluster.rs`, `targets/mysql/cluster.rs`, `targets/cql/durability.rs`).

use serde::{Deserialize, Serialize};

/// A durability configuration: how many nodes there are, and how many must have made a write
/// durable before it is acknowledged (seed 000's durability table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Durability {
    /// One node, no replication: a write is acknowledged after a local WAL/journal fsync.
    C0,
    /// Two nodes: a write is acknowledged after both have it.
    C1,
    /// Two nodes: a write is acknowledged after the primary has it (asynchronous replica).
    C2,
    /// Three nodes: a write is acknowledged after all three have it.
    C3,
    /// Three nodes: a write is acknowledged after any two of the three have it (quorum).
    C4,
}

impl Durability {
    /// The section title of a report measured in this configuration.
    pub fn section(self) -> &'static str {
        match self {
            Durability::C0 => {
                "C0 — 1 node each, a write is acknowledged after a local WAL/journal fsync"
            }
            Durability::C1 => "C1 — 2 nodes each, a write is acknowledged after both have it",
            Durability::C2 => {
                "C2 — 2 nodes each, a write is acknowledged after the primary has it (asynchronous replica)"
            }
            Durability::C3 => "C3 — 3 nodes each, a write is acknowledged after all 3 have it",
            Durability::C4 => {
                "C4 — 3 nodes each, a write is acknowledged after any 2 of the 3 have it (quorum)"
            }
        }
    }

    /// Nodes besides the primary: standbys (PostgreSQL) or replicas (MariaDB).
    pub fn replicas(self) -> usize {
        match self {
            Durability::C0 => 0,
            Durability::C1 | Durability::C2 => 1,
            Durability::C3 | Durability::C4 => 2,
        }
    }

    /// How many replicas must have a write before it is acknowledged.
    pub fn replicas_acknowledging(self) -> usize {
        match self {
            Durability::C0 | Durability::C2 => 0,
            Durability::C1 | Durability::C4 => 1,
            Durability::C3 => 2,
        }
    }

    pub fn is_replicated(self) -> bool {
        self.replicas() > 0
    }

    /// `2 nodes, acknowledged after both` — for messages.
    pub fn summary(self) -> &'static str {
        match self {
            Durability::C0 => "1 node, acknowledged after a local fsync",
            Durability::C1 => "2 nodes, acknowledged after both",
            Durability::C2 => "2 nodes, acknowledged after the primary only",
            Durability::C3 => "3 nodes, acknowledged after all 3",
            Durability::C4 => "3 nodes, acknowledged after any 2 of 3",
        }
    }

    /// The refusal of a system that runs on one node only (an embedded database).
    pub fn single_node_refusal(self, system: &str) -> Option<String> {
        self.is_replicated().then(|| {
            format!(
                "{system} has no replicated configuration: {self:?} needs {} (use --config C0)",
                self.summary()
            )
        })
    }
}

/// Where the point reads of the read and mixed workloads go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    /// Every operation goes to the primary (as in seed 000).
    Primary,
    /// Point reads go to the replicas given with --replica, connections spread evenly;
    /// writes still go to the primary.
    Replicas,
}

/// One fact read from a server, against what the configuration needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// What was read, and where: `synchronous_standby_names`, `s1 fsync`, `pg_stat_replication`.
    pub what: String,
    /// What the server reported.
    pub reported: String,
    /// What the configuration needs, and why.
    pub needs: String,
    pub ok: bool,
}

impl Check {
    pub fn new(
        what: impl Into<String>,
        reported: impl Into<String>,
        needs: impl Into<String>,
        ok: bool,
    ) -> Check {
        Check {
            what: what.into(),
            reported: reported.into(),
            needs: needs.into(),
            ok,
        }
    }

    /// `what=reported (needs …)`: the refusal names what was expected and what was reported.
    pub fn mismatch(&self) -> String {
        format!("{}={} (needs {})", self.what, self.reported, self.needs)
    }
}

/// The mismatches among `checks`, as refusal sentences.
pub fn mismatches(checks: &[Check]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| !c.ok)
        .map(Check::mismatch)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_counts_follow_the_seed_table() {
        let table: Vec<(usize, usize)> = [
            Durability::C0,
            Durability::C1,
            Durability::C2,
            Durability::C3,
            Durability::C4,
        ]
        .iter()
        .map(|d| (d.replicas() + 1, d.replicas_acknowledging() + 1))
        .collect();
        assert_eq!(table, [(1, 1), (2, 2), (2, 1), (3, 3), (3, 2)]);
    }

    #[test]
    fn an_embedded_database_is_refused_only_for_replicated_configurations() {
        assert!(Durability::C0.single_node_refusal("SQLite").is_none());
        let refusal = Durability::C3.single_node_refusal("SQLite").unwrap();
        assert!(
            refusal.contains("SQLite has no replicated configuration: C3 needs 3 nodes"),
            "{refusal}"
        );
    }
}
