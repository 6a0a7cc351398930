//! The systems of a run: each target opened, described and named, its namespace checked before
//! anything is written; then, per variant, its index built, read back and checked against what
//! was asked, its search sessions opened in each of its modes (one lane, and one system of the
//! report, per mode), and the index dropped once its points are measured.

use std::sync::Arc;

use common::deadline::Deadline;
use common::human::{format_rate, format_thousands};
use common::options::TargetSpec;
use common::procstat::{ServerPid, own_rss, tree_rss_bytes};
use common::progress::Progress;
use common::results::{Cell, Location, Status, SystemInfo};
use common::run::Recording;
use common::scale::Worker;
use common::servercpu::ServerProcess;
use serde_json::{Value, json};

use crate::dataset::Dataset;
use crate::index::IndexSpec;
use crate::plan::Plan;
use crate::session::Searchers;
use crate::targets::{
    self, BUILD_FLAG, BUILD_PHASE, Bounds, BuildProgress, BuildReport, Mode, Reach, VectorTarget,
};
use crate::workloads::sweep::Lane;

/// One system as the run sees it: a target and its lanes (one per mode).
pub struct System {
    pub target: Box<dyn VectorTarget>,
    pub info: SystemInfo,
    pub lanes: Vec<LaneState>,
}

/// One mode of a system: its report entry and, while an index is open, its sessions.
pub struct LaneState {
    pub mode: Mode,
    pub info: SystemInfo,
    pub searchers: Option<Box<dyn Searchers>>,
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

/// Every lane's report entry, in order: what the report calls its systems.
pub fn infos(systems: &[System]) -> Vec<SystemInfo> {
    systems
        .iter()
        .flat_map(|s| s.lanes.iter().map(|l| l.info.clone()))
        .collect()
}

/// Opens every target and reads what it reports about itself; checks the names. Returns the
/// systems and the reference.
pub async fn connect_all(
    specs: &[TargetSpec],
    reference: Option<&str>,
    reach: &Reach,
    bounds: Bounds,
    reserved: &[&str],
) -> anyhow::Result<(Vec<System>, String)> {
    let mut systems = Vec::new();
    for spec in specs {
        let mut target = targets::open(spec, reach, bounds).await?;
        let description = target.describe().await?;
        let identity = target.identity();
        let mut info = description.system_info(identity.name.clone(), &identity.url_redacted);
        if let Some(tls) = target.tls() {
            tls.record(&mut info);
        }
        let lanes = target
            .modes()
            .into_iter()
            .map(|mode| {
                let mut lane = info.clone();
                lane.name = mode.name(&info.name);
                if !mode.suffix.is_empty() {
                    lane.verified
                        .insert("mode".into(), mode.description.clone());
                }
                LaneState {
                    mode,
                    info: lane,
                    searchers: None,
                }
            })
            .collect();
        systems.push(System {
            target,
            info,
            lanes,
        });
    }
    let (names, urls): (Vec<String>, Vec<String>) = systems
        .iter()
        .flat_map(|s| s.lanes.iter())
        .map(|l| (l.info.name.clone(), l.info.url_redacted.clone()))
        .unzip();
    if let Some(name) = names.iter().find(|n| reserved.contains(&n.as_str())) {
        anyhow::bail!(
            "a target is named `{name}`, the name of vector-bench's own exact scan; name it otherwise with NAME=URL"
        );
    }
    let reference = common::run::check_names(&names, &urls, reference, "--target")?;
    Ok((systems, reference))
}

/// Checks every namespace each system will write, before anything is written.
pub async fn check_namespaces(
    systems: &mut [System],
    plan: &Plan,
    data: &Dataset,
) -> anyhow::Result<()> {
    for system in systems {
        for variant in &plan.variants {
            if system.target.offer(*variant).is_ok() {
                system.target.check(&plan.spec(data, *variant)).await?;
            }
        }
    }
    Ok(())
}

/// The lanes as the sweep sees them: a name, a mode, where the server runs (its process found
/// by `--server-pid` or by the port it listens on; one of several `workers` does not read it)
/// and, while an index is open, its sessions.
pub fn lanes<'a>(systems: &'a mut [System], plan: &Plan, workers: u32) -> Vec<Lane<'a>> {
    let count = systems.len();
    systems
        .iter_mut()
        .flat_map(|s| {
            let given = ServerPid::find(&plan.server_pids, s.name(), count).map(|p| p.pid);
            let server = ServerProcess::locate(&s.info, given).shared_by(workers);
            s.lanes.iter_mut().map(move |l| Lane {
                name: &l.info.name,
                mode: &l.mode,
                server: server.clone(),
                searchers: &mut l.searchers,
            })
        })
        .collect()
}

/// Builds `spec` on every system, one after the other, each build recorded as it ends. On
/// several workers worker 0 builds; every worker meets it at the barrier after each system's
/// build, and the others then read the index back and open their sessions on it.
pub async fn build_all(
    systems: &mut [System],
    plan: &Plan,
    spec: &IndexSpec,
    data: &Arc<Dataset>,
    connections: usize,
    run: &mut Recording,
    worker: &mut Worker,
) -> anyhow::Result<()> {
    let context = Build {
        plan,
        spec,
        data,
        connections,
        systems: systems.len(),
    };
    for system in systems.iter_mut() {
        let (entry, problem) = if worker.prepares() {
            let built = context.one(system, run.progress()).await;
            worker.sync(0).await?;
            built
        } else {
            worker.sync(0).await?;
            context.open_built(system).await
        };
        record_build(run, system, plan, spec, entry, problem);
        run.save()?;
    }
    Ok(())
}

/// What one build needs besides the system.
struct Build<'a> {
    plan: &'a Plan,
    spec: &'a IndexSpec,
    data: &'a Arc<Dataset>,
    connections: usize,
    systems: usize,
}

impl Build<'_> {
    /// Builds the index on one system, verifies it and opens its search sessions; returns the
    /// build's entry and, when the system measures nothing of this variant, why.
    async fn one(
        &self,
        system: &mut System,
        progress: &Progress,
    ) -> (Value, Option<(Status, String)>) {
        let spec = self.spec;
        let name = system.name().to_owned();
        let offer = system.target.offer(spec.variant);
        let mut entry = json!({
            "system": name,
            "variant": spec.variant,
            "offered": offer.as_ref().ok(),
        });
        if let Err(why) = offer {
            return (
                entry,
                Some((Status::Refused, format!("not offered: {why}"))),
            );
        }
        progress.line(format!(
            "{name}: building the {} index ({} rows)…",
            spec.variant.as_str(),
            format_thousands(spec.rows as f64)
        ));
        let rss_before = own_rss().map(|r| r.current_bytes);
        let rows = BuildProgress::new(Deadline::after(self.plan.build_ceiling));
        let deadline = *rows.deadline();
        let built = deadline
            .within(
                BUILD_PHASE,
                BUILD_FLAG,
                system.target.build(spec, self.data, self.plan.batch, &rows),
            )
            .await;
        let build = match built {
            Ok(Ok(build)) => build,
            Ok(Err(e)) if !deadline.passed() => {
                let reason = format!("building the index failed: {e}");
                return (entry, Some((Status::Error, reason)));
            }
            Ok(Err(_)) | Err(_) => return (entry, Some(past_the_bound(&deadline, &rows))),
        };
        self.describe_build(system, &build, rss_before, &mut entry, progress);
        // Reading the index back and opening the sessions are part of the build's bound.
        match deadline
            .within(
                BUILD_PHASE,
                BUILD_FLAG,
                self.verify_and_open(system, &mut entry),
            )
            .await
        {
            Ok(problem) => (entry, problem),
            Err(_) => {
                for lane in &mut system.lanes {
                    lane.searchers = None;
                }
                (entry, Some(past_the_bound(&deadline, &rows)))
            }
        }
    }

    /// On a worker other than worker 0: reads back the index worker 0 built and opens this
    /// worker's sessions on it.
    async fn open_built(&self, system: &mut System) -> (Value, Option<(Status, String)>) {
        let offer = system.target.offer(self.spec.variant);
        let mut entry = json!({
            "system": system.name(),
            "variant": self.spec.variant,
            "offered": offer.as_ref().ok(),
            "built_by_worker": 0,
        });
        if let Err(why) = offer {
            return (
                entry,
                Some((Status::Refused, format!("not offered: {why}"))),
            );
        }
        let problem = self.verify_and_open(system, &mut entry).await;
        (entry, problem)
    }

    /// The build's times, rates and memory, in its entry and on the progress line.
    fn describe_build(
        &self,
        system: &System,
        build: &BuildReport,
        rss_before: Option<u64>,
        entry: &mut Value,
        progress: &Progress,
    ) {
        let rows_per_s = self.spec.rows as f64 / build.insert_s.max(1e-9);
        progress.line(format!(
            "{}: {} index built in {:.1}s (insert {:.1}s, {} rows/s)",
            system.name(),
            self.spec.variant.as_str(),
            build.build_s,
            build.insert_s,
            format_rate(rows_per_s)
        ));
        entry["build"] = json!(build);
        entry["insert_rows_per_s"] = json!(rows_per_s);
        // An embedded index is this process's memory: what the build added is its cost.
        if system.info.location == Location::Embedded {
            let after = own_rss().map(|r| r.current_bytes);
            entry["process_rss_growth_bytes"] =
                json!(after.zip(rss_before).map(|(a, b)| a.saturating_sub(b)));
        }
        if let Some(server) = ServerPid::find(&self.plan.server_pids, system.name(), self.systems) {
            entry["server_rss_bytes"] = json!(tree_rss_bytes(server.pid));
        }
    }

    /// Reads the index back and checks it was built as asked; opens the search sessions.
    async fn verify_and_open(
        &self,
        system: &mut System,
        entry: &mut Value,
    ) -> Option<(Status, String)> {
        let (plan, spec) = (self.plan, self.spec);
        let verified = match system.target.verify(spec).await {
            Ok(v) => v,
            Err(e) => return Some((Status::Error, format!("reading the index back failed: {e}"))),
        };
        entry["verified"] = json!(verified);
        for (key, wanted) in [
            ("m", plan.m.to_string()),
            ("ef_construction", plan.ef_construction.to_string()),
            ("rows", spec.rows.to_string()),
        ] {
            if let Some(found) = verified.get(key)
                && *found != wanted
            {
                return Some((
                    Status::Invalid,
                    format!("the index reports {key} = {found}, asked for {wanted}"),
                ));
            }
        }
        for (key, value) in &verified {
            let key = format!("{}.{key}", spec.variant.as_str());
            system.info.verified.insert(key.clone(), value.clone());
            for lane in &mut system.lanes {
                lane.info.verified.insert(key.clone(), value.clone());
            }
        }
        let mut problem = None;
        for lane in &mut system.lanes {
            if !lane.mode.variants.is_empty() && !lane.mode.variants.contains(&spec.variant) {
                continue;
            }
            match system
                .target
                .searchers(spec, self.connections, &lane.mode)
                .await
            {
                Ok((searchers, settings)) => {
                    for (key, value) in settings {
                        lane.info
                            .verified
                            .insert(format!("{}.{key}", spec.variant.as_str()), value);
                    }
                    lane.searchers = Some(searchers);
                }
                Err(e) => {
                    problem = Some((
                        Status::Error,
                        format!("opening search sessions ({}) failed: {e}", lane.info.name),
                    ));
                }
            }
        }
        problem
    }
}

/// A build stopped at `--build-ceiling`: `timeout`, with how far it got.
fn past_the_bound(deadline: &Deadline, rows: &BuildProgress) -> (Status, String) {
    let past = deadline.past(BUILD_PHASE, BUILD_FLAG);
    let reason = format!(
        "{past}; {} rows sent by then",
        format_thousands(rows.rows() as f64)
    );
    (Status::Timeout, reason)
}

/// Puts one build into the report: its entry under `extra.builds`, the settings read back
/// into the system's evidence, and for a system that measures nothing of this variant, a cell
/// with the reason at every point.
fn record_build(
    run: &mut Recording,
    system: &System,
    plan: &Plan,
    spec: &IndexSpec,
    mut entry: Value,
    problem: Option<(Status, String)>,
) {
    let name = system.name();
    if let Some((status, reason)) = &problem {
        entry["problem"] = json!(reason);
        run.progress()
            .line(format!("{name}: {} — {reason}", spec.variant.as_str()));
        for family in plan
            .families()
            .into_iter()
            .filter(|f| f.variant == spec.variant)
        {
            for lane in system
                .lanes
                .iter()
                .filter(|l| l.searchers.is_none() && l.mode.applies(family.variant, family.filter))
            {
                for ef in plan.efs_at(family.k) {
                    run.report.upsert_cell(Cell::unmeasured(
                        &family.workload(ef),
                        &lane.info.name,
                        "queries/s",
                        *status,
                        reason,
                    ));
                }
            }
        }
    }
    let report = &mut run.report;
    if let Some(builds) = report.extra.get_mut("builds").and_then(Value::as_array_mut) {
        builds.push(entry);
    }
    for lane in &system.lanes {
        if let Some(info) = report.systems.iter_mut().find(|s| s.name == lane.info.name) {
            info.verified.clone_from(&lane.info.verified);
        }
    }
}

/// Closes every system's sessions on `spec` and drops fairbench's index, unless asked to keep
/// it; a failure to drop is a note, not an error.
pub async fn drop_all(
    systems: &mut [System],
    spec: &IndexSpec,
    keep_data: bool,
    notes: &mut Vec<String>,
) {
    for system in systems {
        for lane in &mut system.lanes {
            lane.searchers = None;
        }
        if !keep_data
            && system.target.offer(spec.variant).is_ok()
            && let Err(e) = system.target.drop_index(spec).await
        {
            notes.push(format!("cleaning up failed: {e}"));
        }
    }
}
