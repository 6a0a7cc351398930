//! CockroachDB through the postgres target: it speaks PostgreSQL's protocol and SQL (JSONB,
//! expression indexes, `pg_catalog`), but its durability is Raft over a Pebble WAL, not
//! `fsync`/`synchronous_commit`, and it has no `pg_stat_replication`. So its settings are read
//! with `SHOW CLUSTER SETTING`, its nodes from `crdb_internal.gossip_nodes` and its replication
//! from the default zone configuration.

use std::collections::BTreeMap;

use super::{PostgresTarget, message};
use crate::durability::Durability;
use crate::targets::{Described, Description, TargetError};

/// A write is acknowledged once a quorum of its range's replicas has it in their synced Raft
/// logs; on one node that is the local WAL fsync unless syncing is switched off.
const UNSAFE_NO_SYNC: &str = "kv.raft_log.disable_synchronization_unsafe";

/// Whether a server's `version()` is CockroachDB's.
pub(super) fn is_cockroach(version: &str) -> bool {
    version.starts_with("CockroachDB")
}

/// The replica count in a zone configuration's SQL (`num_replicas = 3,`).
fn num_replicas(zone_sql: &str) -> Option<u32> {
    let rest = zone_sql.split("num_replicas").nth(1)?;
    rest.trim_start_matches([' ', '='])
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Each setting that does not give the configuration's durability.
fn check(durability: Durability, settings: &BTreeMap<String, String>) -> Vec<String> {
    let get = |name: &str| settings.get(name).map_or("(not visible)", String::as_str);
    let mut mismatches = Vec::new();
    if get(UNSAFE_NO_SYNC) != "false" {
        mismatches.push(format!(
            "{UNSAFE_NO_SYNC}={} (needs false: a commit waits for its Raft log fsync)",
            get(UNSAFE_NO_SYNC)
        ));
    }
    // Raft acknowledges a write once a majority of its range's replicas have it: one of one
    // (C0), two of two (C1) and two of three (C4) are expressible; C2 and C3 are not.
    let (nodes, replicas) = match durability {
        Durability::C0 => ("1", None),
        Durability::C1 => ("2", Some("2")),
        Durability::C4 => ("3", Some("3")),
        Durability::C2 | Durability::C3 => {
            mismatches.push(format!(
                "{durability:?} ({}) is not expressible: CockroachDB acknowledges a write after a Raft majority",
                durability.summary()
            ));
            return mismatches;
        }
    };
    if get("nodes") != nodes {
        mismatches.push(format!(
            "{} nodes ({durability:?} is {nodes})",
            get("nodes")
        ));
    }
    if let Some(replicas) = replicas {
        let actual = get("zone.default.num_replicas");
        if actual != replicas {
            mismatches.push(format!(
                "zone.default.num_replicas={actual} (needs {replicas})"
            ));
        }
    }
    mismatches
}

async fn value(target: &PostgresTarget, sql: &str) -> Result<String, TargetError> {
    let row = target
        .control
        .query_one(sql, &[])
        .await
        .map_err(|e| target.error(message(&e)))?;
    // SHOW answers in the setting's own type; every one of these prints as text.
    Ok(row
        .try_get::<_, String>(0)
        .or_else(|_| row.try_get::<_, bool>(0).map(|b| b.to_string()))
        .or_else(|_| row.try_get::<_, i64>(0).map(|n| n.to_string()))
        .unwrap_or_else(|e| format!("(unreadable: {e})")))
}

/// CockroachDB's version and durability settings, checked against `durability`.
pub(super) async fn describe(
    target: &PostgresTarget,
    durability: Durability,
    version: String,
) -> Result<Description, TargetError> {
    let mut settings = BTreeMap::new();
    settings.insert(
        UNSAFE_NO_SYNC.to_owned(),
        value(target, &format!("SHOW CLUSTER SETTING {UNSAFE_NO_SYNC}")).await?,
    );
    settings.insert(
        "nodes".to_owned(),
        value(target, "SELECT count(*) FROM crdb_internal.gossip_nodes").await?,
    );
    let zone = target
        .control
        .query_one("SHOW ZONE CONFIGURATION FROM RANGE default", &[])
        .await
        .map_err(|e| target.error(message(&e)))?;
    let raw: String = zone.try_get("raw_config_sql").unwrap_or_default();
    settings.insert(
        "zone.default.num_replicas".to_owned(),
        num_replicas(&raw).map_or_else(|| "(not visible)".to_owned(), |n| n.to_string()),
    );
    let mismatches = check(durability, &settings);
    Ok(Description {
        system: Described {
            kind: "cockroachdb".into(),
            version,
            settings,
            data_dir: None,
            location: target.location(),
        },
        mismatches,
        settings_checks: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cockroach_is_told_apart_by_its_version() {
        assert!(is_cockroach(
            "CockroachDB CCL v24.3.5 (x86_64-pc-linux-gnu, built 2025/02/03 16:29:19, go1.22.8)"
        ));
        assert!(!is_cockroach("PostgreSQL 15.14 (Debian 15.14-0+deb12u1)"));
    }

    #[test]
    fn zone_sql_gives_the_replica_count() {
        let raw = "ALTER RANGE default CONFIGURE ZONE USING\n\trange_min_bytes = 134217728,\n\tnum_replicas = 3,\n\tconstraints = '[]'";
        assert_eq!(num_replicas(raw), Some(3));
        assert_eq!(num_replicas("nothing"), None);
    }

    #[test]
    fn c0_needs_one_node_and_synced_raft_logs() {
        let settings = |sync: &str, nodes: &str| {
            BTreeMap::from([
                (UNSAFE_NO_SYNC.to_owned(), sync.to_owned()),
                ("nodes".to_owned(), nodes.to_owned()),
            ])
        };
        assert!(check(Durability::C0, &settings("false", "1")).is_empty());
        let unsafe_one = check(Durability::C0, &settings("true", "1"));
        assert_eq!(unsafe_one.len(), 1);
        assert!(unsafe_one[0].contains("needs false"), "{unsafe_one:?}");
        assert_eq!(check(Durability::C0, &settings("false", "3")).len(), 1);
        assert_eq!(check(Durability::C0, &BTreeMap::new()).len(), 2);
    }

    #[test]
    fn replicated_configurations_are_raft_majorities_or_refused() {
        let settings = |nodes: &str, replicas: &str| {
            BTreeMap::from([
                (UNSAFE_NO_SYNC.to_owned(), "false".to_owned()),
                ("nodes".to_owned(), nodes.to_owned()),
                ("zone.default.num_replicas".to_owned(), replicas.to_owned()),
            ])
        };
        assert!(check(Durability::C4, &settings("3", "3")).is_empty());
        assert!(check(Durability::C1, &settings("2", "2")).is_empty());
        let under = check(Durability::C4, &settings("3", "1"));
        assert_eq!(under.len(), 1, "{under:?}");
        assert!(under[0].contains("num_replicas=1"), "{under:?}");
        for config in [Durability::C2, Durability::C3] {
            let refused = check(config, &settings("3", "3"));
            assert!(refused[0].contains("not expressible"), "{refused:?}");
        }
    }
}
