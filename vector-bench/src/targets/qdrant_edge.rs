//! Qdrant's own engine in process (`qdrant-edge`: Qdrant's segment, HNSW, payload index and
//! quantization code as a library): one shard in the results folder with the same m,
//! ef_construction, distance and full-scan threshold as every target (0: the graph is always
//! searched), the integer payload index on the category created before the index is built,
//! the rows upserted, then `optimize()` until every vector is HNSW-indexed; `hnsw_ef` per
//! request, the filter as a `must` match. Scalar int8 and binary quantization are measured
//! without rescoring and, as the `+rescore` lane, rescored with the original vectors at
//! oversampling 2 (rescoring without oversampling returns the same points). Not the Qdrant
//! server: no network, no gRPC.
//!
//! Traps of this engine the target avoids, each found by measuring: a segment smaller than
//! `indexing_threshold` (default 10,000 KB) is never indexed, so every "HNSW" search would be
//! an exact scan (it is set to 1 KB); `full_scan_threshold` is in KB, not points; an `hnsw_ef`
//! below k is silently raised to k (refused here); a payload index made after the build gives
//! the graph no per-category links.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use qdrant_edge::external::serde_json as qjson;
use qdrant_edge::{
    BinaryQuantizationConfig, Condition, CreateIndex, Distance, EdgeConfig, EdgeOptimizersConfig,
    EdgeShard, EdgeVectorParams, FieldCondition, FieldIndexOperations, Filter, HnswIndexConfig,
    JsonPath, Match, NamedQuery, Payload, PayloadFieldSchema, PayloadSchemaType, PointId,
    PointInsertOperations, PointOperations, PointStructPersisted, QuantizationConfig,
    QuantizationSearchParams, QueryEnum, ScalarQuantizationConfig, ScalarType, SearchParams,
    SearchRequest, UpdateOperation, ValueVariants, VectorStructPersisted,
};

use super::{
    BuildProgress, BuildReport, Described, Identity, Mode, Opened, QDRANT_EDGE_LABEL, TargetError,
    VectorTarget,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{BlockingSearchSession, Work};

const CATEGORY: &str = "category";
/// Candidates rescored per neighbour in the `+rescore` lane.
const OVERSAMPLING: f64 = 2.0;

pub struct QdrantEdgeTarget {
    identity: Identity,
    /// `<results>/qdrant-edge`: one shard folder per variant.
    root: PathBuf,
    shard: Option<Arc<EdgeShard>>,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The f32 distance kernel Qdrant picks at run time on this CPU (its own checks, repeated).
fn kernel() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("fma")
        {
            return "f32: AVX+FMA (runtime detected); int8/binary: C kernels built for haswell"
                .into();
        }
        if std::arch::is_x86_feature_detected!("sse4.1") {
            return "f32: SSE (runtime detected)".into();
        }
    }
    #[cfg(target_arch = "aarch64")]
    return "f32: NEON".into();
    #[allow(unreachable_code)]
    "scalar".into()
}

impl QdrantEdgeTarget {
    pub fn open(spec: &TargetSpec, results_dir: &Path) -> Result<QdrantEdgeTarget, TargetError> {
        let identity = Identity::of(spec, "qdrant-edge");
        if spec.url != "qdrant-edge" {
            return Err(TargetError::Url {
                url: spec.url_redacted(),
                message: "write it as `qdrant-edge` (the shard lives in the results folder)".into(),
            });
        }
        Ok(QdrantEdgeTarget {
            identity,
            root: results_dir.join("qdrant-edge"),
            shard: None,
        })
    }

    fn shard(&self) -> Result<&Arc<EdgeShard>, TargetError> {
        self.shard
            .as_ref()
            .ok_or_else(|| self.identity.query_error("no shard built"))
    }

    fn config(spec: &IndexSpec) -> EdgeConfig {
        let distance = match spec.metric {
            Metric::Cosine => Distance::Cosine,
            Metric::L2 => Distance::Euclid,
        };
        let hnsw = HnswIndexConfig {
            m: spec.m,
            ef_construct: spec.ef_construction,
            // 0 KB: every search walks the graph, as on every other target.
            full_scan_threshold: 0,
            max_indexing_threads: cores(),
            on_disk: Some(false),
            payload_m: None,
            inline_storage: None,
        };
        let optimizers = EdgeOptimizersConfig {
            // 1 KB: index every segment whatever its size (the default leaves small ones plain).
            indexing_threshold: Some(1),
            ..EdgeOptimizersConfig::default()
        };
        let mut builder = EdgeConfig::builder()
            .vector("", EdgeVectorParams::builder(spec.dims, distance).build())
            .hnsw_config(hnsw)
            .optimizers(optimizers)
            .on_disk_payload(false);
        match spec.variant {
            Variant::F32 => {}
            Variant::Int8 => {
                builder = builder.quantization_config(QuantizationConfig::from(
                    ScalarQuantizationConfig {
                        r#type: ScalarType::Int8,
                        quantile: None,
                        always_ram: Some(true),
                    },
                ));
            }
            Variant::Binary => {
                builder = builder.quantization_config(QuantizationConfig::from(
                    BinaryQuantizationConfig {
                        always_ram: Some(true),
                        encoding: None,
                        query_encoding: None,
                    },
                ));
            }
        }
        builder.build()
    }
}

/// Upserts every row with its category, `batch` at a time.
fn upsert_all(
    shard: &EdgeShard,
    data: &Dataset,
    batch: usize,
    progress: &BuildProgress,
) -> Result<(), String> {
    for start in (0..data.rows()).step_by(batch.max(1)) {
        let end = (start + batch.max(1)).min(data.rows());
        let points = (start..end)
            .map(|id| {
                let payload = qjson::json!({ CATEGORY: data.categories[id] });
                PointStructPersisted {
                    id: PointId::NumId(id as u64),
                    vector: VectorStructPersisted::Single(data.row(id).to_vec()),
                    payload: payload.as_object().cloned().map(Payload),
                }
            })
            .collect();
        shard
            .update(UpdateOperation::PointOperation(
                PointOperations::UpsertPoints(PointInsertOperations::PointsList(points)),
            ))
            .map_err(|e| format!("upserting rows {start}..{end}: {e}"))?;
        progress.sent((end - start) as u64)?;
    }
    Ok(())
}

fn category_filter(category: u8) -> Filter {
    Filter::new_must(Condition::Field(FieldCondition::new_match(
        JsonPath::try_from(CATEGORY).expect("a valid path"),
        Match::new_value(ValueVariants::Integer(i64::from(category))),
    )))
}

/// Creates the shard, its payload index, the rows, and the HNSW index; returns the seconds
/// until every row was upserted.
fn build_shard(
    dir: &Path,
    spec: &IndexSpec,
    data: &Dataset,
    batch: usize,
    progress: &BuildProgress,
) -> Result<(EdgeShard, f64), String> {
    let shard = EdgeShard::new(dir, QdrantEdgeTarget::config(spec)).map_err(|e| e.to_string())?;
    // Before the build, so the graph gets its per-category links.
    shard
        .update(UpdateOperation::FieldIndexOperation(
            FieldIndexOperations::CreateIndex(CreateIndex {
                field_name: JsonPath::try_from(CATEGORY).expect("a valid path"),
                field_schema: Some(PayloadFieldSchema::FieldType(PayloadSchemaType::Integer)),
            }),
        ))
        .map_err(|e| format!("creating the payload index: {e}"))?;
    let began = Instant::now();
    upsert_all(&shard, data, batch, progress)?;
    let insert_s = began.elapsed().as_secs_f64();
    shard
        .optimize()
        .map_err(|e| format!("optimize (building the HNSW index): {e}"))?;
    let indexed = shard.info().indexed_vectors_count;
    if indexed < data.rows() {
        return Err(format!(
            "optimize left {indexed} of {} vectors HNSW-indexed",
            data.rows()
        ));
    }
    Ok((shard, insert_s))
}

/// The index type of every segment that holds points, from its `segment.json` (what was built).
fn segment_indexes(dir: &Path) -> String {
    let mut kinds = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("segments")) else {
        return "unreadable".into();
    };
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("segment.json")) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        // `{"version": …, "config": {"vector_data": {"": {"index": {"type": …}}}}}`.
        if let Some(kind) = json["config"]["vector_data"][""]["index"]["type"].as_str() {
            kinds.push(kind.to_owned());
        }
    }
    kinds.sort();
    kinds.join(", ")
}

common::identified!(QdrantEdgeTarget);

impl VectorTarget for QdrantEdgeTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>> {
        Box::pin(async move {
            let mut settings = BTreeMap::new();
            settings.insert("engine".into(), QDRANT_EDGE_LABEL.into());
            settings.insert("kernel".into(), kernel());
            settings.insert("in_process".into(), "true".into());
            settings.insert("build_threads".into(), cores().to_string());
            Ok(Described {
                kind: self.identity.kind.clone(),
                version: format!(
                    "qdrant-edge {} (Qdrant's engine in process)",
                    env!("QDRANT_EDGE_VERSION")
                ),
                settings,
                location: Location::Embedded,
                data_dir: None,
            })
        })
    }

    fn offer(&self, variant: Variant) -> Result<String, String> {
        Ok(match variant {
            Variant::F32 => "f32 vectors, HNSW".into(),
            Variant::Int8 => format!(
                "scalar int8 quantization (in RAM), without rescoring; +rescore: rescored with the original vectors at oversampling {OVERSAMPLING}"
            ),
            Variant::Binary => format!(
                "binary quantization (in RAM), without rescoring; +rescore: rescored with the original vectors at oversampling {OVERSAMPLING}"
            ),
        })
    }

    fn check<'a>(&'a mut self, _spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        // Its shards live in this run's own results folder: nothing to collide with.
        Box::pin(async { Ok(()) })
    }

    fn build<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        data: &'a Arc<Dataset>,
        batch: usize,
        progress: &'a BuildProgress,
    ) -> BoxFuture<'a, Result<BuildReport, TargetError>> {
        Box::pin(async move {
            self.shard = None;
            let dir = self.root.join(spec.collection());
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)
                .map_err(|e| self.identity.query_error(format!("{}: {e}", dir.display())))?;
            let began = Instant::now();
            let (shard, insert_s) =
                tokio::task::block_in_place(|| build_shard(&dir, spec, data, batch, progress))
                    .map_err(|e| self.identity.query_error(e))?;
            let probe = shard
                .search(SearchRequest {
                    query: QueryEnum::Nearest(NamedQuery {
                        query: data.query(0).to_vec().into(),
                        using: None,
                    }),
                    filter: None,
                    params: None,
                    limit: 1,
                    offset: 0,
                    with_payload: None,
                    with_vector: None,
                    score_threshold: None,
                })
                .map_err(|e| self.identity.query_error(e))?;
            if probe.is_empty() {
                return Err(self
                    .identity
                    .query_error("the shard returned nothing after the build"));
            }
            let build_s = began.elapsed().as_secs_f64();
            self.shard = Some(Arc::new(shard));
            Ok(BuildReport {
                insert_s,
                build_s,
                method: format!(
                    "payload index, upsert in batches, then optimize() until every vector is HNSW-indexed ({} build threads)",
                    cores()
                ),
                index_bytes: None,
            })
        })
    }

    fn verify<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let shard = self.shard()?;
            let mut out = BTreeMap::new();
            {
                let config = shard.config();
                let hnsw = &config.hnsw_config;
                out.insert("m".into(), hnsw.m.to_string());
                out.insert("ef_construction".into(), hnsw.ef_construct.to_string());
                out.insert(
                    "full_scan_threshold_kb".into(),
                    hnsw.full_scan_threshold.to_string(),
                );
                out.insert(
                    "max_indexing_threads".into(),
                    hnsw.max_indexing_threads.to_string(),
                );
                if let Some(vector) = config.vectors.get("") {
                    out.insert("dimensions".into(), vector.size.to_string());
                    out.insert("distance".into(), format!("{:?}", vector.distance));
                }
                out.insert(
                    "quantization".into(),
                    config
                        .quantization_config
                        .as_ref()
                        .and_then(|q| qjson::to_string(q).ok())
                        .unwrap_or_else(|| "none".into()),
                );
                out.insert(
                    "indexing_threshold_kb".into(),
                    config
                        .optimizers
                        .indexing_threshold
                        .map_or("default".into(), |t| t.to_string()),
                );
            }
            let info = shard.info();
            out.insert("rows".into(), info.points_count.to_string());
            out.insert(
                "indexed_vectors".into(),
                info.indexed_vectors_count.to_string(),
            );
            out.insert("segments".into(), info.segments_count.to_string());
            let payload = info
                .payload_schema
                .iter()
                .map(|(key, index)| {
                    format!("{key}: {:?} ({} points)", index.data_type, index.points)
                })
                .collect::<Vec<_>>()
                .join(", ");
            out.insert("payload_index".into(), payload);
            out.insert(
                "segment_indexes".into(),
                segment_indexes(&self.root.join(spec.collection())),
            );
            Ok(out)
        })
    }

    fn modes(&self) -> Vec<Mode> {
        vec![
            Mode::default(),
            Mode {
                suffix: "rescore".into(),
                description: format!(
                    "quantized search rescored with the original vectors (rescore = true, oversampling = {OVERSAMPLING})"
                ),
                variants: vec![Variant::Int8, Variant::Binary],
                filtered_only: false,
            },
        ]
    }

    fn searchers<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        sessions: usize,
        mode: &'a Mode,
    ) -> BoxFuture<'a, Result<Opened, TargetError>> {
        Box::pin(async move {
            let shard = self.shard()?.clone();
            let quantization = (spec.variant != Variant::F32).then(|| {
                let rescore = !mode.suffix.is_empty();
                QuantizationSearchParams {
                    ignore: false,
                    rescore: Some(rescore),
                    oversampling: rescore.then_some(OVERSAMPLING),
                }
            });
            let mut settings = BTreeMap::new();
            settings.insert(
                "search_params".into(),
                match &quantization {
                    Some(q) => qjson::to_string(q).unwrap_or_default(),
                    None => "hnsw_ef per request".into(),
                },
            );
            let connect: Connector<EdgeSession> = Arc::new(move || {
                let session = EdgeSession {
                    shard: shard.clone(),
                    quantization,
                    ef: 0,
                    filter: None,
                };
                Box::pin(async move { Ok(session) })
            });
            let searchers = crate::session::open_blocking(sessions, connect).await?;
            Ok((searchers, settings))
        })
    }

    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        self.shard = None;
        let dir = self.root.join(spec.collection());
        Box::pin(async move {
            std::fs::remove_dir_all(&dir)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| TargetError::Other(format!("removing {}: {e}", dir.display())))
        })
    }
}

/// A search thread: the shared shard, the point's ef and filter.
pub struct EdgeSession {
    shard: Arc<EdgeShard>,
    quantization: Option<QuantizationSearchParams>,
    ef: usize,
    filter: Option<Filter>,
}

impl BlockingSearchSession for EdgeSession {
    fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        // Qdrant searches with max(hnsw_ef, k) and says nothing: an ef below k is not that ef.
        if work.ef < work.k {
            return Err(format!(
                "hnsw_ef {} is below k {}: qdrant-edge would search with ef {} instead",
                work.ef, work.k, work.k
            ));
        }
        self.ef = work.ef;
        self.filter = work.category.map(category_filter);
        Ok(self.ef.to_string())
    }

    fn search(&mut self, work: &Work, query: usize, out: &mut Vec<u64>) -> Result<(), OpError> {
        let request = SearchRequest {
            // The API takes the vector by value: one copy per request.
            query: QueryEnum::Nearest(NamedQuery {
                query: work.data.query(query).to_vec().into(),
                using: None,
            }),
            filter: self.filter.clone(),
            params: Some(SearchParams {
                hnsw_ef: Some(self.ef),
                exact: false,
                quantization: self.quantization,
                indexed_only: false,
                acorn: None,
            }),
            limit: work.k,
            offset: 0,
            with_payload: None,
            with_vector: None,
            score_threshold: None,
        };
        let points = self.shard.search(request).map_err(failed)?;
        out.clear();
        out.extend(points.iter().map(|p| match p.id {
            PointId::NumId(n) => n,
            PointId::Uuid(_) => u64::MAX,
        }));
        Ok(())
    }
}
