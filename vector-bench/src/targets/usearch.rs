//! usearch, the embedded default: an in-process HNSW index (C++ through the `usearch` crate),
//! built on every core, searched by one OS thread per worker; filtered search goes through its
//! predicate API, which checks each candidate's category during the traversal. L2 rows of the
//! int8 variant are quantized here (usearch's own cast is for cosine only; see [`I8Scaling`]).

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
    /// For an int8 index of L2 rows: how vector-bench quantized them (and quantizes queries).
    scaling: Option<I8Scaling>,
}

/// How vector-bench quantizes L2 rows (and queries) to i8 for usearch. usearch's own f32→i8
/// cast scales each vector to unit length and then by 127, which its README calls valid for
/// cosine-like metrics only: on L2 rows it ranks by angle, not distance (recall 0.65 against
/// 1.00 for f32 on pixel-like rows of 0–16). usearch takes i8 vectors as they are, so its users
/// quantize such data themselves; this does it with one offset and one scale for every
/// component (a shared affine map keeps the L2 order, up to rounding; a scale per dimension
/// would weigh dimensions differently), calibrated on the full range of the base rows, as the
/// qdrant-edge target's scalar quantization is (quantile none). A query outside that range is
/// clamped to ±127.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct I8Scaling {
    /// Subtracted from every component: the middle of the base rows' range.
    pub offset: f32,
    /// Multiplies every component after the offset: 127 / half the range.
    pub scale: f32,
}

impl I8Scaling {
    /// Calibrates on `base` (every component of every row).
    pub fn calibrate(base: &[f32]) -> I8Scaling {
        let (low, high) = base
            .iter()
            .filter(|x| x.is_finite())
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), x| {
                (l.min(*x), h.max(*x))
            });
        if low > high {
            return I8Scaling {
                offset: 0.0,
                scale: 1.0,
            };
        }
        let half = (f64::from(high) - f64::from(low)) / 2.0;
        I8Scaling {
            offset: (f64::from(low) + half) as f32,
            scale: if half > 0.0 {
                (127.0 / half) as f32
            } else {
                1.0
            },
        }
    }

    /// `vector` as i8, into `out` (cleared first; no allocation once it has the capacity).
    #[inline]
    pub fn quantize(&self, vector: &[f32], out: &mut Vec<i8>) {
        out.clear();
        out.extend(vector.iter().map(|x| {
            ((x - self.offset) * self.scale)
                .round()
                .clamp(-127.0, 127.0) as i8
        }));
    }

    /// What the report says about it.
    fn describe(&self) -> String {
        format!(
            "by vector-bench: i8 = round((x − {}) × {}), one offset and scale for every component from the base rows' range (usearch's own cast scales each vector to unit length: for cosine only)",
            self.offset, self.scale
        )
    }
}

/// Reused by one thread or session, so that no add or search allocates.
#[derive(Default)]
struct Buffers {
    bits: Vec<u8>,
    i8: Vec<i8>,
}

/// What one row or query becomes before usearch sees it.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    /// As it is: f32, or cast by usearch itself (int8 of unit-length cosine rows).
    AsIs,
    /// Sign bits for the Hamming index.
    Binary,
    /// Quantized by vector-bench (int8 of L2 rows).
    I8(I8Scaling),
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
            scaling: None,
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
            Variant::Int8 => {
                "i8 scalar quantization; no rescoring (usearch has none); cosine rows cast by usearch (unit length × 127), L2 rows scaled by vector-bench (one offset and scale from the base rows' range: `int8.quantized` in the verified settings)"
                    .into()
            }
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
            // Calibrating is part of the build, as a quantizing engine's own is.
            let scaling = (spec.variant == Variant::Int8 && spec.metric == Metric::L2)
                .then(|| I8Scaling::calibrate(&data.base));
            let encoding = match scaling {
                Some(scaling) => Encoding::I8(scaling),
                None if binary => Encoding::Binary,
                None => Encoding::AsIs,
            };
            let failure =
                tokio::task::block_in_place(|| add_all(&index, data, encoding, threads, progress));
            if let Some(message) = failure {
                return Err(self.identity.query_error(message));
            }
            let insert_s = began.elapsed().as_secs_f64();
            let mut buffers = Buffers::default();
            let probe = match encoding {
                Encoding::AsIs => index.search(data.query(0), 1),
                Encoding::Binary => {
                    sign_bits(data.query(0), &mut buffers.bits);
                    index.search(b1x8::from_u8s(&buffers.bits), 1)
                }
                Encoding::I8(scaling) => {
                    scaling.quantize(data.query(0), &mut buffers.i8);
                    index.search(buffers.i8.as_slice(), 1)
                }
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
            self.scaling = scaling;
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
            if index.scalar_kind() == ScalarKind::I8 {
                let how = self.scaling.map_or_else(
                    || "by usearch: each vector at unit length × 127 (the rows are unit length for cosine)".to_owned(),
                    |s| s.describe(),
                );
                out.insert("quantized".into(), how);
            }
            if let Some(scaling) = self.scaling {
                out.insert("i8_offset".into(), scaling.offset.to_string());
                out.insert("i8_scale".into(), scaling.scale.to_string());
            }
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
            let (binary, scaling) = (self.binary, self.scaling);
            let connect: Connector<UsearchSession> = Arc::new(move || {
                let session = UsearchSession {
                    index: index.clone(),
                    categories: categories.clone(),
                    binary_queries: binary.then(|| Arc::new(Vec::new())),
                    scaling,
                    query_i8: Vec::new(),
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
        self.scaling = None;
        Box::pin(async { Ok(()) })
    }
}

/// Adds every row on `threads` threads, each a contiguous range; returns the first failure.
fn add_all(
    index: &Index,
    data: &Dataset,
    encoding: Encoding,
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
                    let mut buffers = Buffers::default();
                    for id in start..end {
                        let (key, row) = (id as u64, data.row(id));
                        let added = match encoding {
                            Encoding::AsIs => index.add(key, row),
                            Encoding::Binary => {
                                sign_bits(row, &mut buffers.bits);
                                index.add(key, b1x8::from_u8s(&buffers.bits))
                            }
                            Encoding::I8(scaling) => {
                                scaling.quantize(row, &mut buffers.i8);
                                index.add(key, buffers.i8.as_slice())
                            }
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
    /// For an int8 index of L2 rows: each query is quantized as the rows were, in the search
    /// call (usearch quantizes a cosine query inside its own).
    scaling: Option<I8Scaling>,
    query_i8: Vec<i8>,
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
                match self.scaling {
                    Some(scaling) => {
                        scaling.quantize(vector, &mut self.query_i8);
                        let quantized = self.query_i8.as_slice();
                        match wanted {
                            None => self.index.search(quantized, work.k),
                            Some(_) => self.index.filtered_search(quantized, work.k, keep),
                        }
                    }
                    None => match wanted {
                        None => self.index.search(vector, work.k),
                        Some(_) => self.index.filtered_search(vector, work.k, keep),
                    },
                }
            }
        }
        .map_err(failed)?;
        out.clear();
        out.extend_from_slice(&matches.keys);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_rows_are_scaled_into_the_i8_range_by_one_offset_and_scale() {
        // Pixel-like rows of 0–16: the middle goes to 0, the ends to ±127.
        let base = [0.0, 16.0, 4.0, 8.0, 12.0, 3.0];
        let scaling = I8Scaling::calibrate(&base);
        assert_eq!(scaling.offset, 8.0);
        assert_eq!(scaling.scale, 127.0 / 8.0);
        let mut out = Vec::new();
        scaling.quantize(&base, &mut out);
        assert_eq!(out, vec![-127, 127, -64, 0, 64, -79]);
        // A query beyond the base rows' range is clamped.
        scaling.quantize(&[-40.0, 90.0], &mut out);
        assert_eq!(out, vec![-127, 127]);
        // The L2 order of rows survives: one map for every component.
        let (a, b, q) = ([1.0, 2.0, 15.0], [2.0, 2.0, 13.0], [1.0, 2.0, 14.0]);
        let l2 = |x: &[i8], y: &[i8]| -> i32 {
            x.iter()
                .zip(y)
                .map(|(p, r)| (i32::from(*p) - i32::from(*r)).pow(2))
                .sum()
        };
        let (mut qa, mut qb, mut qq) = (Vec::new(), Vec::new(), Vec::new());
        scaling.quantize(&a, &mut qa);
        scaling.quantize(&b, &mut qb);
        scaling.quantize(&q, &mut qq);
        assert!(l2(&qq, &qa) < l2(&qq, &qb));
        // Degenerate data does not divide by zero.
        assert_eq!(I8Scaling::calibrate(&[3.0, 3.0]).scale, 1.0);
        assert_eq!(I8Scaling::calibrate(&[]).offset, 0.0);
    }
}
