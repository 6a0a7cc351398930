//! One system as the crud run sees it (its target, what it reported, its worker sessions, why
//! it is refused or its reads untrusted, its cluster), and the two tables it is given.

use common::options::TargetSpec;
use common::results::SystemInfo;

use crate::durability::Check;
use crate::opts::CrudOpts;
use crate::replication::SystemEvidence;
use crate::session::KvWorkers;
use crate::targets::{KvTable, Target};

/// The table point reads go to.
const READ_TABLE: &str = "crud_read";
/// The table inserts go to.
const WRITE_TABLE: &str = "crud_write";

/// One system as the run sees it.
pub(super) struct System {
    pub target: Box<dyn Target>,
    pub info: SystemInfo,
    pub workers: Option<Box<dyn KvWorkers>>,
    /// Why the system is not measured at all.
    pub refused: Option<String>,
    /// Every check of its own settings, for an engine whose cluster can be read.
    pub settings_checks: Option<Vec<Check>>,
    /// Why its reads cannot be trusted (the read table did not verify).
    pub reads_invalid: Option<String>,
    /// Its replicas and what its cluster reported (C0–C4).
    pub cluster: ClusterState,
}

impl System {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

/// A system's replicas and what its cluster reported.
#[derive(Default)]
pub(super) struct ClusterState {
    /// Its replicas (`--replica`), resolved to URLs.
    pub replicas: Vec<TargetSpec>,
    /// Its URL under its settled name, once its cluster has been read.
    pub spec: Option<TargetSpec>,
    /// What its servers reported about the durability configuration.
    pub evidence: Option<SystemEvidence>,
}

/// The table point reads go to and the table inserts go to.
pub(super) fn tables(opts: &CrudOpts) -> (KvTable, KvTable) {
    let table = |name| KvTable {
        name,
        value_len: opts.value_size,
    };
    (table(READ_TABLE), table(WRITE_TABLE))
}

/// The systems not refused.
pub(super) fn measured(systems: &mut [System]) -> impl Iterator<Item = &mut System> {
    systems.iter_mut().filter(|s| s.refused.is_none())
}
