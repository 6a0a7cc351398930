//! The systems a suite measures: which targets, connecting to each, what each reports about
//! itself, and whether its durability matches the configuration asked for.

use std::path::Path;

use anyhow::bail;
use common::options::{CommonOpts, TargetSpec};
use common::results::SystemInfo;

use crate::durability::Durability;
use crate::targets::{self, Target};

/// A system as connected and described, before any suite-specific preparation.
pub struct Connected {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    /// Why the system is not measured at all.
    pub refused: Option<String>,
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
    results_dir: &Path,
    config: Durability,
    allow_unmatched: bool,
    reference: Option<&str>,
) -> anyhow::Result<Vec<Connected>> {
    let mut systems = Vec::new();
    for spec in specs {
        let mut target = targets::open(spec, results_dir).await?;
        let description = target.describe(config).await?;
        let identity = target.identity().clone();
        let mut system = Connected {
            target,
            info: SystemInfo {
                name: identity.name.clone(),
                kind: description.kind.clone(),
                url_redacted: identity.url_redacted.clone(),
                version: description.version.clone(),
                verified: description.settings.clone(),
                labels: Vec::new(),
                data_dir: description
                    .data_dir
                    .as_ref()
                    .map(|d| d.display().to_string()),
                ..SystemInfo::default()
            },
            refused: None,
        };
        if !description.mismatches.is_empty() {
            let what = description.mismatches.join("; ");
            if allow_unmatched {
                system.info.labels.push("unmatched durability".into());
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
    let mut names: Vec<String> = Vec::new();
    for (system, given) in systems.iter_mut().zip(explicit) {
        let name = given.clone().unwrap_or_else(|| system.info.kind.clone());
        if names.contains(&name) {
            bail!(
                "two targets are named `{name}`; tell them apart with NAME=URL (for example --target {name}2={})",
                system.info.url_redacted
            );
        }
        names.push(name.clone());
        system.target.identity_mut().name.clone_from(&name);
        system.info.name = name;
    }
    if let Some(reference) = reference
        && !names.iter().any(|n| n == reference)
    {
        bail!(
            "--reference {reference} names no target (targets: {})",
            names.join(", ")
        );
    }
    Ok(())
}

/// Fails when every system was refused: then nothing can be measured.
pub fn ensure_some_measurable(systems: &[Connected]) -> anyhow::Result<()> {
    if systems.iter().all(|s| s.refused.is_some()) {
        bail!(
            "no system can be measured: {}",
            systems
                .iter()
                .map(|s| format!("{} {}", s.info.name, s.refused.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}
