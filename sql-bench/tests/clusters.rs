//! `sql-bench crud --config C0…C4` against real replicated clusters on loopback, which each test
//! builds with scripts/cluster on ports of its own and switches between configurations. Every
//! configuration must be read back from the servers; every lie (a standby stopped, commits not
//! waiting, semi-sync enabled with no replica to acknowledge) must be refused.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::results::{Report, Status};
use serde_json::Value;
use support::*;

/// A primary and two replicas started by scripts/cluster; stopped (by PID) when dropped.
struct Cluster {
    system: &'static str,
    dir: tempfile::TempDir,
    url: String,
    replicas: [String; 2],
}

impl Cluster {
    /// Builds the cluster, or `None` (a skip) when the server is not installed outside CI.
    fn up(system: &'static str, binary: &str, port_variable: &str, port: &str) -> Option<Cluster> {
        if !Path::new(binary).exists() {
            assert!(
                !servers_required(),
                "{binary} is not installed: run scripts/test"
            );
            eprintln!("skipped: {binary} is not installed");
            return None;
        }
        let mut cluster = Cluster {
            system,
            dir: tempfile::tempdir().unwrap(),
            url: String::new(),
            replicas: [String::new(), String::new()],
        };
        let out = cluster.script(&["up", cluster.path()], &[(port_variable, port)]);
        let prefix = format!("export FAIRBENCH_CLUSTER_{}_", system.to_uppercase());
        let value = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{prefix}{name}=")))
                .unwrap_or_else(|| panic!("scripts/cluster printed no {name}: {out}"))
                .to_owned()
        };
        cluster.url = value("URL");
        cluster.replicas = [value("REPLICA1"), value("REPLICA2")];
        Some(cluster)
    }

    fn path(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    fn script(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = Command::new(scripts_dir().join("cluster"))
            .arg(self.system)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/cluster {} {args:?}: {}",
            self.system,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn config(&self, config: &str) {
        self.script(&["config", config, self.path()], &[]);
    }

    /// `--replica NAME=HOST:PORT,…` with the first `n` replicas.
    fn replica_flag(&self, name: &str, n: usize) -> String {
        format!("{name}={}", self.replicas[..n].join(","))
    }

    fn replica_url(&self, n: usize) -> String {
        let (base, _) = self.url.split_once("@127.0.0.1:").unwrap();
        let database = self.url.rsplit_once('/').unwrap().1;
        format!("{base}@{}/{database}", self.replicas[n])
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(scripts_dir().join("cluster"))
            .args([self.system, "down", self.path()])
            .status();
    }
}

/// `crud --config CONFIG --target NAME=URL [--replica …]` with short windows.
fn crud(
    out: &Path,
    config: &str,
    target: &str,
    replica: Option<&str>,
    extra: &[&str],
) -> anyhow::Result<sql_bench::Summary> {
    let mut all = vec![
        "--config",
        config,
        "--target",
        target,
        "--duration",
        "200ms",
    ];
    if let Some(replica) = replica {
        all.extend(["--replica", replica]);
    }
    all.extend_from_slice(extra);
    run(&args("crud", out, &all))
}

/// The first system's evidence as stored in results.json.
fn evidence(dir: &Path) -> Value {
    read_json(dir)["extra"]["durability"]["systems"][0].clone()
}

fn checks(evidence: &Value) -> Vec<(String, String, bool)> {
    evidence["evidence"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["what"].as_str().unwrap().to_owned(),
                c["reported"].as_str().unwrap().to_owned(),
                c["ok"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn reported(evidence: &Value, what: &str) -> String {
    checks(evidence)
        .into_iter()
        .find(|(w, _, _)| w == what)
        .unwrap_or_else(|| panic!("no check {what} in {evidence:#}"))
        .1
}

/// Every cell ok, the section names the configuration, every check passed and was stored.
fn assert_measured_and_verified(report: &Report, dir: &Path, config: &str) -> Value {
    assert!(report.section.starts_with(config), "{}", report.section);
    for cell in &report.cells {
        assert_eq!(cell.status, Status::Ok, "{config}: {cell:?}");
    }
    let evidence = evidence(dir);
    assert_eq!(evidence["matched"], true, "{config}: {evidence:#}");
    assert!(
        checks(&evidence).iter().all(|(_, _, ok)| *ok),
        "{config}: {evidence:#}"
    );
    assert!(
        evidence["changed_during_run"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        markdown.contains(&format!("**Durability {config} (")),
        "{markdown}"
    );
    evidence
}

/// Switches the cluster to `config`, measures it as NAME with its first `n` replicas, and checks
/// that it was measured and verified; returns the run and its stored evidence.
fn measure(
    cluster: &Cluster,
    name: &str,
    config: &str,
    n: usize,
    dir: &Path,
) -> (sql_bench::Summary, Value) {
    cluster.config(config);
    let target = format!("{name}={}", cluster.url);
    let replica = (n > 0).then(|| cluster.replica_flag(name, n));
    let summary = crud(dir, config, &target, replica.as_deref(), &[]).unwrap();
    assert_eq!(
        summary.exit,
        Exit::AllOk,
        "{config}: {:#?}",
        summary.report.cells
    );
    assert_matches_schema(dir);
    let evidence = assert_measured_and_verified(&summary.report, dir, config);
    (summary, evidence)
}

fn refusal(result: anyhow::Result<sql_bench::Summary>, out: &Path) -> String {
    let error = format!("{:#}", result.expect_err("the run is refused"));
    assert!(error.contains("no system can be measured"), "{error}");
    assert!(!out.exists(), "a refused run leaves no results folder");
    error
}

/// Polls (bounded) until `probe` returns `want`.
fn wait_for(what: &str, want: &str, probe: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = probe();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {got}, expected {want}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scratch() -> (tempfile::TempDir, impl Fn(&str) -> PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    (dir, move |name: &str| base.join(name))
}

#[test]
fn postgres_c0_to_c4_are_read_from_the_servers_and_lies_are_refused() {
    let Some(cluster) = Cluster::up(
        "postgres",
        "/usr/lib/postgresql/15/bin/initdb",
        "FAIRBENCH_CLUSTER_PG_PORT",
        // Below the ephemeral range (32768–60999), so no client socket holds a node's port.
        "27500",
    ) else {
        return;
    };
    let (_scratch, out) = scratch();
    let target = format!("pg={}", cluster.url);
    let standbys = [
        ("C0", 0, "none"),
        ("C1", 1, "1: s1 streaming sync"),
        ("C2", 1, "1: s1 streaming async"),
        ("C3", 2, "2: s1 streaming sync, s2 streaming sync"),
        ("C4", 2, "2: s1 streaming quorum, s2 streaming quorum"),
    ];
    for (config, n, streaming) in standbys {
        let (summary, evidence) = measure(&cluster, "pg", config, n, &out(config));
        assert_eq!(
            reported(&evidence, "pg_stat_replication"),
            streaming,
            "{config}"
        );
        assert_eq!(
            summary.report.systems[0].verified["pg_stat_replication"],
            streaming
        );
        for replica in &cluster.replicas[..n] {
            assert_eq!(
                reported(&evidence, &format!("standby {replica} fsync")),
                "on"
            );
        }
    }

    // C4 again, with the point reads sent to the standbys.
    let dir = out("C4-replica-reads");
    let replicas = cluster.replica_flag("pg", 2);
    let summary = crud(
        &dir,
        "C4",
        &target,
        Some(&replicas),
        &["--read-from", "replicas"],
    )
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert!(
        summary
            .report
            .section
            .ends_with("point reads from the replicas"),
        "{}",
        summary.report.section
    );
    assert_eq!(read_json(&dir)["options"]["read_from"], "replicas");

    // C3 claimed with one standby stopped: the primary streams to one, the other is unreachable.
    cluster.config("C3");
    cluster.script(&["stop-replica", "2", cluster.path()], &[]);
    let dir = out("C3-one-stopped");
    let error = refusal(crud(&dir, "C3", &target, Some(&replicas), &[]), &dir);
    assert!(
        error.contains("pg_stat_replication=1: s1 streaming sync (needs 2 standbys streaming"),
        "{error}"
    );
    assert!(
        error.contains(&format!("standby {}=unreachable", cluster.replicas[1])),
        "{error}"
    );

    // C1 claimed with synchronous_commit=off on the primary: commits wait for nobody.
    cluster.config("C1");
    psql(&cluster.url, "ALTER SYSTEM SET synchronous_commit = off");
    psql(&cluster.url, "SELECT pg_reload_conf()");
    wait_for("synchronous_commit", "off", || {
        psql(&cluster.url, "SHOW synchronous_commit")
    });
    let one = cluster.replica_flag("pg", 1);
    let dir = out("C1-async-commit");
    let error = refusal(crud(&dir, "C1", &target, Some(&one), &[]), &dir);
    assert!(
        error.contains("synchronous_commit=off (needs on or remote_apply"),
        "{error}"
    );
    // The override still measures it, and labels every cell.
    let dir = out("C1-override");
    let labelled = crud(
        &dir,
        "C1",
        &target,
        Some(&one),
        &["--allow-unmatched-durability", "--workloads", "write-1c"],
    )
    .unwrap();
    psql(&cluster.url, "ALTER SYSTEM RESET synchronous_commit");
    psql(&cluster.url, "SELECT pg_reload_conf()");
    let cell = &labelled.report.cells[0];
    assert_eq!(cell.status, Status::Ok, "{cell:?}");
    // The label names what does not match, so two engines unmatched differently never share a ratio.
    assert!(
        cell.labels.len() == 1 && cell.labels[0].starts_with("unmatched durability ("),
        "{:?}",
        cell.labels
    );
    let evidence = evidence(&dir);
    assert_eq!(
        (
            evidence["matched"].as_bool(),
            evidence["measured_unmatched"].as_bool()
        ),
        (Some(false), Some(true))
    );
}

#[test]
fn mariadb_c0_to_c4_are_read_from_the_servers_and_a_lying_semi_sync_flag_is_refused() {
    let Some(cluster) = Cluster::up(
        "mariadb",
        "/usr/sbin/mariadbd",
        "FAIRBENCH_CLUSTER_MARIADB_PORT",
        "24500",
    ) else {
        return;
    };
    let (_scratch, out) = scratch();
    let target = format!("maria={}", cluster.url);
    // C4 with the point reads sent to the replicas.
    cluster.config("C4");
    let dir = out("C4-replica-reads");
    let replicas = cluster.replica_flag("maria", 2);
    let summary = crud(
        &dir,
        "C4",
        &target,
        Some(&replicas),
        &["--read-from", "replicas"],
    )
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert!(
        summary
            .report
            .section
            .ends_with("point reads from the replicas")
    );

    // Replicas only ever leave: one stopped for a while would first replay what it missed.
    for (config, n) in [("C4", 2), ("C3", 2), ("C1", 1), ("C2", 1), ("C0", 0)] {
        let (summary, evidence) = measure(&cluster, "maria", config, n, &out(config));
        let connected = reported(&evidence, "replicas connected (Binlog Dump threads)");
        assert_eq!(connected, n.to_string(), "{config}");
        let semi_sync = matches!(config, "C1" | "C3" | "C4");
        let status = reported(&evidence, "Rpl_semi_sync_master_status");
        assert_eq!(status, if semi_sync { "ON" } else { "OFF" }, "{config}");
        if semi_sync {
            assert_eq!(
                reported(&evidence, "Rpl_semi_sync_master_clients"),
                n.to_string()
            );
        }
        for replica in &cluster.replicas[..n] {
            let state = reported(&evidence, &format!("replica {replica}"));
            assert!(
                state.starts_with("Slave_IO_Running=Yes, Slave_SQL_Running=Yes"),
                "{state}"
            );
        }
        // Seed 000's `*`: C3 is not expressible with semi-sync, and every cell says so.
        let starred = summary
            .report
            .cells
            .iter()
            .all(|c| c.labels.iter().any(|l| l.starts_with('*')));
        assert_eq!(
            starred,
            config == "C3",
            "{config}: {:?}",
            summary.report.cells[0].labels
        );
    }

    // Semi-sync enabled on the primary but no replica acknowledging: the flag says ON.
    cluster.config("C1");
    let r1 = cluster.replica_url(0);
    mariadb(
        &r1,
        "STOP SLAVE; SET GLOBAL rpl_semi_sync_slave_enabled = OFF; START SLAVE",
    );
    let status = |name: &str| {
        mariadb(&cluster.url, &format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    wait_for("Rpl_semi_sync_master_clients", "0", || {
        status("Rpl_semi_sync_master_clients")
    });
    assert_eq!(status("Rpl_semi_sync_master_status"), "ON", "the flag lies");
    let one = cluster.replica_flag("maria", 1);
    let dir = out("C1-lying-flag");
    let error = refusal(crud(&dir, "C1", &target, Some(&one), &[]), &dir);
    assert!(
        error.contains("Rpl_semi_sync_master_clients=0 (needs 1"),
        "{error}"
    );
    assert!(error.contains("Rpl_semi_sync_slave_status=OFF"), "{error}");
}

#[test]
fn a_cluster_that_leaves_its_configuration_mid_run_gets_invalid_cells() {
    let Some(cluster) = Cluster::up(
        "mariadb",
        "/usr/sbin/mariadbd",
        "FAIRBENCH_CLUSTER_MARIADB_PORT",
        "24600",
    ) else {
        return;
    };
    cluster.config("C1");
    // A short semi-sync timeout, so commits fall back to asynchronous quickly once r1 is gone.
    mariadb(
        &cluster.url,
        "SET GLOBAL rpl_semi_sync_master_timeout = 100",
    );
    let (_scratch, out) = scratch();
    let dir = out("run");
    let r1 = cluster.replica_url(0);
    let watcher = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                let measured = std::fs::read_to_string(dir.join("results.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .is_some_and(|r| {
                        r["cells"][0]["throughput"]["rounds"]
                            .as_array()
                            .is_some_and(|r| !r.is_empty())
                    });
                if measured {
                    mariadb(&r1, "STOP SLAVE");
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        })
    };
    let target = format!("maria={}", cluster.url);
    let one = cluster.replica_flag("maria", 1);
    let summary = crud(
        &dir,
        "C1",
        &target,
        Some(&one),
        &["--workloads", "write-1c,write-2c", "--rounds", "3"],
    )
    .unwrap();
    assert!(
        watcher.join().unwrap(),
        "replication was stopped during the run"
    );
    assert_eq!(summary.exit, Exit::NotAllOk);
    for cell in &summary.report.cells {
        assert_eq!(cell.status, Status::Invalid, "{cell:?}");
        let reason = cell.reason.as_deref().unwrap();
        assert!(
            reason.contains("the cluster left C1 during the run"),
            "{reason}"
        );
        assert!(
            reason.contains("replicas connected (Binlog Dump threads)=0"),
            "{reason}"
        );
    }
    let evidence = evidence(&dir);
    assert_eq!(evidence["matched"], true, "it matched when the run began");
    assert!(
        !evidence["changed_during_run"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn sqlite_and_reads_from_replicas_without_replication_are_refused_up_front() {
    let (_scratch, out) = scratch();
    let dir = out("sqlite-c1");
    let error = refusal(run(&args("crud", &dir, &["--config", "C1"])), &dir);
    assert!(
        error.contains("SQLite has no replicated configuration: C1 needs 2 nodes"),
        "{error}"
    );
    let dir = out("c0-replica-reads");
    let error = format!(
        "{:#}",
        run(&args("crud", &dir, &["--read-from", "replicas"])).unwrap_err()
    );
    assert!(
        error.contains("--read-from replicas needs a replicated configuration"),
        "{error}"
    );
    assert!(!dir.exists());
    let dir = out("stray-replica");
    let error = format!(
        "{:#}",
        run(&args(
            "crud",
            &dir,
            &["--target", "a=sqlite", "--replica", "b=127.0.0.1:5433"]
        ))
        .unwrap_err()
    );
    assert!(error.contains("--replica b=… names no target"), "{error}");
    assert!(!dir.exists());
}
