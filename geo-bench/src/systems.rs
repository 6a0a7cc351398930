//! The systems of a run: each target opened and described, named, refused when it does not
//! run as its URL asked, then prepared, loaded, its indexes read back from its catalog and its
//! answer to every query checked against the oracle before anything is timed.

use std::collections::BTreeMap;

use anyhow::bail;
use common::options::TargetSpec;
use common::progress::Progress;
use common::results::SystemInfo;

use crate::oracle::Oracle;
use crate::plan::Plan;
use crate::queries::Family as QueryFamily;
use crate::session::GeoWorkers;
use crate::targets::{self, Target};
use crate::workloads::Workload;

/// One system as the run sees it.
pub struct System {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    pub durable: bool,
    pub method: Vec<String>,
    /// What a reader must know of the run because this system is in it.
    pub notes: Vec<String>,
    pub workers: Option<Box<dyn GeoWorkers>>,
    /// Why the system is not measured at all.
    pub refused: Option<String>,
    /// Query families whose answers disagreed with the oracle, with an example.
    pub invalid: BTreeMap<QueryFamily, String>,
    pub supports_point_adds: bool,
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

/// Opens every target and reads what it reports about itself; refuses each that does not run
/// as its URL asked. Names unnamed systems; returns them with the reference.
pub async fn connect_all(
    specs: &[TargetSpec],
    reference: Option<&str>,
    reach: &targets::Reach,
) -> anyhow::Result<(Vec<System>, String)> {
    let mut systems = Vec::new();
    for spec in specs {
        let mut target = targets::open(spec, reach).await?;
        let d = target.describe().await?;
        let name = spec.name.clone().unwrap_or_else(|| d.default_name.clone());
        target.identity_mut().name.clone_from(&name);
        let mut info = SystemInfo {
            labels: vec![if d.durable {
                "durable".into()
            } else {
                "not durable".into()
            }],
            ..d.system.system_info(name, &target.identity().url_redacted)
        };
        info.verified
            .insert("durability".into(), d.durability.clone());
        if let Some(tls) = target.tls() {
            tls.record(&mut info);
        }
        // What it reports over its protocol is read wherever it runs; its files only here.
        common::target::note_remote(&mut info, &[common::target::FromAfar::ConfigFile]);
        systems.push(System {
            supports_point_adds: target.supports_point_adds(),
            info,
            target,
            durable: d.durable,
            method: d.method,
            notes: d.notes,
            workers: None,
            refused: d.refusal,
            invalid: BTreeMap::new(),
        });
    }
    let names: Vec<String> = systems.iter().map(|s| s.info.name.clone()).collect();
    let urls: Vec<String> = systems
        .iter()
        .map(|s| s.info.url_redacted.clone())
        .collect();
    let reference = common::run::check_names(&names, &urls, reference, "--target")?;
    Ok((systems, reference))
}

/// Prepares and loads every system that is not refused, verifies its indexes and its answers
/// to every query, and opens `sessions` worker sessions. A worker other than worker 0 of a
/// run on several machines (`prepares` false) opens its sessions, and a fork after the first
/// (`later_fork`) verifies the indexes first: worker 0 of the first fork prepares, loads and
/// verifies the answers once, and the barrier before the first window waits for it.
pub async fn prepare(
    systems: &mut [System],
    plan: &Plan,
    progress: &Progress,
    prepares: bool,
    later_fork: bool,
    sessions: usize,
) -> anyhow::Result<()> {
    if systems.iter().all(|s| s.refused.is_some()) {
        let reasons: Vec<String> = systems
            .iter()
            .map(|s| format!("{}: {}", s.name(), s.refused.as_deref().unwrap_or("")))
            .collect();
        bail!("no system can be measured: {}", reasons.join("; "));
    }
    let only_point_adds = plan
        .workloads
        .iter()
        .all(|w| matches!(w, Workload::PointAdds { .. }));
    if only_point_adds
        && !systems
            .iter()
            .any(|s| s.refused.is_none() && s.supports_point_adds)
    {
        bail!(
            "--workloads geoadd needs a system that takes single-point adds (Redis or Valkey); none of the targets does"
        );
    }
    let oracle = Oracle::new(&plan.data, plan.tolerance);
    for system in systems.iter_mut() {
        if let Some(reason) = &system.refused {
            progress.line(format!("{}: refused — {reason}", system.name()));
            continue;
        }
        if !prepares {
            // What the first fork made, verified from the engine's catalog (a worker other
            // than 0 runs beside worker 0, which may not have made it yet).
            if later_fork {
                let evidence = system.target.verify_indexes().await?;
                system.info.verified.extend(evidence);
            }
            system.workers = Some(system.target.open_workers(sessions).await?);
            continue;
        }
        progress.line(format!(
            "{}: {} — loading {} events",
            system.name(),
            system.info.version,
            plan.data.events.len()
        ));
        system.target.prepare().await?;
        system.target.load(&plan.data.events).await?;
        let evidence = system.target.verify_indexes().await?;
        system.info.verified.extend(evidence);
        let mut workers = system.target.open_workers(sessions).await?;
        verify_queries(system, workers.as_mut(), plan, &oracle, progress).await?;
        system.workers = Some(workers);
    }
    Ok(())
}

/// Asks the system every query through the code that is timed and compares each answer with
/// the oracle's; a family with any disagreement is marked invalid with the first example.
async fn verify_queries(
    system: &mut System,
    workers: &mut dyn GeoWorkers,
    plan: &Plan,
    oracle: &Oracle<'_>,
    progress: &Progress,
) -> anyhow::Result<()> {
    for (family, queries) in &plan.queries {
        let answers = workers
            .answer_all(queries)
            .await
            .map_err(|e| anyhow::anyhow!("{}: verifying queries: {e}", system.name()))?;
        let failures: Vec<String> = queries
            .iter()
            .zip(&answers)
            .filter_map(|(q, ids)| oracle.check(q, ids).err())
            .collect();
        if let Some(first) = failures.first() {
            let reason = format!(
                "{} of {} {family} answers disagree with the exact oracle (boundary tolerance {}); first: {first}",
                failures.len(),
                queries.len(),
                plan.tolerance.describe()
            );
            progress.line(format!("{}: {reason}", system.name()));
            system.invalid.insert(*family, reason);
        }
    }
    Ok(())
}
