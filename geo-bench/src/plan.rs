//! What a run measures, decided and validated before any system is touched: the generated
//! events and queries (or a query file), the workloads in report order, the oracle's tolerance.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::bail;
use common::results::DataInfo;

use crate::events::{CITIES, EventSet, STREAM_EVENTS, STREAM_INSERT_POOL, Spread, city};
use crate::opts::{Family, Opts};
use crate::oracle::Tolerance;
use crate::queries::{self, Family as QueryFamily, Query, QueryPlan};
use crate::workloads::Workload;

/// Events in the pool insert windows cycle through.
const INSERT_POOL: usize = 16_384;

/// Everything a run measures, decided (and validated) before any system is touched.
pub struct Plan {
    pub spread: Spread,
    pub data: EventSet,
    pub pool: Arc<[crate::events::Event]>,
    /// Verified queries by family, in the order of the query table.
    pub queries: BTreeMap<QueryFamily, Arc<[Query]>>,
    pub workloads: Vec<Workload>,
    pub tolerance: Tolerance,
}

fn spread(opts: &Opts) -> anyhow::Result<Spread> {
    let cities = if opts.cities.is_empty() {
        CITIES.to_vec()
    } else {
        opts.cities
            .iter()
            .map(|name| {
                city(name).ok_or_else(|| {
                    let known: Vec<&str> = CITIES.iter().map(|c| c.name).collect();
                    anyhow::anyhow!(
                        "--cities: unknown city `{name}` (known: {})",
                        known.join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    Ok(Spread {
        cities,
        uniform_share: opts.uniform_share,
    })
}

/// The workloads in report order: the insert curve (clients, then batch size), the query
/// table, then the pipelined adds.
fn workloads(opts: &Opts, families: &[QueryFamily]) -> Vec<Workload> {
    let mut out = Vec::new();
    if opts.workloads.contains(&Family::Insert) {
        for &clients in &opts.clients {
            for &batch in &opts.batch_sizes {
                out.push(Workload::Insert { batch, clients });
            }
        }
    }
    if opts.workloads.contains(&Family::Query) {
        for &family in families {
            out.push(Workload::Query {
                family,
                clients: opts.common.connections,
            });
        }
    }
    if opts.workloads.contains(&Family::Geoadd) {
        out.push(Workload::PointAdds {
            depth: opts.pipeline,
            clients: opts.common.connections,
        });
    }
    out.dedup();
    out
}

/// Validates the options and generates the data and queries. Fails on bad input only.
pub fn plan(opts: &Opts) -> anyhow::Result<Plan> {
    opts.common.validate().map_err(anyhow::Error::msg)?;
    if opts.workloads.is_empty() {
        bail!("--workloads names no workload (insert, query, geoadd)");
    }
    let spread = spread(opts)?;
    if spread.cities.is_empty() && spread.uniform_share == 0.0 {
        bail!("no city and no uniform share: the events would have nowhere to be");
    }
    let data = EventSet::generate(
        opts.common.seed,
        STREAM_EVENTS,
        opts.events as usize,
        &spread,
    );
    let generated = queries::generate(
        opts.common.seed,
        &QueryPlan {
            per_family: opts.queries as usize,
            radii_m: &opts.radii,
            spread: &spread,
        },
        &data,
    );
    let all: Vec<Query> = match &opts.query_file {
        None => generated,
        Some(path) => {
            let mut own = queries::read_query_file(path).map_err(anyhow::Error::msg)?;
            own.extend(
                generated
                    .into_iter()
                    .filter(|q| matches!(q, Query::Latest { .. })),
            );
            own
        }
    };
    for query in &all {
        queries::validate(query).map_err(anyhow::Error::msg)?;
    }
    let mut by_family: BTreeMap<QueryFamily, Vec<Query>> = BTreeMap::new();
    for query in all {
        by_family.entry(query.family()).or_default().push(query);
    }
    let families: Vec<QueryFamily> = by_family.keys().copied().collect();
    let pool = EventSet::generate(opts.common.seed, STREAM_INSERT_POOL, INSERT_POOL, &spread)
        .events
        .into();
    Ok(Plan {
        workloads: workloads(opts, &families),
        queries: by_family.into_iter().map(|(k, v)| (k, v.into())).collect(),
        spread,
        data,
        pool,
        tolerance: Tolerance {
            fixed_m: opts.tolerance_m,
            relative: opts.tolerance_pct / 100.0,
        },
    })
}

impl Plan {
    pub fn data_info(&self, seed: u64) -> DataInfo {
        DataInfo {
            seed,
            checksum: self.data.checksum.clone(),
            description: format!(
                "{} events of 128 bytes over {} entities, around {} cities with a {:.0}% uniform share; {} queries",
                self.data.events.len(),
                self.data.entities.len(),
                self.spread.cities.len(),
                self.spread.uniform_share * 100.0,
                self.queries.values().map(|q| q.len()).sum::<usize>()
            ),
        }
    }

    /// The most sessions any workload needs.
    pub fn sessions(&self) -> usize {
        self.workloads
            .iter()
            .map(|w| w.clients() as usize)
            .max()
            .unwrap_or(1)
    }
}
