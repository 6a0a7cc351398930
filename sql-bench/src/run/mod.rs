//! One sql-bench run: the suite asked for, run as its phases on common's run lifecycle
//! (`crud` for seed 000's workloads, `app` for seeds 003/004's scenarios).

mod app;
mod crud;
mod stopped;
mod ycsb;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::run::Summary;

use crate::opts::{Opts, Suite};

/// The checks the suite `opts` names runs before anything is touched (no connection, no
/// folder): what `k8s-manifest` asks of a worker's arguments.
pub fn check(opts: &Opts) -> anyhow::Result<()> {
    match &opts.suite {
        Suite::Crud(crud) => crud::check(crud).map(drop),
        Suite::App(app) => app::check(app),
        Suite::Ycsb(ycsb) => ycsb::check(ycsb).map(drop),
    }
}

/// Runs the suite `opts` names. Bad input fails before any system's data is touched.
pub async fn run(opts: &Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    match &opts.suite {
        Suite::Crud(crud) => crud::run(crud, interrupt).await,
        Suite::App(app) => app::run(app, interrupt).await,
        Suite::Ycsb(ycsb) => ycsb::run(ycsb, interrupt).await,
    }
}

/// Every suite's run forks.
impl common::fork::Forking for Opts {
    fn forking(&self) -> Option<(common::run::Tool, &common::options::CommonOpts)> {
        match &self.suite {
            crate::opts::Suite::Crud(o) => Some((crud::TOOL, &o.common)),
            crate::opts::Suite::Ycsb(o) => Some((ycsb::TOOL, &o.common)),
            crate::opts::Suite::App(o) => Some((app::TOOL, &o.common)),
        }
    }
}
