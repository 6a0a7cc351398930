//! What each durability configuration asks of a CQL cluster (seed 000's table: C0 is one node
//! at consistency ONE with a commit log synced before the acknowledgement) and the check of a
//! server's own settings against it.

use std::collections::BTreeMap;

use scylla::statement::Consistency;

use crate::durability::Durability;

/// What a configuration asks of a CQL cluster: the consistency of every statement, the
/// replication factor of fairbench's keyspace and the nodes it spans. C1–C4 map to
/// QUORUM/ONE/ALL/QUORUM over two or three nodes, as in seed 000.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Requirement {
    pub consistency: Consistency,
    pub replication_factor: usize,
    pub nodes: usize,
}

pub(super) fn requirement(durability: Durability) -> Requirement {
    let (consistency, nodes) = match durability {
        Durability::C0 => (Consistency::One, 1),
        Durability::C1 => (Consistency::Quorum, 2),
        Durability::C2 => (Consistency::One, 2),
        Durability::C3 => (Consistency::All, 3),
        Durability::C4 => (Consistency::Quorum, 3),
    };
    Requirement {
        consistency,
        replication_factor: nodes,
        nodes,
    }
}

/// The settings a configuration depends on, each checked: one line per mismatch.
pub(super) fn check(
    durability: Durability,
    settings: &BTreeMap<String, String>,
    peers: usize,
    keyspace: Option<&(BTreeMap<String, String>, bool)>,
) -> Vec<String> {
    let required = requirement(durability);
    let mut mismatches = Vec::new();
    match settings.get("commitlog_sync").map(String::as_str) {
        Some("batch" | "group") => {}
        Some(other) => mismatches.push(format!(
            "commitlog_sync={other} (needs batch: a write is acknowledged only after its commit-log fsync)"
        )),
        None => mismatches.push(
            "commitlog_sync not reported by the server (needs batch: a write is acknowledged only after its commit-log fsync)".into(),
        ),
    }
    if peers + 1 != required.nodes {
        mismatches.push(format!(
            "{} nodes (system.peers lists {peers}; needs {})",
            peers + 1,
            required.nodes
        ));
    }
    if let Some((replication, durable_writes)) = keyspace {
        let factor = replication
            .get("replication_factor")
            .and_then(|f| f.parse::<usize>().ok());
        if factor != Some(required.replication_factor) {
            mismatches.push(format!(
                "keyspace replication {replication:?} (needs replication_factor {})",
                required.replication_factor
            ));
        }
        if !durable_writes {
            mismatches
                .push("keyspace durable_writes=false (writes would skip the commit log)".into());
        }
    }
    mismatches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c0_needs_one_node_one_replica_and_a_commit_log_synced_before_the_ack() {
        let settings =
            |sync: &str| BTreeMap::from([("commitlog_sync".to_owned(), sync.to_owned())]);
        let keyspace = (
            BTreeMap::from([("replication_factor".to_owned(), "1".to_owned())]),
            true,
        );
        assert!(check(Durability::C0, &settings("batch"), 0, Some(&keyspace)).is_empty());
        let periodic = check(Durability::C0, &settings("periodic"), 0, None);
        assert_eq!(periodic.len(), 1);
        assert!(
            periodic[0].starts_with("commitlog_sync=periodic"),
            "{periodic:?}"
        );
        let wide = (
            BTreeMap::from([("replication_factor".to_owned(), "3".to_owned())]),
            false,
        );
        let all = check(Durability::C0, &BTreeMap::new(), 2, Some(&wide));
        assert_eq!(all.len(), 4, "{all:?}");
        assert_eq!(requirement(Durability::C0).consistency, Consistency::One);
    }

    #[test]
    fn replicated_configurations_map_to_consistency_levels() {
        let c3 = requirement(Durability::C3);
        assert_eq!(
            (c3.consistency, c3.replication_factor),
            (Consistency::All, 3)
        );
        assert_eq!(requirement(Durability::C4).consistency, Consistency::Quorum);
        assert_eq!(requirement(Durability::C2).consistency, Consistency::One);
        let keyspace = (
            BTreeMap::from([("replication_factor".to_owned(), "1".to_owned())]),
            true,
        );
        let settings = BTreeMap::from([("commitlog_sync".to_owned(), "batch".to_owned())]);
        assert_eq!(
            check(Durability::C1, &settings, 0, Some(&keyspace)).len(),
            2
        );
    }
}
