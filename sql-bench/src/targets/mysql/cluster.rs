//! MariaDB's (and MySQL's) replication evidence for C0–C4, beside the engine it reads: the
//! primary's redo-log and binlog durability, its semi-sync status *and* the number of semi-sync
//! replicas it serves (the master-side flag alone can lie: it stays ON with no replica to
//! acknowledge), the replicas connected, and each replica's own view
//! (`Slave_IO_Running`/`Slave_SQL_Running`, its durability settings).

use std::collections::BTreeMap;

use common::options::TargetSpec;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row};

use super::{connect, parse_opts};
use crate::durability::{Check, Durability};
use crate::replication::{ClusterEvidence, replicas_given};
use crate::targets::{Identity, Reach, TargetError};

/// Counters that grow when a commit is acknowledged without a replica's acknowledgement.
const FALLBACK_COUNTERS: [&str; 2] = [
    "Rpl_semi_sync_master_no_tx",
    "Rpl_semi_sync_master_no_times",
];

/// Whether a configuration waits for a replica: semi-sync on.
fn semi_sync(durability: Durability) -> bool {
    durability.replicas_acknowledging() > 0
}

/// The primary's own settings against `durability`; `describe()` refuses on these.
pub fn settings_checks(settings: &BTreeMap<String, String>, durability: Durability) -> Vec<Check> {
    let get = |name: &str| settings.get(name).map_or("", String::as_str);
    let flush = get("innodb_flush_log_at_trx_commit");
    let mut checks = vec![Check::new(
        "innodb_flush_log_at_trx_commit",
        flush,
        "1: flush the redo log at every commit",
        flush == "1",
    )];
    if get("log_bin") == "ON" {
        let sync = get("sync_binlog");
        checks.push(Check::new(
            "sync_binlog",
            sync,
            "1 with the binlog on",
            sync == "1",
        ));
    } else if durability.is_replicated() {
        checks.push(Check::new(
            "log_bin",
            get("log_bin"),
            "ON: replicas read the binlog",
            false,
        ));
    }
    let enabled = get("rpl_semi_sync_master_enabled");
    let (needs, wanted) = match durability {
        Durability::C0 => ("OFF: C0 has no replicas", "OFF"),
        Durability::C2 => ("OFF: C2's replica is asynchronous", "OFF"),
        _ => ("ON: a commit waits for a replica's acknowledgement", "ON"),
    };
    checks.push(Check::new(
        "rpl_semi_sync_master_enabled",
        enabled,
        needs,
        enabled == wanted,
    ));
    checks
}

fn address(opts: &Opts) -> String {
    format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port())
}

async fn pairs(conn: &mut Conn, sql: &str) -> Result<BTreeMap<String, String>, mysql_async::Error> {
    let rows: Vec<(String, String)> = conn.query(sql).await?;
    Ok(rows.into_iter().collect())
}

/// What the primary reports about semi-sync and the replicas it serves.
struct Primary {
    port: String,
    status: BTreeMap<String, String>,
    variables: BTreeMap<String, String>,
    replicas_connected: u64,
    hosts: Vec<String>,
}

async fn read_primary(conn: &mut Conn) -> Result<Primary, mysql_async::Error> {
    let status = pairs(
        conn,
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status',
           'Rpl_semi_sync_master_clients', 'Rpl_semi_sync_master_no_tx',
           'Rpl_semi_sync_master_no_times', 'Rpl_semi_sync_master_yes_tx')",
    )
    .await?;
    let variables = pairs(
        conn,
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('port', 'rpl_semi_sync_master_timeout',
           'rpl_semi_sync_master_wait_point', 'rpl_semi_sync_master_wait_no_slave')",
    )
    .await?;
    let replicas_connected: Option<u64> = conn
        .query_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'",
        )
        .await?;
    let hosts: Vec<Row> = conn.query("SHOW SLAVE HOSTS").await?;
    let hosts = hosts
        .iter()
        .map(|r| {
            let text = |column: &str| {
                r.get::<Option<String>, _>(column)
                    .flatten()
                    .unwrap_or_default()
            };
            format!(
                "server {} at {}:{}",
                text("Server_id"),
                text("Host"),
                text("Port")
            )
        })
        .collect();
    Ok(Primary {
        port: variables.get("port").cloned().unwrap_or_default(),
        status,
        variables,
        replicas_connected: replicas_connected.unwrap_or(0),
        hosts,
    })
}

/// The primary's semi-sync status and connected replicas against `durability`.
fn primary_checks(primary: &Primary, durability: Durability) -> Vec<Check> {
    let status = |name: &str| {
        primary
            .status
            .get(name)
            .map_or("(not reported)", String::as_str)
    };
    let wanted = durability.replicas();
    let mut checks = vec![Check::new(
        "replicas connected (Binlog Dump threads)",
        primary.replicas_connected.to_string(),
        match wanted {
            0 => "0: C0 is one node (stop replication on the replicas)".to_owned(),
            n => format!("{n}: {}", durability.summary()),
        },
        primary.replicas_connected == wanted as u64,
    )];
    let on = status("Rpl_semi_sync_master_status");
    if semi_sync(durability) {
        checks.push(Check::new(
            "Rpl_semi_sync_master_status",
            on,
            "ON: commits wait for a replica",
            on == "ON",
        ));
        let clients = status("Rpl_semi_sync_master_clients");
        checks.push(Check::new(
            "Rpl_semi_sync_master_clients",
            clients,
            format!(
                "{wanted}: every replica acknowledges semi-sync (the master's flag alone can lie)"
            ),
            clients == wanted.to_string(),
        ));
    } else {
        checks.push(Check::new(
            "Rpl_semi_sync_master_status",
            on,
            "OFF: no commit waits for a replica",
            on == "OFF",
        ));
    }
    checks
}

/// Reads the primary's semi-sync status (on a connection of its own) and each replica's own.
pub async fn verify(
    opts: &Opts,
    identity: &Identity,
    replicas: &[TargetSpec],
    durability: Durability,
    reach: &Reach,
) -> Result<ClusterEvidence, TargetError> {
    let mut conn = connect(opts, identity).await?;
    let facts = read_primary(&mut conn)
        .await
        .map_err(|e| identity.query_error(e))?;
    let mut checks = primary_checks(&facts, durability);
    checks.extend(replicas_given(
        "replicas",
        "whether it replicates and how durably",
        replicas,
        durability,
    ));
    for replica in replicas {
        checks.extend(replica_checks(replica, &facts.port, durability, reach).await);
    }
    let mut nodes = vec![format!("primary {}", address(opts))];
    nodes.extend(facts.hosts.iter().map(|h| format!("replica {h}")));
    for (name, value) in &facts.variables {
        if name != "port" {
            nodes.push(format!("{name}={value}"));
        }
    }
    let steady_counters = if semi_sync(durability) {
        FALLBACK_COUNTERS
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), facts.status.get(*name)?.parse().ok()?)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let approximation = (durability == Durability::C3).then(|| {
        "* MariaDB's semi-sync acknowledges after the first replica responds and has no setting to wait for every replica: C3 (all 3 nodes) is not expressible, so this is semi-sync over two replicas (≈ 2 of 3), as in C4".to_owned()
    });
    Ok(ClusterEvidence {
        checks,
        nodes,
        steady_counters,
        label: approximation
            .as_ref()
            .map(|_| "* semi-sync, ≈ 2 of 3".to_owned()),
        approximation,
    })
}

/// A replica's own view: both replication threads running from this primary, the redo log and
/// binlog flushed at every commit, and for semi-sync its relay log synced at every event (the
/// acknowledgement is sent once the event is in the relay log).
async fn replica_checks(
    replica: &TargetSpec,
    primary_port: &str,
    durability: Durability,
    reach: &Reach,
) -> Vec<Check> {
    let needs = format!(
        "Slave_IO_Running=Yes and Slave_SQL_Running=Yes from this primary (port {primary_port})"
    );
    let opts = match parse_opts(replica, reach) {
        Ok(opts) => opts,
        Err(e) => {
            return vec![Check::new(
                format!("replica {}", replica.url_redacted()),
                e.to_string(),
                needs,
                false,
            )];
        }
    };
    let what = format!("replica {}", address(&opts));
    let identity = Identity {
        name: what.clone(),
        kind: "mariadb".into(),
        url_redacted: replica.url_redacted(),
    };
    let mut conn = match connect(&opts, &identity).await {
        Ok(conn) => conn,
        Err(e) => return vec![Check::new(what, format!("unreachable: {e}"), needs, false)],
    };
    match read_replica(&mut conn).await {
        Ok((status, variables)) => {
            let mut checks = vec![replication_check(
                &what,
                status.as_ref(),
                primary_port,
                needs,
            )];
            checks.extend(replica_durability(&what, &variables, durability));
            checks
        }
        Err(e) => vec![Check::new(what, e.to_string(), needs, false)],
    }
}

async fn read_replica(
    conn: &mut Conn,
) -> Result<(Option<Row>, BTreeMap<String, String>), mysql_async::Error> {
    let status: Option<Row> = conn.query_first("SHOW SLAVE STATUS").await?;
    let mut variables = pairs(
        conn,
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit',
           'log_bin', 'sync_binlog', 'sync_relay_log')",
    )
    .await?;
    variables.extend(pairs(conn, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_slave_status'").await?);
    Ok((status, variables))
}

fn replication_check(what: &str, status: Option<&Row>, primary_port: &str, needs: String) -> Check {
    let Some(row) = status else {
        return Check::new(
            what,
            "not a replica (SHOW SLAVE STATUS is empty)",
            needs,
            false,
        );
    };
    let text = |column: &str| {
        row.get::<Option<String>, _>(column)
            .flatten()
            .unwrap_or_default()
    };
    let (io, sql, port) = (
        text("Slave_IO_Running"),
        text("Slave_SQL_Running"),
        text("Master_Port"),
    );
    let error = text("Last_IO_Error");
    let reported = format!(
        "Slave_IO_Running={io}, Slave_SQL_Running={sql}, from port {port}{}",
        if error.is_empty() {
            String::new()
        } else {
            format!(" ({error})")
        }
    );
    Check::new(
        what,
        reported,
        needs,
        io == "Yes" && sql == "Yes" && port == primary_port,
    )
}

fn replica_durability(
    what: &str,
    variables: &BTreeMap<String, String>,
    durability: Durability,
) -> Vec<Check> {
    let get = |name: &str| variables.get(name).map_or("(not reported)", String::as_str);
    let mut checks = vec![Check::new(
        format!("{what} innodb_flush_log_at_trx_commit"),
        get("innodb_flush_log_at_trx_commit"),
        "1",
        get("innodb_flush_log_at_trx_commit") == "1",
    )];
    if get("log_bin") == "ON" {
        checks.push(Check::new(
            format!("{what} sync_binlog"),
            get("sync_binlog"),
            "1 with the binlog on",
            get("sync_binlog") == "1",
        ));
    }
    if semi_sync(durability) {
        checks.push(Check::new(
            format!("{what} Rpl_semi_sync_slave_status"),
            get("Rpl_semi_sync_slave_status"),
            "ON: it acknowledges the primary's commits",
            get("Rpl_semi_sync_slave_status") == "ON",
        ));
        checks.push(Check::new(
            format!("{what} sync_relay_log"),
            get("sync_relay_log"),
            "1: its acknowledgement follows the relay-log write, which reaches the disk at every event only with 1",
            get("sync_relay_log") == "1",
        ));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn primary(status: &[(&str, &str)], connected: u64) -> Primary {
        Primary {
            port: "3306".into(),
            status: map(status),
            variables: BTreeMap::new(),
            replicas_connected: connected,
            hosts: Vec::new(),
        }
    }

    #[test]
    fn semi_sync_enabled_with_no_semi_sync_replica_is_refused() {
        let lying = primary(
            &[
                ("Rpl_semi_sync_master_status", "ON"),
                ("Rpl_semi_sync_master_clients", "0"),
            ],
            1,
        );
        let refused = crate::durability::mismatches(&primary_checks(&lying, Durability::C1));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with("Rpl_semi_sync_master_clients=0 (needs 1"),
            "{refused:?}"
        );
        let honest = primary(
            &[
                ("Rpl_semi_sync_master_status", "ON"),
                ("Rpl_semi_sync_master_clients", "2"),
            ],
            2,
        );
        assert!(primary_checks(&honest, Durability::C4).iter().all(|c| c.ok));
        assert!(primary_checks(&honest, Durability::C3).iter().all(|c| c.ok));
        assert!(!primary_checks(&honest, Durability::C1).iter().all(|c| c.ok));
    }

    #[test]
    fn asynchronous_configurations_need_semi_sync_off_and_the_right_replica_count() {
        let off = |n| primary(&[("Rpl_semi_sync_master_status", "OFF")], n);
        assert!(primary_checks(&off(0), Durability::C0).iter().all(|c| c.ok));
        assert!(primary_checks(&off(1), Durability::C2).iter().all(|c| c.ok));
        assert!(!primary_checks(&off(1), Durability::C0).iter().all(|c| c.ok));
    }

    #[test]
    fn settings_keep_the_c0_messages_and_add_semi_sync_for_replicated_configurations() {
        let base = map(&[
            ("innodb_flush_log_at_trx_commit", "2"),
            ("log_bin", "ON"),
            ("sync_binlog", "1"),
            ("rpl_semi_sync_master_enabled", "OFF"),
        ]);
        let c0 = crate::durability::mismatches(&settings_checks(&base, Durability::C0));
        assert_eq!(
            c0,
            ["innodb_flush_log_at_trx_commit=2 (needs 1: flush the redo log at every commit)"]
        );
        let c4 = crate::durability::mismatches(&settings_checks(&base, Durability::C4));
        assert_eq!(c4.len(), 2);
        assert!(
            c4[1].starts_with("rpl_semi_sync_master_enabled=OFF (needs ON"),
            "{c4:?}"
        );
    }

    #[test]
    fn a_semi_sync_replica_must_sync_its_relay_log() {
        let loose = map(&[
            ("innodb_flush_log_at_trx_commit", "1"),
            ("log_bin", "OFF"),
            ("sync_relay_log", "10000"),
            ("Rpl_semi_sync_slave_status", "ON"),
        ]);
        let refused = crate::durability::mismatches(&replica_durability(
            "replica r1",
            &loose,
            Durability::C1,
        ));
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].starts_with("replica r1 sync_relay_log=10000 (needs 1"),
            "{refused:?}"
        );
        assert!(
            replica_durability("replica r1", &loose, Durability::C2)
                .iter()
                .all(|c| c.ok)
        );
    }
}
