//! The crud run's replicated configurations: reading each system's cluster before the run
//! and again after it, sending point reads to replicas, and the section title, note and
//! evidence that say which configuration was measured.

use std::time::{Duration, Instant};

use anyhow::bail;
use common::options::TargetSpec;
use common::protocol::CellBuilder;
use common::results::{Report, Status};
use common::verdict::{UNMATCHED_DURABILITY as UNMATCHED, label_kind, unmatched_durability};

use super::system::{ClusterState, System};
use crate::durability::{Check, ReadFrom};
use crate::opts::CrudOpts;
use crate::replication::{self, DurabilityEvidence, SystemEvidence};
use crate::suites::crud::data::CrudData;
use crate::targets::{self, KvTable, host_of, is_local_host};

/// How long a replica may take to replay the freshly loaded read table.
const REPLICA_CATCH_UP: Duration = Duration::from_secs(30);

/// Refuses option combinations that cannot mean anything, before anything is touched.
pub(super) fn check_options(opts: &CrudOpts) -> anyhow::Result<()> {
    if opts.read_from == ReadFrom::Replicas && !opts.config.is_replicated() {
        bail!(
            "--read-from replicas needs a replicated configuration (--config C1…C4); {:?} has no replicas",
            opts.config
        );
    }
    Ok(())
}

/// Reads every system's cluster once the systems are connected and named, and judges each on
/// all its mismatches (its settings', already judged when it was described, and its
/// cluster's); with `--read-from replicas`, points its reads at its replicas.
pub(super) async fn verify_all(
    opts: &CrudOpts,
    specs: &[TargetSpec],
    systems: &mut [System],
) -> anyhow::Result<()> {
    let names: Vec<String> = systems.iter().map(|s| s.name().to_owned()).collect();
    replication::check_replica_targets(&opts.replicas, &names).map_err(anyhow::Error::msg)?;
    for (system, spec) in systems.iter_mut().zip(specs) {
        if let Some(mismatches) = verify(opts, spec, system, names.len() == 1).await? {
            judge(opts, system, &mismatches);
        }
        if let (Some(evidence), None) = (system.cluster.evidence.as_mut(), &system.refused) {
            evidence.matched = !system
                .info
                .labels
                .iter()
                .any(|l| label_kind(l) == UNMATCHED);
            evidence.measured_unmatched = !evidence.matched;
        }
        route_reads(opts, system);
    }
    Ok(())
}

/// Refuses a system whose durability does not match, or labels it when that is allowed
/// (the same judgement as when it was described, now on every mismatch).
fn judge(opts: &CrudOpts, system: &mut System, mismatches: &[String]) {
    system.info.labels.retain(|l| label_kind(l) != UNMATCHED);
    system.refused = None;
    if mismatches.is_empty() {
        return;
    }
    if opts.allow_unmatched_durability {
        system.info.labels.push(unmatched_durability(mismatches));
    } else {
        system.refused = Some(format!(
            "durability does not match {:?}: {}; pass --allow-unmatched-durability to measure it anyway, labelled",
            opts.config,
            mismatches.join("; ")
        ));
    }
}

/// Reads a system's cluster and checks it against `--config`; returns every mismatch (its
/// settings' and its cluster's), or `None` for an engine without a cluster reader (SQLite),
/// whose judgement stands. A replica that cannot be reached is a mismatch, not an error.
async fn verify(
    opts: &CrudOpts,
    spec: &TargetSpec,
    system: &mut System,
    single_target: bool,
) -> anyhow::Result<Option<Vec<String>>> {
    let replicas =
        replication::replicas_of(system.name(), &spec.url, &opts.replicas, single_target)
            .map_err(anyhow::Error::msg)?;
    // The checks of what the system reported when it was described.
    let Some(mut checks) = system.settings_checks.clone() else {
        if let Some(reason) = &system.refused {
            let check = Check::new("settings", reason.as_str(), opts.config.summary(), false);
            system.cluster.evidence = Some(evidence(system.name(), vec![check]));
        }
        return Ok(None);
    };
    let primary = TargetSpec {
        name: Some(system.name().to_owned()),
        url: spec.url.clone(),
    };
    let mut cluster = system.target.read_cluster(&replicas, opts.config).await?;
    system.info.verified.extend(cluster.verified());
    // The evidence lists the settings first, then what the cluster reported.
    checks.append(&mut cluster.checks);
    cluster.checks = checks;
    let mismatches = cluster.mismatches();
    if let Some(label) = cluster.label.clone() {
        system.info.labels.push(label);
    }
    let mut evidence = evidence(system.name(), Vec::new());
    evidence.evidence = cluster;
    system.cluster = ClusterState {
        replicas,
        spec: Some(primary),
        evidence: Some(evidence),
    };
    Ok(Some(mismatches))
}

/// Evidence not yet judged: `checks` against the configuration.
fn evidence(system: &str, checks: Vec<Check>) -> SystemEvidence {
    SystemEvidence {
        system: system.to_owned(),
        matched: false,
        measured_unmatched: false,
        evidence: replication::ClusterEvidence {
            checks,
            ..Default::default()
        },
        changed_during_run: Vec::new(),
    }
}

/// With `--read-from replicas`, points the system's workers' reads at its replicas, or refuses
/// it when it has none (reads would silently stay on the primary).
fn route_reads(opts: &CrudOpts, system: &mut System) {
    if opts.read_from != ReadFrom::Replicas || system.refused.is_some() {
        return;
    }
    if system.cluster.replicas.is_empty() {
        system.refused = Some(format!(
            "point reads go to the replicas (--read-from replicas) but none was given for it (--replica {}=HOST:PORT)",
            system.name()
        ));
    } else if let Err(e) = system.target.route_reads(&system.cluster.replicas) {
        system.refused = Some(e.to_string());
    }
}

/// With `--read-from replicas`, waits (bounded) until every replica holds the read table as it
/// was written; a replica that does not makes the system's reads invalid.
pub(super) async fn verify_replica_reads(
    opts: &CrudOpts,
    system: &mut System,
    data: &CrudData,
    read: KvTable,
) -> anyhow::Result<()> {
    if opts.read_from != ReadFrom::Replicas || system.reads_invalid.is_some() {
        return Ok(());
    }
    // Replicas are unnamed: only their URLs' own passwords apply.
    let reach = targets::Reach {
        results_dir: ".".into(),
        insecure_skip_verify: opts.common.insecure_skip_verify,
        ..targets::Reach::default()
    };
    for spec in system.cluster.replicas.clone() {
        let mut replica = targets::open(&spec, &reach).await?;
        let deadline = Instant::now() + REPLICA_CATCH_UP;
        loop {
            let problem = match replica.read_kv(read).await {
                Ok(rows) => data.read_table_mismatch(&rows),
                Err(e) => Some(e.to_string()),
            };
            let Some(problem) = problem else { break };
            if Instant::now() >= deadline {
                system.reads_invalid = Some(format!(
                    "replica {} did not hold the read table {}s after it was loaded: {problem}",
                    spec.url_redacted(),
                    REPLICA_CATCH_UP.as_secs()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// The section title: the configuration, and where point reads went.
pub(super) fn section(opts: &CrudOpts) -> String {
    let mut title = opts.config.section().to_owned();
    if opts.config.is_replicated() {
        title.push_str(match opts.read_from {
            ReadFrom::Primary => "; point reads from the primary",
            ReadFrom::Replicas => "; point reads from the replicas",
        });
    }
    title
}

/// Where the systems ran, against the client, and where operations went.
pub(super) fn topology_note(opts: &CrudOpts, systems: &[System]) -> String {
    if !opts.config.is_replicated() {
        return "Every system is one node and the client ran on this machine, beside any local server: the client's CPU time is taken from the servers'.".to_owned();
    }
    let local = systems.iter().filter(|s| s.refused.is_none()).all(|s| {
        s.cluster
            .spec
            .as_ref()
            .is_some_and(|p| is_local_host(host_of(&p.url)))
            && s.cluster
                .replicas
                .iter()
                .all(|r| is_local_host(host_of(&r.url)))
    });
    let place = if local {
        "every node ran on this machine, as did the client: replication crosses loopback rather than a network, and the nodes share this machine's CPUs and disk with each other and with the client"
    } else {
        "the client ran on this machine"
    };
    let reads = match opts.read_from {
        ReadFrom::Primary => {
            "Every operation went to the primary; the replicas only replicated (as in seed 000)."
        }
        ReadFrom::Replicas => {
            "Point reads went to the replicas, connections spread evenly over them; writes went to the primary."
        }
    };
    format!(
        "Each system is a primary and {} replica(s) ({}); {place}. {reads}",
        opts.config.replicas(),
        opts.config.summary()
    )
}

/// Stores every system's evidence in the report (`extra["durability"]`).
pub(super) fn record_evidence(opts: &CrudOpts, systems: &[System], report: &mut Report) {
    let mut evidence = DurabilityEvidence::new(opts.config, opts.read_from);
    evidence
        .systems
        .extend(systems.iter().filter_map(|s| s.cluster.evidence.clone()));
    if evidence.systems.is_empty() {
        return;
    }
    if systems.iter().any(|s| {
        s.refused.is_none()
            && s.cluster
                .evidence
                .as_ref()
                .is_some_and(|e| e.evidence.approximation.is_some())
    }) {
        for system in systems.iter().filter_map(|s| s.cluster.evidence.as_ref()) {
            if let Some(approximation) = &system.evidence.approximation {
                let note = format!("{}: {approximation}.", system.system);
                if !report.notes.contains(&note) {
                    report.notes.push(note);
                }
            }
        }
    }
    report.extra.insert(
        replication::EXTRA_KEY.into(),
        serde_json::to_value(&evidence).expect("the evidence always serializes"),
    );
}

/// Reads every measured system's cluster again once the run is over. A configuration that no
/// longer holds (a replica gone, semi-sync fallen back, commits acknowledged without a replica)
/// makes every cell of that system invalid: its figures are not of the configuration named.
pub(super) async fn recheck(
    opts: &CrudOpts,
    systems: &mut [System],
    builders: &mut [Vec<CellBuilder>],
    report: &mut Report,
) {
    for (index, system) in systems.iter_mut().enumerate() {
        // Only a cluster that was read before the run, of a system that was measured.
        if system.cluster.spec.is_none() || system.refused.is_some() {
            continue;
        }
        let Some(before) = system.cluster.evidence.as_mut() else {
            continue;
        };
        let after = match system
            .target
            .read_cluster(&system.cluster.replicas, opts.config)
            .await
        {
            Ok(after) => after,
            Err(e) => {
                report.notes.push(format!(
                    "{}: its durability status could not be read again after the run: {e}",
                    system.info.name
                ));
                continue;
            }
        };
        let changes = replication::changed_since(&before.evidence, &after);
        if changes.is_empty() {
            continue;
        }
        let reason = format!(
            "the cluster left {:?} during the run: {}",
            opts.config,
            changes.join("; ")
        );
        for row in builders.iter_mut() {
            row[index].mark(Status::Invalid, reason.clone());
            report.upsert_cell(row[index].to_cell());
        }
        before.changed_during_run = changes;
    }
    record_evidence(opts, systems, report);
}
