//! PostgreSQL's replication evidence for C0–C4, beside the engine it reads: the primary's
//! `synchronous_commit` and `synchronous_standby_names`, its `pg_stat_replication` (standbys
//! streaming and their `sync_state`), and each standby's own view (in recovery, streaming
//! from this primary, `fsync` on).

use std::collections::BTreeMap;

use common::options::TargetSpec;
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config};

use super::{Link, connect};
use crate::durability::{Check, Durability};
use crate::replication::{ClusterEvidence, replicas_given};
use crate::targets::{Identity, Reach, TargetError};

/// A parsed `synchronous_standby_names`: `[FIRST|ANY] n (name, …)` or `name, …` (FIRST 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStandbys {
    /// `ANY` (quorum) rather than `FIRST` (priority).
    pub any: bool,
    pub num_sync: usize,
    pub names: Vec<String>,
}

impl SyncStandbys {
    /// `None` for `''`: no commit waits for a standby.
    pub fn parse(text: &str) -> Option<SyncStandbys> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let (any, rest) = match text.split_once(char::is_whitespace) {
            Some((word, rest)) if word.eq_ignore_ascii_case("any") => (true, rest.trim()),
            Some((word, rest)) if word.eq_ignore_ascii_case("first") => (false, rest.trim()),
            _ => (false, text),
        };
        let (num_sync, list) = match rest.find('(') {
            Some(open) => (
                rest[..open].trim().parse().ok()?,
                rest[open + 1..].trim_end().strip_suffix(')')?,
            ),
            None => (1, rest),
        };
        let names = list
            .split(',')
            .map(|n| n.trim().trim_matches('"').to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        Some(SyncStandbys {
            any,
            num_sync,
            names,
        })
    }

    /// How many standbys can be chosen from (`*` matches any number).
    fn candidates(&self) -> usize {
        if self.names.iter().any(|n| n == "*") {
            usize::MAX
        } else {
            self.names.len()
        }
    }
}

/// The primary's own settings against `durability`; `describe()` refuses on these.
pub fn settings_checks(settings: &BTreeMap<String, String>, durability: Durability) -> Vec<Check> {
    let get = |name: &str| settings.get(name).map_or("(not visible)", String::as_str);
    let fsync = get("fsync");
    let commit = get("synchronous_commit");
    let commit_check = if durability.replicas_acknowledging() > 0 {
        Check::new(
            "synchronous_commit",
            commit,
            "on or remote_apply: a commit waits until the standbys have flushed it",
            matches!(commit, "on" | "remote_apply"),
        )
    } else {
        Check::new(
            "synchronous_commit",
            commit,
            "on: a commit waits for its WAL flush",
            matches!(commit, "on" | "local" | "remote_write" | "remote_apply"),
        )
    };
    let names = get("synchronous_standby_names");
    let parsed = SyncStandbys::parse(names);
    let (needs, ok) = match durability {
        Durability::C0 => ("'': C0 has no standbys", names.is_empty()),
        Durability::C2 => ("'': C2's standby is asynchronous", names.is_empty()),
        Durability::C1 => (
            "FIRST 1 (s1): a commit waits for the standby",
            parsed.is_some_and(|p| p.num_sync == 1),
        ),
        Durability::C3 => (
            "FIRST 2 (s1, s2): a commit waits for both standbys",
            parsed.is_some_and(|p| p.num_sync == 2 && p.candidates() >= 2),
        ),
        Durability::C4 => (
            "ANY 1 (s1, s2): a commit waits for either standby",
            parsed.is_some_and(|p| p.any && p.num_sync == 1 && p.candidates() >= 2),
        ),
    };
    vec![
        Check::new("fsync", fsync, "on", fsync == "on"),
        commit_check,
        Check::new("synchronous_standby_names", format!("'{names}'"), needs, ok),
    ]
}

/// One row of the primary's `pg_stat_replication`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standby {
    pub name: String,
    pub state: String,
    pub sync_state: String,
}

/// The primary's `pg_stat_replication` against `durability`.
pub fn standbys_check(standbys: &[Standby], durability: Durability) -> Check {
    let streaming = |s: &Standby| s.state == "streaming";
    let all = |states: &[&str]| {
        standbys.len() == durability.replicas()
            && standbys
                .iter()
                .all(|s| streaming(s) && states.contains(&s.sync_state.as_str()))
    };
    let (needs, ok) = match durability {
        Durability::C0 => (
            "none: C0 is one node (stop the standbys)",
            standbys.is_empty(),
        ),
        Durability::C1 => (
            "1 standby streaming, sync: each commit waits for it",
            all(&["sync", "quorum"]),
        ),
        Durability::C2 => ("1 standby streaming, async", all(&["async"])),
        Durability::C3 => (
            "2 standbys streaming, both sync: each commit waits for both",
            all(&["sync"]) || all(&["quorum"]),
        ),
        Durability::C4 => (
            "2 standbys streaming, both quorum: each commit waits for either",
            all(&["quorum"]),
        ),
    };
    let reported = if standbys.is_empty() {
        "none".to_owned()
    } else {
        let list: Vec<String> = standbys
            .iter()
            .map(|s| format!("{} {} {}", s.name, s.state, s.sync_state))
            .collect();
        format!("{}: {}", standbys.len(), list.join(", "))
    };
    Check::new("pg_stat_replication", reported, needs, ok)
}

fn query_error(identity: &Identity, e: &tokio_postgres::Error) -> TargetError {
    identity.query_error(match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    })
}

/// `host:port` of a connection, as the client sees it.
fn address(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    format!(
        "{host}:{}",
        config.get_ports().first().copied().unwrap_or(5432)
    )
}

/// What the primary reports about itself and its standbys.
struct Primary {
    in_recovery: bool,
    port: String,
    standbys: Vec<Standby>,
}

async fn read_primary(
    client: &Client,
    identity: &Identity,
    config: &Config,
) -> Result<Primary, TargetError> {
    let error = |e: tokio_postgres::Error| query_error(identity, &e);
    let row = client
        .query_one("SELECT pg_is_in_recovery(), inet_server_port()::text", &[])
        .await
        .map_err(error)?;
    let port: Option<String> = row.get(1);
    let rows = client
        .query(
            "SELECT application_name,
                    coalesce(state, '(not visible: needs pg_read_all_stats)'),
                    coalesce(sync_state, '(not visible)')
               FROM pg_stat_replication ORDER BY application_name",
            &[],
        )
        .await
        .map_err(error)?;
    Ok(Primary {
        in_recovery: row.get(0),
        port: port.unwrap_or_else(|| {
            config
                .get_ports()
                .first()
                .copied()
                .unwrap_or(5432)
                .to_string()
        }),
        standbys: rows
            .iter()
            .map(|r| Standby {
                name: r.get(0),
                state: r.get(1),
                sync_state: r.get(2),
            })
            .collect(),
    })
}

/// Reads the primary's `pg_stat_replication` (on a connection of its own) and each standby's
/// own status.
pub async fn verify(
    link: &Link,
    identity: &Identity,
    replicas: &[TargetSpec],
    durability: Durability,
    reach: &Reach,
) -> Result<ClusterEvidence, TargetError> {
    let config = &link.config;
    let client = connect(link, identity).await?;
    let facts = read_primary(&client, identity, config).await?;
    let mut checks = vec![
        Check::new(
            "pg_is_in_recovery",
            facts.in_recovery.to_string(),
            "false: --target is the primary",
            !facts.in_recovery,
        ),
        standbys_check(&facts.standbys, durability),
    ];
    let mut nodes = vec![format!("primary {}", address(config))];
    nodes.extend(
        facts
            .standbys
            .iter()
            .map(|s| format!("{} {} {}", s.name, s.state, s.sync_state)),
    );
    checks.extend(replicas_given(
        "standbys",
        "for its own fsync and what it streams from",
        replicas,
        durability,
    ));
    for replica in replicas {
        checks.extend(standby_checks(replica, &facts, reach).await);
    }
    Ok(ClusterEvidence {
        checks,
        nodes,
        ..ClusterEvidence::default()
    })
}

/// A standby's own view: in recovery, streaming from this primary under a name the primary
/// lists as streaming, and fsync on.
async fn standby_checks(replica: &TargetSpec, primary: &Primary, reach: &Reach) -> Vec<Check> {
    let needs = format!(
        "in recovery, streaming from this primary (port {}) and listed by it as streaming",
        primary.port
    );
    let (link, address) = match Link::of(replica, reach, &[]) {
        Ok(link) => {
            let address = address(&link.config);
            (link, address)
        }
        Err(e) => {
            return vec![Check::new(
                format!("standby {}", replica.url_redacted()),
                e.to_string(),
                needs,
                false,
            )];
        }
    };
    let what = format!("standby {address}");
    let identity = Identity {
        name: what.clone(),
        kind: "postgres".into(),
        url_redacted: replica.url_redacted(),
    };
    let client = match connect(&link, &identity).await {
        Ok(client) => client,
        Err(e) => return vec![Check::new(what, format!("unreachable: {e}"), needs, false)],
    };
    let row = match client
        .query_one(
            "SELECT pg_is_in_recovery(), current_setting('fsync'), current_setting('cluster_name'),
                    (SELECT status FROM pg_stat_wal_receiver),
                    (SELECT sender_port::text FROM pg_stat_wal_receiver),
                    (SELECT conninfo FROM pg_stat_wal_receiver)",
            &[],
        )
        .await
    {
        Ok(row) => row,
        Err(e) => {
            return vec![Check::new(
                what,
                query_error(&identity, &e).to_string(),
                needs,
                false,
            )];
        }
    };
    let in_recovery: bool = row.get(0);
    let fsync: String = row.get(1);
    let cluster_name: String = row.get(2);
    let status: Option<String> = row.get(3);
    let sender_port: Option<String> = row.get(4);
    let conninfo: Option<String> = row.get(5);
    let name = standby_name(conninfo.as_deref(), &cluster_name);
    let listed = primary
        .standbys
        .iter()
        .any(|s| s.name == name && s.state == "streaming");
    let status = status.unwrap_or_else(|| "no WAL receiver".into());
    let sender_port = sender_port.unwrap_or_else(|| "?".into());
    let reported = format!(
        "{name}: {}, {status} from port {sender_port}{}",
        if in_recovery {
            "in recovery"
        } else {
            "NOT in recovery"
        },
        if listed {
            ""
        } else {
            ", not listed as streaming by the primary"
        }
    );
    let ok = in_recovery && status == "streaming" && sender_port == primary.port && listed;
    vec![
        Check::new(what.clone(), reported, needs, ok),
        Check::new(format!("{what} fsync"), fsync.clone(), "on", fsync == "on"),
    ]
}

/// The name a standby streams under: `application_name` in its `primary_conninfo`, else its
/// `cluster_name`, else PostgreSQL's default.
fn standby_name(conninfo: Option<&str>, cluster_name: &str) -> String {
    let from_conninfo = conninfo.and_then(|info| {
        info.split_whitespace()
            .find_map(|pair| pair.strip_prefix("application_name="))
            .map(|v| v.trim_matches('\'').to_owned())
    });
    from_conninfo
        .or_else(|| (!cluster_name.is_empty()).then(|| cluster_name.to_owned()))
        .unwrap_or_else(|| "walreceiver".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn synchronous_standby_names_parse_in_every_form() {
        let first = SyncStandbys::parse("FIRST 2 (s1, s2)").unwrap();
        assert_eq!(
            (first.any, first.num_sync, first.names.len()),
            (false, 2, 2)
        );
        let any = SyncStandbys::parse("any 1 (\"s1\",s2)").unwrap();
        assert_eq!((any.any, any.num_sync), (true, 1));
        assert_eq!(any.names, ["s1", "s2"]);
        let bare = SyncStandbys::parse("2 (a, b, c)").unwrap();
        assert_eq!((bare.any, bare.num_sync, bare.names.len()), (false, 2, 3));
        let list = SyncStandbys::parse("s1, s2").unwrap();
        assert_eq!((list.num_sync, list.names.len()), (1, 2));
        assert!(SyncStandbys::parse("").is_none());
        assert!(SyncStandbys::parse("ANY x (a)").is_none());
    }

    #[test]
    fn each_configuration_needs_its_own_standby_names_and_commit_level() {
        let base = [("fsync", "on"), ("synchronous_commit", "on")];
        let with = |names: &str| {
            let mut s = settings(&base);
            s.insert("synchronous_standby_names".into(), names.into());
            s
        };
        let ok = |names: &str, d: Durability| settings_checks(&with(names), d).iter().all(|c| c.ok);
        assert!(ok("", Durability::C0) && ok("", Durability::C2));
        assert!(ok("FIRST 1 (s1)", Durability::C1) && ok("s1", Durability::C1));
        assert!(ok("FIRST 2 (s1, s2)", Durability::C3) && ok("ANY 2 (s1, s2)", Durability::C3));
        assert!(ok("ANY 1 (s1, s2)", Durability::C4) && ok("ANY 1 (*)", Durability::C4));
        assert!(
            !ok("FIRST 1 (s1, s2)", Durability::C4),
            "C4 is a quorum, not a priority"
        );
        assert!(!ok("FIRST 1 (s1)", Durability::C3));
        assert!(!ok("", Durability::C1));
        assert!(!ok("FIRST 1 (s1)", Durability::C0));
        let mut remote_write = with("FIRST 1 (s1)");
        remote_write.insert("synchronous_commit".into(), "remote_write".into());
        let refused =
            crate::durability::mismatches(&settings_checks(&remote_write, Durability::C1));
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].starts_with("synchronous_commit=remote_write (needs on or remote_apply"),
            "{refused:?}"
        );
        let mut off = with("");
        off.insert("synchronous_commit".into(), "off".into());
        let refused = crate::durability::mismatches(&settings_checks(&off, Durability::C0));
        assert_eq!(
            refused,
            ["synchronous_commit=off (needs on: a commit waits for its WAL flush)"]
        );
    }

    #[test]
    fn the_standbys_must_stream_in_the_state_the_configuration_needs() {
        let standby = |name: &str, state: &str, sync: &str| Standby {
            name: name.into(),
            state: state.into(),
            sync_state: sync.into(),
        };
        let sync2 = [
            standby("s1", "streaming", "sync"),
            standby("s2", "streaming", "sync"),
        ];
        assert!(standbys_check(&sync2, Durability::C3).ok);
        assert!(!standbys_check(&sync2, Durability::C4).ok);
        assert!(
            !standbys_check(&sync2[..1], Durability::C3).ok,
            "one standby stopped"
        );
        assert!(standbys_check(&sync2[..1], Durability::C1).ok);
        assert!(!standbys_check(&sync2[..1], Durability::C2).ok);
        assert!(standbys_check(&[], Durability::C0).ok);
        let catching_up = [standby("s1", "catchup", "sync")];
        assert!(!standbys_check(&catching_up, Durability::C1).ok);
        let check = standbys_check(&sync2[..1], Durability::C3);
        assert_eq!(
            check.mismatch(),
            "pg_stat_replication=1: s1 streaming sync (needs 2 standbys streaming, both sync: each commit waits for both)"
        );
    }

    #[test]
    fn a_standby_is_known_by_its_application_name() {
        let info = "user=fairbench passfile=/x host=127.0.0.1 port=5432 application_name=s1 sslmode=prefer";
        assert_eq!(standby_name(Some(info), ""), "s1");
        assert_eq!(standby_name(Some("host=h"), "node2"), "node2");
        assert_eq!(standby_name(None, ""), "walreceiver");
    }
}
