//! The engines of a run: each target opened and described, named after what it reports, its
//! index checked to be absent or search-bench's own before anything is written anywhere; and
//! what the report says about how they were measured.

use common::options::TargetSpec;
use common::results::{Location, Status, SystemInfo};

use crate::opts::Opts;
use crate::session::SearchWorkers;
use crate::targets::{self, Description, IndexSpec, Reach, Target};
use common::target::{FromAfar, note_remote};

/// One engine as the run sees it.
pub struct System {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    pub description: Description,
    pub searchers: Option<Box<dyn SearchWorkers>>,
    /// Why none of its queries can be trusted (its index does not hold the corpus).
    pub broken: Option<(Status, String)>,
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

/// Opens every engine, reads what it is, names it, and checks that its index is absent or
/// search-bench's own. Returns the systems and the reference's name.
pub async fn connect_all(
    opts: &Opts,
    specs: &[TargetSpec],
    reach: &Reach,
) -> anyhow::Result<(Vec<System>, String)> {
    let index = IndexSpec {
        name: opts.index.clone(),
        request_cache: !opts.no_request_cache,
    };
    let mut systems = Vec::new();
    for spec in specs {
        let mut target = targets::open(spec, &index, reach).await?;
        let description = target.describe().await?;
        let name = spec.name.clone();
        let mut info = description.system.system_info(
            name.unwrap_or_else(|| description.system.kind.clone()),
            &target.identity().url_redacted,
        );
        if let Some(tls) = &description.tls {
            tls.record(&mut info);
        }
        // The server's CPU and RSS are read from /proc only when it runs here.
        note_remote(&mut info, &[FromAfar::ServerUsage]);
        systems.push(System {
            info,
            target,
            description,
            searchers: None,
            broken: None,
        });
    }
    let names: Vec<String> = systems.iter().map(|s| s.info.name.clone()).collect();
    let urls: Vec<String> = systems
        .iter()
        .map(|s| s.info.url_redacted.clone())
        .collect();
    let reference =
        common::run::check_names(&names, &urls, opts.common.reference.as_deref(), "--target")?;
    for system in &mut systems {
        system
            .target
            .identity_mut()
            .name
            .clone_from(&system.info.name);
    }
    for system in &mut systems {
        system.target.check_index().await?;
    }
    Ok((systems, reference))
}

/// The notes of every report, then what the engines said of themselves (embedded engines
/// first, each note once), then the pacing.
pub fn notes(opts: &Opts, systems: &[System]) -> Vec<String> {
    let mut notes = vec![
        "Every engine is one node and the client ran on this machine, beside any local server: the client's CPU time is taken from the engines'.".to_owned(),
        "Figures compare only within this run (one section); they are not comparable with another run or machine.".to_owned(),
        "Before timing, every query's total hit count and every aggregation bucket (key, doc count, average price) were checked against exact answers computed from the generated corpus; ranking is reported as top-10 overlap only (scoring may legitimately differ).".to_owned(),
        "Ingest time runs from the first `_bulk` request until every document is searchable (the final refresh or commit included); the bodies are serialized before the clock starts.".to_owned(),
        "Timed searches ask for exact totals (`track_total_hits: true`), as verified, on every engine.".to_owned(),
    ];
    let embedded = |s: &&System| s.description.system.location == Location::Embedded;
    let (inside, servers): (Vec<&System>, Vec<&System>) = systems.iter().partition(embedded);
    for system in inside.into_iter().chain(servers) {
        for note in &system.description.notes {
            if !notes.contains(note) {
                notes.push(note.clone());
            }
        }
    }
    if opts.common.rate.is_none() {
        notes.push("Closed loop: each connection sends its next request when the previous one is answered.".into());
    }
    notes
}
