//! Qdrant through `qdrant-client` (gRPC): a collection with the same HNSW m/ef_construct, full
//! scans disabled so every search walks the graph, an integer payload index on the category,
//! quantization (int8 scalar, binary) with rescoring on, `hnsw_ef` per request, the filter as a
//! `must` condition. The build waits until every vector is indexed and the collection is green.
//!
//! Bounds ([`Bounds`]), as Chroma's: a session's channel has no timeout of its own (`--ceiling`
//! bounds a search: the pass and the window drop it there, the gRPC request with it, and count
//! a timeout); the control path's requests time out at the larger of `--ceiling` and
//! `--build-ceiling`; a build as a whole, its wait for the optimizer too, stops at
//! `--build-ceiling` and is a `timeout`.
//!
//! TLS (`sslmode=verify-full`: gRPC over https) is what `qdrant-client` offers: its channel
//! always verifies the certificate and the host name against the system's roots (which
//! `SSL_CERT_FILE` can point at a private CA) and takes no CA file and no way to skip the
//! check, so a weaker mode, a CA file or `--insecure-skip-verify` is refused in one line rather
//! than quietly verified otherwise than asked. A probe handshake in the connect phase records
//! the version, cipher and handshake time the client hides. The API key (`api_key=` in the URL
//! or `FAIRBENCH_API_KEY_<NAME>`) goes with every request.
//!
//! Written against the client's documented API; no Qdrant server can be installed on the
//! machine this was developed on, so its test runs only when `QDRANT_URL` is set.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::credentials::Secret;
use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::reach::TlsState;
use common::tls::{Endpoint, Mode as TlsMode, NAME_THE_CA, TlsSettings};
use qdrant_client::Qdrant;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::quantization_config::Quantization;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    BinaryQuantizationBuilder, CollectionStatus, Condition, CreateCollectionBuilder,
    CreateFieldIndexCollectionBuilder, Distance, FieldType, Filter, HnswConfigDiffBuilder,
    OptimizersConfigDiffBuilder, PointStruct, QuantizationSearchParamsBuilder, QueryPointsBuilder,
    ScalarQuantizationBuilder, SearchParamsBuilder, UpsertPointsBuilder, VectorParamsBuilder,
};

use super::{
    BUILD_FLAG, BUILD_PHASE, Bounds, BuildProgress, BuildReport, Described, Identity, Mode, Opened,
    Reach, TargetError, VectorTarget, check_dimensions, location_of_url,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{SearchSession, Work};

const CATEGORY: &str = "category";

/// The gRPC port of a Qdrant server.
const DEFAULT_PORT: u16 = 6334;

pub struct QdrantTarget {
    identity: Identity,
    access: Access,
    tls: TlsState,
    client: Qdrant,
}

/// How every channel reaches the server: `http://` or `https://` with the host and port, and
/// the API key.
#[derive(Clone)]
struct Access {
    url: String,
    api_key: Option<Secret>,
}

/// A client whose every request may take up to `timeout` (`Duration::MAX`: as long as the
/// caller lets it run).
fn client(access: &Access, timeout: Duration) -> Result<Qdrant, String> {
    // No compatibility check: it prints to stdout when it cannot ask, and the connect phase
    // reads the server's version anyway.
    let mut config = Qdrant::from_url(&access.url)
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .skip_compatibility_check();
    if let Some(key) = &access.api_key {
        config = config.api_key(key.expose());
    }
    config.build().map_err(|e| e.to_string())
}

/// What `qdrant-client` cannot do as `settings` ask, in one line; `None` when it can.
fn unsupported_tls(settings: &TlsSettings) -> Option<String> {
    if !settings.uses_tls() {
        return None;
    }
    const CLIENT: &str = "qdrant-client verifies every https connection against the system's \
                          roots, with the host name";
    if settings.insecure_skip_verify {
        return Some(format!("--insecure-skip-verify cannot apply: {CLIENT}"));
    }
    if let Some(path) = &settings.ca_file {
        return Some(format!(
            "a CA file ({}) cannot be handed to the client: {CLIENT}; point SSL_CERT_FILE at \
             the CA bundle instead and drop the parameter",
            path.display()
        ));
    }
    if settings.mode != TlsMode::VerifyFull {
        return Some(format!(
            "{} asks for less than the client checks: {CLIENT}; use sslmode=verify-full",
            settings.mode_source
        ));
    }
    None
}

impl QdrantTarget {
    /// `qdrant://HOST:PORT` (the gRPC port), plaintext unless `sslmode=verify-full` asks for
    /// https.
    pub async fn open(
        spec: &TargetSpec,
        reach: &Reach,
        bounds: Bounds,
    ) -> Result<Box<dyn VectorTarget>, TargetError> {
        let settings = reach.tls(spec)?;
        if let Some(why) = unsupported_tls(&settings) {
            return Err(TargetError::Url {
                url: spec.url_redacted(),
                message: why,
            });
        }
        let endpoint = Endpoint::from_url(&spec.url, Some(DEFAULT_PORT))?;
        let tls = TlsState::probe(settings.clone(), &spec.url, Some(DEFAULT_PORT))
            .await
            .map_err(|e| match e {
                TargetError::Other(why) => TargetError::Other(why.replace(
                    NAME_THE_CA,
                    "qdrant-client trusts only the system's roots: point SSL_CERT_FILE at \
                     the CA that signed it",
                )),
                other => other,
            })?;
        let scheme = if settings.uses_tls() { "https" } else { "http" };
        let access = Access {
            url: format!("{scheme}://{endpoint}"),
            api_key: reach.secrets.api_key(spec).map(|(key, _)| key),
        };
        let identity = Identity::of(spec, "qdrant");
        let connect_error = |message: String| identity.connect_error(message);
        let client = client(&access, bounds.request()).map_err(connect_error)?;
        client.health_check().await.map_err(|e| {
            connect_error(format!(
                "{e} — is the server running, and is this its gRPC port?"
            ))
        })?;
        Ok(Box::new(QdrantTarget {
            identity,
            access,
            tls,
            client,
        }))
    }

    async fn info(
        &self,
        name: &str,
    ) -> Result<Option<qdrant_client::qdrant::CollectionInfo>, TargetError> {
        let exists = self
            .client
            .collection_exists(name)
            .await
            .map_err(|e| self.identity.query_error(e))?;
        if !exists {
            return Ok(None);
        }
        let info = self
            .client
            .collection_info(name)
            .await
            .map_err(|e| self.identity.query_error(e))?;
        Ok(info.result)
    }

    /// Waits until every point is indexed and the optimizer is done, or the build is past
    /// its bound.
    async fn wait_indexed(
        &self,
        name: &str,
        rows: usize,
        progress: &BuildProgress,
    ) -> Result<(), TargetError> {
        loop {
            let info = self.info(name).await?.ok_or_else(|| {
                self.identity
                    .query_error(format!("collection {name} is gone"))
            })?;
            let indexed = info.indexed_vectors_count.unwrap_or(0) as usize;
            if info.status == CollectionStatus::Green as i32 && indexed >= rows {
                return Ok(());
            }
            if let Err(past) = progress.deadline().check(BUILD_PHASE, BUILD_FLAG) {
                return Err(self
                    .identity
                    .query_error(format!("{past}: {indexed} of {rows} vectors indexed")));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn distance(metric: Metric) -> Distance {
    match metric {
        Metric::Cosine => Distance::Cosine,
        Metric::L2 => Distance::Euclid,
    }
}

common::identified!(QdrantTarget);

impl VectorTarget for QdrantTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>> {
        Box::pin(async move {
            let health = self
                .client
                .health_check()
                .await
                .map_err(|e| self.identity.query_error(e))?;
            // gRPC does not say where the server keeps its data.
            Ok(Described {
                kind: self.identity.kind.clone(),
                version: format!("Qdrant {}", health.version),
                settings: BTreeMap::new(),
                location: location_of_url(&self.access.url),
                data_dir: None,
            })
        })
    }

    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
    }

    fn offer(&self, variant: Variant) -> Result<String, String> {
        Ok(match variant {
            Variant::F32 => "f32 vectors, HNSW".into(),
            Variant::Int8 => "scalar int8 quantization, rescore on".into(),
            Variant::Binary => "binary quantization, rescore on".into(),
        })
    }

    fn check<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let name = spec.collection();
            let Some(info) = self.info(&name).await? else {
                return Ok(());
            };
            // Ours: exactly one payload index, on the category (this client build cannot
            // write collection metadata, so the schema is the mark).
            let ours = info.payload_schema.len() == 1 && info.payload_schema.contains_key(CATEGORY);
            if !ours {
                return Err(self.identity.foreign(format!("collection {name}")));
            }
            let size = info
                .config
                .and_then(|c| c.params)
                .and_then(|p| p.vectors_config)
                .and_then(|v| v.config)
                .and_then(|c| match c {
                    VectorsConfigKind::Params(p) => Some(p.size as usize),
                    VectorsConfigKind::ParamsMap(_) => None,
                });
            check_dimensions(
                &self.identity,
                format!("collection {name}"),
                size,
                spec.dims,
            )
        })
    }

    fn build<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        data: &'a Arc<Dataset>,
        batch: usize,
        progress: &'a BuildProgress,
    ) -> BoxFuture<'a, Result<BuildReport, TargetError>> {
        Box::pin(async move {
            self.check(spec).await?;
            let name = spec.collection();
            if self.info(&name).await?.is_some() {
                self.client
                    .delete_collection(name.as_str())
                    .await
                    .map_err(|e| self.identity.query_error(e))?;
            }
            let mut create = CreateCollectionBuilder::new(name.clone())
                .vectors_config(VectorParamsBuilder::new(
                    spec.dims as u64,
                    distance(spec.metric),
                ))
                // full_scan_threshold 0: every search uses the graph, as on the other targets.
                .hnsw_config(
                    HnswConfigDiffBuilder::default()
                        .m(spec.m as u64)
                        .ef_construct(spec.ef_construction as u64)
                        .full_scan_threshold(0),
                )
                // Index every segment whatever its size (1 KB), so small test sets get a graph.
                .optimizers_config(OptimizersConfigDiffBuilder::default().indexing_threshold(1));
            create = match spec.variant {
                Variant::F32 => create,
                Variant::Int8 => create.quantization_config(Quantization::Scalar(
                    ScalarQuantizationBuilder::default().always_ram(true).into(),
                )),
                Variant::Binary => create.quantization_config(Quantization::Binary(
                    BinaryQuantizationBuilder::new(true).into(),
                )),
            };
            self.client
                .create_collection(create)
                .await
                .map_err(|e| self.identity.query_error(e))?;
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(
                        name.clone(),
                        CATEGORY,
                        FieldType::Integer,
                    )
                    .wait(true),
                )
                .await
                .map_err(|e| self.identity.query_error(e))?;
            let began = Instant::now();
            for start in (0..data.rows()).step_by(batch.max(1)) {
                let end = (start + batch.max(1)).min(data.rows());
                let points: Vec<PointStruct> = (start..end)
                    .map(|id| {
                        PointStruct::new(
                            id as u64,
                            data.row(id).to_vec(),
                            [(CATEGORY, i64::from(data.categories[id]).into())],
                        )
                    })
                    .collect();
                self.client
                    .upsert_points(UpsertPointsBuilder::new(name.clone(), points).wait(true))
                    .await
                    .map_err(|e| self.identity.query_error(e))?;
                progress
                    .sent((end - start) as u64)
                    .map_err(|e| self.identity.query_error(e))?;
            }
            let insert_s = began.elapsed().as_secs_f64();
            self.wait_indexed(&name, data.rows(), progress).await?;
            Ok(BuildReport {
                insert_s,
                build_s: began.elapsed().as_secs_f64(),
                method: "upsert (wait = true) in batches, then until every vector is indexed and the collection is green".into(),
                index_bytes: None,
            })
        })
    }

    fn verify<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let name = spec.collection();
            let info = self.info(&name).await?.ok_or_else(|| {
                self.identity
                    .query_error(format!("collection {name} is gone"))
            })?;
            let mut out = BTreeMap::new();
            let config = info.config.clone().unwrap_or_default();
            if let Some(hnsw) = &config.hnsw_config {
                out.insert("m".into(), hnsw.m.map_or("?".into(), |v| v.to_string()));
                out.insert(
                    "ef_construction".into(),
                    hnsw.ef_construct.map_or("?".into(), |v| v.to_string()),
                );
                out.insert(
                    "full_scan_threshold".into(),
                    hnsw.full_scan_threshold
                        .map_or("?".into(), |v| v.to_string()),
                );
            }
            out.insert(
                "quantization".into(),
                match config.quantization_config.and_then(|q| q.quantization) {
                    None => "none".into(),
                    Some(Quantization::Scalar(s)) => format!("scalar (type {})", s.r#type),
                    Some(Quantization::Binary(_)) => "binary".into(),
                    Some(other) => format!("{other:?}"),
                },
            );
            out.insert("rows".into(), info.points_count.unwrap_or(0).to_string());
            out.insert(
                "indexed_vectors".into(),
                info.indexed_vectors_count.unwrap_or(0).to_string(),
            );
            out.insert(
                "payload_index".into(),
                info.payload_schema
                    .get(CATEGORY)
                    .map_or("missing".into(), |s| {
                        format!("category (data type {})", s.data_type)
                    }),
            );
            Ok(out)
        })
    }

    fn searchers<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        sessions: usize,
        _mode: &'a Mode,
    ) -> BoxFuture<'a, Result<Opened, TargetError>> {
        Box::pin(async move {
            let access = self.access.clone();
            let name = spec.collection();
            let quantized = spec.variant != Variant::F32;
            let connect: Connector<QdrantSession> = Arc::new(move || {
                let (access, name) = (access.clone(), name.clone());
                Box::pin(async move {
                    // The ceiling bounds every search from outside.
                    let client = client(&access, Duration::MAX)?;
                    client.health_check().await.map_err(|e| e.to_string())?;
                    Ok(QdrantSession {
                        client,
                        name,
                        quantized,
                        ef: 64,
                    })
                })
            });
            let searchers = crate::session::open_async(sessions, connect).await?;
            Ok((searchers, BTreeMap::new()))
        })
    }

    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.check(spec).await?;
            self.client
                .delete_collection(spec.collection())
                .await
                .map_err(|e| self.identity.query_error(e))?;
            Ok(())
        })
    }
}

/// One gRPC channel; ef travels with every request.
pub struct QdrantSession {
    client: Qdrant,
    name: String,
    quantized: bool,
    ef: usize,
}

impl SearchSession for QdrantSession {
    async fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        // Qdrant takes ef per request (`hnsw_ef`): there is no server state to change or read.
        self.ef = work.ef;
        Ok(work.ef.to_string())
    }

    async fn search(
        &mut self,
        work: &Work,
        query: usize,
        out: &mut Vec<u64>,
    ) -> Result<(), OpError> {
        let mut params = SearchParamsBuilder::default().hnsw_ef(self.ef as u64);
        if self.quantized {
            params = params.quantization(QuantizationSearchParamsBuilder::default().rescore(true));
        }
        let mut request = QueryPointsBuilder::new(self.name.clone())
            .query(work.data.query(query).to_vec())
            .limit(work.k as u64)
            .params(params);
        if let Some(category) = work.category {
            request = request.filter(Filter::must([Condition::matches(
                CATEGORY,
                i64::from(category),
            )]));
        }
        let response = self.client.query(request).await.map_err(failed)?;
        out.clear();
        for point in response.result {
            let id = match point.id.and_then(|id| id.point_id_options) {
                Some(PointIdOptions::Num(n)) => n,
                _ => u64::MAX,
            };
            out.push(id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(url: &str, insecure_skip_verify: bool) -> Option<String> {
        unsupported_tls(&TlsSettings::from_url(url, insecure_skip_verify).unwrap())
    }

    #[test]
    fn only_what_the_client_verifies_is_accepted() {
        assert_eq!(refusal("qdrant://127.0.0.1:6334", false), None);
        assert_eq!(
            refusal("qdrant://q.example:6334?sslmode=verify-full", false),
            None
        );
        for mode in ["require", "verify-ca", "prefer"] {
            let why = refusal(&format!("qdrant://q.example?sslmode={mode}"), false).unwrap();
            assert!(
                why.contains(&format!("sslmode={mode} asks for less")),
                "{why}"
            );
        }
        let why = refusal("qdrant://q.example?sslmode=verify-full", true).unwrap();
        assert!(
            why.starts_with("--insecure-skip-verify cannot apply"),
            "{why}"
        );
        let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/../common/testdata/tls/ca.pem");
        let why = refusal(
            &format!("qdrant://q.example?sslmode=verify-full&cacert={ca}"),
            false,
        )
        .unwrap();
        assert!(
            why.contains("point SSL_CERT_FILE at the CA bundle"),
            "{why}"
        );
    }
}
