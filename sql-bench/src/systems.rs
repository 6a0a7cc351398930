//! The systems a suite measures: which targets, connecting to each, what each reports about
//! itself (where it runs and keeps its data included), whether its durability matches the
//! configuration asked for, and the names it is reported under.

use anyhow::bail;
use common::options::{CommonOpts, TargetSpec};
use common::results::{Location, SystemInfo};
use common::target::FromAfar;

use crate::durability::{Check, Durability};
use crate::targets::{self, Reach, Target};

/// Several workers need a server they all reach: an embedded engine lives inside each
/// worker's process. Refused from the targets alone, before anything is made or connected.
pub fn refuse_embedded_workers(specs: &[TargetSpec], workers: u32) -> anyhow::Result<()> {
    if workers <= 1 {
        return Ok(());
    }
    if let Some(spec) = specs
        .iter()
        .find(|s| targets::EMBEDDED_SCHEMES.contains(&s.scheme()))
    {
        bail!(
            "{}: an embedded engine lives inside each worker's process, so {workers} workers would measure {workers} separate databases; run several workers against a server",
            spec.name.as_deref().unwrap_or(spec.scheme())
        );
    }
    Ok(())
}

/// A system as connected and described, before any suite-specific preparation.
pub struct Connected {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    /// Why the system is not measured at all.
    pub refused: Option<String>,
    /// Every check of its own settings, for an engine whose cluster can be read.
    pub settings_checks: Option<Vec<Check>>,
}

/// The targets to measure: those named, or the embedded default.
pub fn plan_targets(common: &CommonOpts) -> anyhow::Result<Vec<TargetSpec>> {
    let mut specs = common.targets.clone();
    if specs.is_empty() {
        specs.push(TargetSpec::parse(targets::DEFAULT_TARGET).map_err(anyhow::Error::msg)?);
    }
    Ok(specs)
}

/// Opens every target and reads what it reports about itself; refuses (or, when allowed,
/// labels) each whose durability does not match `config`. Names unnamed systems after their
/// engine and checks the names and the reference.
pub async fn connect_all(
    specs: &[TargetSpec],
    reach: &Reach,
    config: Durability,
    allow_unmatched: bool,
    reference: Option<&str>,
) -> anyhow::Result<Vec<Connected>> {
    let mut systems = Vec::new();
    for spec in specs {
        let mut target = targets::open(spec, reach).await?;
        let description = target.describe(config).await?;
        let identity = target.identity().clone();
        let mut system = Connected {
            target,
            info: description
                .system
                .system_info(identity.name.clone(), &identity.url_redacted),
            refused: None,
            settings_checks: description.settings_checks.clone(),
        };
        if let Some(tls) = system.target.tls() {
            tls.record(&mut system.info);
        }
        // What it reports over its protocol is read wherever it runs; its files only here.
        common::target::note_remote(&mut system.info, &[FromAfar::ConfigFile]);
        if system.info.location == Location::Local && system.info.data_dir.is_none() {
            // The lifecycle measures a floor where a system says its data is; say why not.
            system.info.not_measured.push(
                "durable-write floor of its disk: the server does not report where it keeps its data"
                    .into(),
            );
        }
        if !description.mismatches.is_empty() {
            let what = description.mismatches.join("; ");
            if allow_unmatched {
                let label = common::verdict::unmatched_durability(&description.mismatches);
                system.info.labels.push(label);
            } else {
                system.refused = Some(format!(
                    "durability does not match {config:?}: {what}; pass --allow-unmatched-durability to measure it anyway, labelled"
                ));
            }
        }
        systems.push(system);
    }
    let explicit: Vec<Option<String>> = specs.iter().map(|s| s.name.clone()).collect();
    settle_names(&mut systems, &explicit, reference)?;
    Ok(systems)
}

/// Names every unnamed system after its engine (as the server reported it), then checks that
/// no two share a name and that the reference is one of them.
fn settle_names(
    systems: &mut [Connected],
    explicit: &[Option<String>],
    reference: Option<&str>,
) -> anyhow::Result<()> {
    let names: Vec<String> = systems
        .iter()
        .zip(explicit)
        .map(|(system, given)| given.clone().unwrap_or_else(|| system.info.kind.clone()))
        .collect();
    let urls: Vec<String> = systems
        .iter()
        .map(|s| s.info.url_redacted.clone())
        .collect();
    common::run::check_names(&names, &urls, reference, "--target")?;
    for (system, name) in systems.iter_mut().zip(names) {
        system.target.identity_mut().name.clone_from(&name);
        system.info.name = name;
    }
    Ok(())
}

/// Fails when every system (name, why it is refused) was refused: then nothing can be
/// measured.
pub fn ensure_some_measurable<'a>(
    systems: impl IntoIterator<Item = (&'a str, Option<&'a str>)> + Clone,
) -> anyhow::Result<()> {
    if systems
        .clone()
        .into_iter()
        .all(|(_, refused)| refused.is_some())
    {
        bail!(
            "no system can be measured: {}",
            systems
                .into_iter()
                .map(|(name, refused)| format!("{name} {}", refused.unwrap_or("")))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}
