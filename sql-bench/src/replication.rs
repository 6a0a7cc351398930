//! Replicated configurations: which replicas a target has (`--replica`), and the evidence a
//! cluster gives of its durability, as stored in the report. Each engine reads its own cluster
//! beside its target (`targets/postgres/cluster.rs`, `targets/mysql/cluster.rs`,
//! `targets/cql/durability.rs`); the report renders the evidence (`report/evidence.rs`).

use std::collections::BTreeMap;

use common::options::TargetSpec;
use common::redact::redact_url;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::durability::{Check, Durability, ReadFrom};

/// The key of the durability evidence in `Report::extra`.
pub const EXTRA_KEY: &str = "durability";

/// `--replica [TARGET=]HOST:PORT[,HOST:PORT…]` or `--replica [TARGET=]URL`: the replicas of one
/// target. A bare address reuses the target's URL (user, password, database) with another
/// host and port.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSpec {
    /// The target's name (its NAME=, or the engine it is named after); `None` when there is
    /// one target only.
    pub target: Option<String>,
    /// `HOST:PORT` or full URLs, in the order given.
    pub addresses: Vec<String>,
}

impl ReplicaSpec {
    pub fn parse(text: &str) -> Result<ReplicaSpec, String> {
        let spec = TargetSpec::parse(text)?;
        let addresses: Vec<String> = if spec.url.contains("://") {
            vec![spec.url]
        } else {
            spec.url.split(',').map(|a| a.trim().to_owned()).collect()
        };
        for address in &addresses {
            if !address.contains("://") && !is_host_port(address) {
                return Err(format!(
                    "replica `{address}` is neither HOST:PORT nor a URL (for example postgres=127.0.0.1:5433)"
                ));
            }
        }
        Ok(ReplicaSpec {
            target: spec.name,
            addresses,
        })
    }
}

fn is_host_port(text: &str) -> bool {
    text.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.contains(['/', '@']) && port.parse::<u16>().is_ok_and(|p| p > 0)
    })
}

impl Serialize for ReplicaSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let addresses: Vec<String> = self.addresses.iter().map(|a| redact_url(a)).collect();
        let text = match &self.target {
            Some(name) => format!("{name}={}", addresses.join(",")),
            None => addresses.join(","),
        };
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for ReplicaSpec {
    /// A stored replica reads back as written (its password, if any, stays redacted).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ReplicaSpec, D::Error> {
        let text = String::deserialize(deserializer)?;
        ReplicaSpec::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The URL of a replica: `address` itself when it is a URL, else the primary's URL with its
/// host and port replaced.
pub fn replica_url(primary_url: &str, address: &str) -> Result<String, String> {
    if address.contains("://") {
        return Ok(address.to_owned());
    }
    let (scheme, rest) = primary_url.split_once("://").ok_or_else(|| {
        format!(
            "the target `{}` has no host to replace",
            redact_url(primary_url)
        )
    })?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let userinfo = authority.rfind('@').map_or("", |at| &authority[..=at]);
    Ok(format!("{scheme}://{userinfo}{address}{tail}"))
}

/// The replicas given for the target named `name` (when only one target is measured, unnamed
/// replicas are its own).
pub fn replicas_of(
    name: &str,
    primary_url: &str,
    given: &[ReplicaSpec],
    single_target: bool,
) -> Result<Vec<TargetSpec>, String> {
    let mut urls = Vec::new();
    for spec in given {
        let ours = match &spec.target {
            Some(target) => target == name,
            None => single_target,
        };
        if ours {
            for address in &spec.addresses {
                urls.push(TargetSpec {
                    name: Some(format!("{name}-replica-{}", urls.len() + 1)),
                    url: replica_url(primary_url, address)?,
                });
            }
        }
    }
    Ok(urls)
}

/// Checks that every `--replica` names a target, once names are settled.
pub fn check_replica_targets(given: &[ReplicaSpec], names: &[String]) -> Result<(), String> {
    if names.len() > 1 && given.iter().any(|s| s.target.is_none()) {
        return Err(format!(
            "with several targets, each --replica must say whose it is: --replica NAME=HOST:PORT (targets: {})",
            names.join(", ")
        ));
    }
    for spec in given {
        if let Some(target) = &spec.target
            && !names.contains(target)
        {
            return Err(format!(
                "--replica {target}=… names no target (targets: {})",
                names.join(", ")
            ));
        }
    }
    Ok(())
}

/// What a system's cluster reported, checked against the configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterEvidence {
    /// Every fact read, settings first, then the cluster's status.
    pub checks: Vec<Check>,
    /// The nodes as the servers reported them (`primary 127.0.0.1:5432`, `s1 streaming sync`).
    pub nodes: Vec<String>,
    /// Counters that must not grow while the run measures (commits acknowledged without a
    /// replica), with their value when the run began.
    pub steady_counters: BTreeMap<String, u64>,
    /// When the configuration can only be approximated, what is measured instead (the `*` of
    /// MariaDB's C3 in seed 000).
    pub approximation: Option<String>,
    /// The label every cell of an approximated configuration carries (`*`).
    #[serde(default)]
    pub label: Option<String>,
}

impl ClusterEvidence {
    pub fn mismatches(&self) -> Vec<String> {
        crate::durability::mismatches(&self.checks)
    }

    /// The facts as `verified` settings of the system: one entry per check.
    pub fn verified(&self) -> BTreeMap<String, String> {
        self.checks
            .iter()
            .map(|c| (c.what.clone(), c.reported.clone()))
            .collect()
    }
}

/// Whether `--replica` named as many replicas as the configuration has (each is asked for its
/// own status, so none may be left out); nothing to check for C0 without replicas.
pub fn replicas_given(
    noun: &str,
    asked: &str,
    replicas: &[TargetSpec],
    durability: Durability,
) -> Option<Check> {
    (durability.is_replicated() || !replicas.is_empty()).then(|| {
        let wanted = durability.replicas();
        Check::new(
            format!("{noun} given (--replica)"),
            replicas.len().to_string(),
            format!("{wanted}: each is asked {asked}"),
            replicas.len() == wanted,
        )
    })
}

/// The checks that fail now that did not at the start: a replica gone, semi-sync fallen back,
/// commits acknowledged without a replica while the run measured.
pub fn changed_since(before: &ClusterEvidence, after: &ClusterEvidence) -> Vec<String> {
    let failed_before = |what: &str| before.checks.iter().any(|c| c.what == what && !c.ok);
    let mut changes: Vec<String> = after
        .checks
        .iter()
        .filter(|c| !c.ok && !failed_before(&c.what))
        .map(Check::mismatch)
        .collect();
    for (name, start) in &before.steady_counters {
        if let Some(end) = after.steady_counters.get(name)
            && end > start
        {
            changes.push(format!(
                "{name} rose from {start} to {end}: {} commits were acknowledged without waiting for a replica",
                end - start
            ));
        }
    }
    changes
}

/// The evidence of one system, as stored in the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SystemEvidence {
    pub system: String,
    /// Whether every check passed when the run began.
    pub matched: bool,
    /// Measured although it did not match (`--allow-unmatched-durability`).
    pub measured_unmatched: bool,
    pub evidence: ClusterEvidence,
    /// What no longer held when the run ended (empty when nothing changed).
    #[serde(default)]
    pub changed_during_run: Vec<String>,
}

/// Every system's evidence: `report.extra["durability"]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DurabilityEvidence {
    pub config: Durability,
    pub read_from: String,
    pub systems: Vec<SystemEvidence>,
}

impl DurabilityEvidence {
    pub fn new(config: Durability, read_from: ReadFrom) -> DurabilityEvidence {
        DurabilityEvidence {
            config,
            read_from: match read_from {
                ReadFrom::Primary => "primary".into(),
                ReadFrom::Replicas => "replicas".into(),
            },
            systems: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_addresses_or_urls_with_an_optional_target() {
        let spec = ReplicaSpec::parse("pg=127.0.0.1:5433,127.0.0.1:5434").unwrap();
        assert_eq!(spec.target.as_deref(), Some("pg"));
        assert_eq!(spec.addresses, ["127.0.0.1:5433", "127.0.0.1:5434"]);
        let bare = ReplicaSpec::parse("[::1]:5433").unwrap();
        assert_eq!(
            (bare.target, bare.addresses),
            (None, vec!["[::1]:5433".to_owned()])
        );
        let url = ReplicaSpec::parse("my=mysql://u:secret@127.0.0.1:3307/db").unwrap();
        assert_eq!(url.addresses, ["mysql://u:secret@127.0.0.1:3307/db"]);
        let json = serde_json::to_string(&url).unwrap();
        assert!(!json.contains("secret"), "{json}");
        for bad in ["pg=127.0.0.1", "pg=:5433", "pg=host:port", "pg=127.0.0.1:0"] {
            assert!(ReplicaSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bare_replica_address_keeps_the_primary_credentials_and_database() {
        let primary = "postgres://bench:pw@127.0.0.1:5432/db?sslmode=disable";
        assert_eq!(
            replica_url(primary, "127.0.0.1:5433").unwrap(),
            "postgres://bench:pw@127.0.0.1:5433/db?sslmode=disable"
        );
        assert_eq!(
            replica_url("mysql://u@[::1]:3306", "[::1]:3307").unwrap(),
            "mysql://u@[::1]:3307"
        );
        assert_eq!(
            replica_url(primary, "postgres://x@h:1/d").unwrap(),
            "postgres://x@h:1/d"
        );
    }

    #[test]
    fn replicas_belong_to_the_target_they_name() {
        let given = vec![
            ReplicaSpec::parse("pg=127.0.0.1:5433").unwrap(),
            ReplicaSpec::parse("my=127.0.0.1:3307,127.0.0.1:3308").unwrap(),
        ];
        let mine = replicas_of("my", "mysql://u:p@127.0.0.1:3306/d", &given, false).unwrap();
        let urls: Vec<&str> = mine.iter().map(|s| s.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "mysql://u:p@127.0.0.1:3307/d",
                "mysql://u:p@127.0.0.1:3308/d"
            ]
        );
        let names = vec!["pg".to_owned(), "my".to_owned()];
        assert!(check_replica_targets(&given, &names).is_ok());
        let stray = vec![ReplicaSpec::parse("other=127.0.0.1:1").unwrap()];
        assert!(
            check_replica_targets(&stray, &names)
                .unwrap_err()
                .contains("names no target")
        );
        let unnamed = vec![ReplicaSpec::parse("127.0.0.1:1").unwrap()];
        assert!(
            check_replica_targets(&unnamed, &names)
                .unwrap_err()
                .contains("must say whose")
        );
        assert!(check_replica_targets(&unnamed, &names[..1]).is_ok());
    }

    #[test]
    fn commits_acknowledged_without_a_replica_during_the_run_are_a_change() {
        let before = ClusterEvidence {
            steady_counters: BTreeMap::from([("Rpl_semi_sync_master_no_tx".to_owned(), 3)]),
            ..ClusterEvidence::default()
        };
        assert!(changed_since(&before, &before).is_empty());
        let mut after = before.clone();
        after
            .steady_counters
            .insert("Rpl_semi_sync_master_no_tx".into(), 10);
        after.checks.push(Check::new(
            "Rpl_semi_sync_master_status",
            "OFF",
            "ON",
            false,
        ));
        let changes = changed_since(&before, &after);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(
            changes[1].contains("rose from 3 to 10: 7 commits"),
            "{changes:?}"
        );
    }
}
