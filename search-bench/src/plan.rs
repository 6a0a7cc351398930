//! What a run measures, decided and validated before any engine is touched (the workloads in
//! the order they run, the limits every size must respect), and the material every engine is
//! given: the corpus as `_bulk` bodies, the query sets and their exact answers.

use std::sync::Arc;

use anyhow::bail;

use crate::answer::Answer;
use crate::corpus::{Bulk, Corpus};
use crate::opts::Opts;
use crate::queries::{QueryKind, QuerySet};
use crate::truth;
use crate::workloads::Workload;

const MAX_INGEST_THREADS: u64 = 256;
const MAX_CONNECTIONS: u32 = 1024;
const MAX_QUERIES: u64 = 100_000;

/// The workloads of a run, in the order they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub workloads: Vec<Workload>,
}

impl Plan {
    /// Whether ingest is measured (otherwise the corpus is loaded once, untimed).
    pub fn measures_ingest(&self) -> bool {
        self.workloads.contains(&Workload::Ingest)
    }

    /// The query kinds to measure, in order.
    pub fn kinds(&self) -> Vec<QueryKind> {
        self.workloads
            .iter()
            .filter_map(|w| match w {
                Workload::Query(k) => Some(*k),
                Workload::Ingest => None,
            })
            .collect()
    }

    /// The row of a query workload among the planned workloads.
    pub fn query_row(&self, kind: QueryKind) -> usize {
        self.workloads
            .iter()
            .position(|w| *w == Workload::Query(kind))
            .expect("only planned workloads have query sets")
    }
}

/// Validates the options and plans the workloads: bad input fails here, before any folder.
pub fn plan(opts: &Opts) -> anyhow::Result<Plan> {
    check_limits(opts)?;
    Ok(Plan {
        workloads: plan_workloads(opts)?,
    })
}

/// The workloads to run, in the order they run (ingest first: it loads the data).
fn plan_workloads(opts: &Opts) -> anyhow::Result<Vec<Workload>> {
    let mut chosen: Vec<Workload> = if opts.workloads.is_empty() {
        Workload::all()
    } else {
        opts.workloads
            .iter()
            .map(|w| Workload::parse(w))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?
    };
    chosen.sort_by_key(|w| w.order());
    chosen.dedup();
    Ok(chosen)
}

fn check_limits(opts: &Opts) -> anyhow::Result<()> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    if opts.ingest_threads > MAX_INGEST_THREADS {
        bail!(
            "--ingest-threads {} is more than {MAX_INGEST_THREADS}",
            opts.ingest_threads
        );
    }
    if opts.common.connections > MAX_CONNECTIONS {
        bail!(
            "--connections {} is more than {MAX_CONNECTIONS}",
            opts.common.connections
        );
    }
    if opts.queries > MAX_QUERIES {
        bail!(
            "--queries {} is more than {MAX_QUERIES} per workload",
            opts.queries
        );
    }
    if opts.docs > u64::from(u32::MAX) {
        bail!("--docs {} is more than {} documents", opts.docs, u32::MAX);
    }
    Ok(())
}

/// What every engine is given: the corpus as `_bulk` bodies, the query sets and the truth.
pub struct Material {
    pub corpus: Corpus,
    pub bulks: Arc<[Bulk]>,
    pub sets: Vec<QuerySet>,
    /// The exact answers, set by set, query by query.
    pub truth: Vec<Vec<Answer>>,
}

impl Material {
    /// Generates the corpus, one query set per planned query kind, and their exact answers.
    pub fn generate(opts: &Opts, plan: &Plan) -> Material {
        let corpus = Corpus::generate(opts.common.seed, opts.docs);
        let bulks: Arc<[Bulk]> = corpus.bulk_bodies(opts.batch as usize).into();
        let sets: Vec<QuerySet> = plan
            .kinds()
            .into_iter()
            .map(|k| QuerySet::generate(k, &corpus, opts.common.seed, opts.queries as usize))
            .collect();
        let refs: Vec<&QuerySet> = sets.iter().collect();
        let truth = truth::expected(&corpus, &refs);
        Material {
            corpus,
            bulks,
            sets,
            truth,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn workloads_run_in_a_fixed_order_and_unknown_ones_are_refused() {
        let opts = Opts::parse_from(["search-bench", "--workloads", "agg,match,ingest,match"]);
        let planned = plan(&opts).unwrap();
        assert_eq!(
            planned.workloads,
            [
                Workload::Ingest,
                Workload::Query(QueryKind::Match),
                Workload::Query(QueryKind::Aggregation)
            ]
        );
        assert_eq!(planned.query_row(QueryKind::Aggregation), 2);
        let all = plan(&Opts::parse_from(["search-bench"])).unwrap();
        assert_eq!(all.workloads.len(), 5);
        let bad = Opts::parse_from(["search-bench", "--workloads", "fuzzy"]);
        let error = plan(&bad).unwrap_err().to_string();
        assert!(error.contains("unknown workload `fuzzy`"), "{error}");
    }

    #[test]
    fn sizes_beyond_the_limits_are_refused() {
        let many = Opts::parse_from(["search-bench", "--ingest-threads", "1000"]);
        assert!(plan(&many).is_err());
    }
}
