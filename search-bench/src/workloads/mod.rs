//! The workloads, one row of the report each: `_bulk` ingest (count-bounded, it loads the
//! corpus) and the timed query windows of each query kind. A workload names no system.

use crate::opts::Opts;
use crate::queries::QueryKind;

/// One row of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Ingest,
    Query(QueryKind),
}

impl Workload {
    /// The workload `--workloads` names `text`.
    pub fn parse(text: &str) -> Result<Workload, String> {
        let text = text.trim();
        if text == "ingest" {
            return Ok(Workload::Ingest);
        }
        QueryKind::ALL
            .into_iter()
            .find(|k| k.key() == text)
            .map(Workload::Query)
            .ok_or_else(|| {
                format!("unknown workload `{text}`; choose from ingest, match, phrase, bool, agg")
            })
    }

    /// Every workload, in the order they run (ingest first: it loads the data).
    pub fn all() -> Vec<Workload> {
        std::iter::once(Workload::Ingest)
            .chain(QueryKind::ALL.map(Workload::Query))
            .collect()
    }

    /// Where the workload runs among the others.
    pub fn order(self) -> usize {
        match self {
            Workload::Ingest => 0,
            Workload::Query(k) => 1 + k as usize,
        }
    }

    pub fn label(self, opts: &Opts) -> String {
        match self {
            Workload::Ingest => format!(
                "_bulk ingest, {} threads × {}-doc batches",
                opts.ingest_threads,
                common::human::format_thousands(opts.batch as f64)
            ),
            Workload::Query(kind) => kind.label().to_owned(),
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Workload::Ingest => "docs/s",
            Workload::Query(_) => "q/s",
        }
    }

    /// Sessions the workload runs on: `_bulk` senders for ingest, connections for queries.
    pub fn connections(self, opts: &Opts) -> u32 {
        match self {
            Workload::Ingest => opts.ingest_threads as u32,
            Workload::Query(_) => opts.common.connections,
        }
    }
}
