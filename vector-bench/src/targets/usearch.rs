//! usearch, the embedded default: an in-process HNSW index (C++ through the `usearch` crate),
//! built on every core, searched by one OS thread per worker; filtered search goes through its
//! predicate API, which checks each candidate's category during the traversal.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use usearch::{Index, IndexOptions, MetricKind, ScalarKind, b1x8};

use super::{
    BuildProgress, BuildReport, Described, Identity, Mode, Opened, TargetError, VectorTarget,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{BlockingSearchSession, Work};

/// Search contexts reserved in the index: searches beyond this many at once would wait.
const SEARCH_CONTEXTS: usize = 256;

pub struct UsearchTarget {
    identity: Identity,
    index: Option<Arc<Index>>,
    categories: Option<Arc<[u8]>>,
    binary: bool,
}

/// One bit per dimension, set when the value is positive (the sign of a centred embedding),
/// eight dimensions to a byte: what usearch's Hamming metric compares.
pub fn sign_bits(vector: &[f32], out: &mut Vec<u8>) {
    out.clear();
    out.extend(vector.chunks(8).map(|chunk| {
        chunk
            .iter()
            .enumerate()
            .fold(0u8, |byte, (i, v)| byte | (u8::from(*v > 0.0) << i))
    }));
}

impl UsearchTarget {
    pub fn open(spec: &TargetSpec) -> UsearchTarget {
        UsearchTarget {
            identity: Identity::of(spec, "usearch"),
            index: None,
            categories: None,
            binary: false,
        }
    }

    fn options(spec: &IndexSpec) -> IndexOptions {
        let (metric, quantization) = match (spec.variant, spec.metric) {
            (Variant::Binary, _) => (MetricKind::Hamming, ScalarKind::B1),
            (variant, metric) => (
                match metric {
                    Metric::Cosine => MetricKind::Cos,
                    Metric::L2 => MetricKind::L2sq,
                },
                match variant {
                    Variant::Int8 => ScalarKind::I8,
                    _ => ScalarKind::F32,
                },
            ),
        };
        IndexOptions {
            dimensions: spec.dims,
            metric,
            quantization,
            connectivity: spec.m,
            expansion_add: spec.ef_construction,
            expansion_search: 64,
            multi: false,
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

common::identified!(UsearchTarget);

impl VectorTarget for UsearchTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>> {
        Box::pin(async move {
            let mut settings = BTreeMap::new();
            settings.insert(
                "simd_available".into(),
                usearch::hardware_acceleration_available(),
            );
            settings.insert("in_process".into(), "true".into());
            // The index lives in this process: there is no server, disk or host of its own.
            Ok(Described {
                kind: self.identity.kind.clone(),
                version: format!("usearch {}", usearch::version()),
                settings,
                location: Location::Embedded,
                data_dir: None,
            })
        })
    }

    fn offer(&self, variant: Variant) -> Result<String, String> {
        Ok(match variant {
            Variant::F32 => "f32 vectors".into(),
            Variant::Int8 => "i8 scalar quantization; no rescoring (usearch has none)".into(),
            Variant::Binary => {
                "1 bit per dimension (sign bits packed by vector-bench), Hamming distance; no rescoring (usearch has none)"
                    .into()
            }
        })
    }

    fn check<'a>(&'a mut self, _spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        // In-process: there is no namespace to collide with.
        Box::pin(async { Ok(()) })
    }

    fn build<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        data: &'a Arc<Dataset>,
        _batch: usize,
        progress: &'a BuildProgress,
    ) -> BoxFuture<'a, Result<BuildReport, TargetError>> {
        Box::pin(async move {
            self.index = None;
            let index =
                Index::new(&Self::options(spec)).map_err(|e| self.identity.query_error(e))?;
            let threads = cores();
            index
                .reserve_capacity_and_threads(data.rows(), SEARCH_CONTEXTS.max(threads))
                .map_err(|e| self.identity.query_error(e))?;
            let began = Instant::now();
            let binary = spec.variant == Variant::Binary;
            let failure =
                tokio::task::block_in_place(|| add_all(&index, data, binary, threads, progress));
            if let Some(message) = failure {
                return Err(self.identity.query_error(message));
            }
            let insert_s = began.elapsed().as_secs_f64();
            let mut bits = Vec::new();
            sign_bits(data.query(0), &mut bits);
            let probe = if binary {
                index.search(b1x8::from_u8s(&bits), 1)
            } else {
                index.search(data.query(0), 1)
            }
            .map_err(|e| self.identity.query_error(e))?;
            if probe.keys.is_empty() {
                return Err(self
                    .identity
                    .query_error("the index returned nothing after every row was added"));
            }
            let build_s = began.elapsed().as_secs_f64();
            let index_bytes = Some(index.memory_usage() as u64);
            self.categories = Some(data.categories.clone().into());
            self.index = Some(Arc::new(index));
            self.binary = binary;
            Ok(BuildReport {
                insert_s,
                build_s,
                method: format!(
                    "add() on {threads} threads; inserting is building (the graph is complete when the last add returns)"
                ),
                index_bytes,
            })
        })
    }

    fn verify<'a>(
        &'a mut self,
        _spec: &'a IndexSpec,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let index = self
                .index
                .as_ref()
                .ok_or_else(|| self.identity.query_error("no index built"))?;
            let mut out = BTreeMap::new();
            out.insert("m".into(), index.connectivity().to_string());
            out.insert("ef_construction".into(), index.expansion_add().to_string());
            out.insert("dimensions".into(), index.dimensions().to_string());
            out.insert("rows".into(), index.size().to_string());
            out.insert("metric".into(), format!("{:?}", index.metric_kind()));
            out.insert("scalar".into(), format!("{:?}", index.scalar_kind()));
            out.insert("simd".into(), index.hardware_acceleration());
            out.insert(
                "payload_index".into(),
                "in-memory category array read by the filter predicate".into(),
            );
            Ok(out)
        })
    }

    fn searchers<'a>(
        &'a mut self,
        _spec: &'a IndexSpec,
        sessions: usize,
        _mode: &'a Mode,
    ) -> BoxFuture<'a, Result<Opened, TargetError>> {
        Box::pin(async move {
            let (Some(index), Some(categories)) = (self.index.clone(), self.categories.clone())
            else {
                return Err(self.identity.query_error("no index built"));
            };
            let binary = self.binary;
            let connect: Connector<UsearchSession> = Arc::new(move || {
                let session = UsearchSession {
                    index: index.clone(),
                    categories: categories.clone(),
                    binary_queries: binary.then(|| Arc::new(Vec::new())),
                };
                Box::pin(async move { Ok(session) })
            });
            let searchers = crate::session::open_blocking(sessions, connect).await?;
            Ok((searchers, BTreeMap::new()))
        })
    }

    fn drop_index<'a>(
        &'a mut self,
        _spec: &'a IndexSpec,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        self.index = None;
        self.categories = None;
        Box::pin(async { Ok(()) })
    }
}

/// Adds every row on `threads` threads, each a contiguous range; returns the first failure.
fn add_all(
    index: &Index,
    data: &Dataset,
    binary: bool,
    threads: usize,
    progress: &BuildProgress,
) -> Option<String> {
    let rows = data.rows();
    let per_thread = rows.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..rows)
            .step_by(per_thread)
            .map(|start| {
                scope.spawn(move || {
                    let end = (start + per_thread).min(rows);
                    let mut pending = 0;
                    let mut bits = Vec::new();
                    for id in start..end {
                        let added = if binary {
                            sign_bits(data.row(id), &mut bits);
                            index.add(id as u64, b1x8::from_u8s(&bits))
                        } else {
                            index.add(id as u64, data.row(id))
                        };
                        if let Err(e) = added {
                            return Some(format!("adding row {id} failed: {e}"));
                        }
                        pending += 1;
                        if pending == 1024 {
                            if let Err(stopped) = progress.sent(pending) {
                                return Some(stopped);
                            }
                            pending = 0;
                        }
                    }
                    progress.sent(pending).err()
                })
            })
            .collect();
        handles.into_iter().find_map(|h| {
            h.join()
                .unwrap_or_else(|_| Some("an add thread panicked".into()))
        })
    })
}

/// A search session: the shared index and the category of every row.
pub struct UsearchSession {
    index: Arc<Index>,
    categories: Arc<[u8]>,
    /// For a binary index: every query's sign bits, packed before the clock starts.
    binary_queries: Option<Arc<Vec<u8>>>,
}

impl BlockingSearchSession for UsearchSession {
    fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        // ef is a property of the index, not of a session: every session sees the change.
        self.index.change_expansion_search(work.ef);
        if self.binary_queries.is_some() {
            let mut packed = Vec::new();
            let mut bits = Vec::new();
            for q in 0..work.query_count() {
                sign_bits(work.data.query(q), &mut bits);
                packed.extend_from_slice(&bits);
            }
            self.binary_queries = Some(Arc::new(packed));
        }
        Ok(self.index.expansion_search().to_string())
    }

    #[inline]
    fn search(&mut self, work: &Work, query: usize, out: &mut Vec<u64>) -> Result<(), OpError> {
        let categories = &self.categories;
        let wanted = work.category;
        let keep = |key: u64| wanted.is_none_or(|c| categories.get(key as usize) == Some(&c));
        let matches = match &self.binary_queries {
            Some(packed) => {
                let bytes = work.data.dims.div_ceil(8);
                let bits = b1x8::from_u8s(&packed[query * bytes..(query + 1) * bytes]);
                match wanted {
                    None => self.index.search(bits, work.k),
                    Some(_) => self.index.filtered_search(bits, work.k, keep),
                }
            }
            None => {
                let vector = work.data.query(query);
                match wanted {
                    None => self.index.search(vector, work.k),
                    Some(_) => self.index.filtered_search(vector, work.k, keep),
                }
            }
        }
        .map_err(failed)?;
        out.clear();
        out.extend_from_slice(&matches.keys);
        Ok(())
    }
}
