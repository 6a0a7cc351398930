//! Weaviate over its REST API (v1) with reqwest (one keep-alive connection per session), plain
//! or https (`sslmode=` and `cacert=` in the URL, verified by default), an API key
//! (`api_key=`, `FAIRBENCH_API_KEY_<NAME>`) sent as `Authorization: Bearer`. A class per build,
//! `vectorizer: none`, an HNSW index with the same m (`maxConnections`), `efConstruction` and
//! distance, `flatSearchCutoff: 0` (a filtered search walks the graph, as Qdrant's
//! `full_scan_threshold 0`; Weaviate's default scans any filter under 40,000 rows), the row id
//! and the category as integer properties, the category filterable. Rows go in through
//! `POST /v1/batch/objects` (each object's result checked), and the build waits until the
//! class counts every row and its shard's vector queue is empty. The int8 variant is Weaviate's
//! rotational quantization at 8 bits (`rq`), the binary one its `bq`, each enabled when the class
//! is made and waited for until the shard says it is compressed; a compressed HNSW rescores its
//! ef candidates with the stored vectors, Weaviate's default.
//!
//! Weaviate has no per-query ef: the class's `vectorIndexConfig.ef` is what a search uses (a
//! positive ef is used as it is, raised to k when below it; the `dynamicEf*` settings apply
//! only to `ef: -1`). Each ef point changes it with a schema update and reads it back before
//! the clock starts. Searches are GraphQL `nearVector` queries returning the row property.
//!
//! Bounds, as Chroma's: a search request has no timeout of its own (`--ceiling` bounds it
//! from outside); every other request times out at the larger of `--ceiling` and
//! `--build-ceiling`; the build's wait for the index stops at `--build-ceiling`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::driver::OpError;
use common::http::{Access, error_chain, json_answer, json_request};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use reqwest::Client;
use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use super::{
    BUILD_FLAG, BUILD_PHASE, Bounds, BuildProgress, BuildReport, Described, Identity, Mode, Opened,
    Reach, TargetError, TlsState, VectorTarget, location_of_url,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{SearchSession, Work};

const DEFAULT_PORT: u16 = 8080;
/// The description of every class fairbench creates: the mark `check` looks for.
const MARKER: &str = "created_by fairbench";
const ROW: &str = "row";
const CATEGORY: &str = "category";
/// The ef of the class `build` makes (the build's own).
const BUILD_EF: usize = 64;
const URL_FORM: &str = "write it as weaviate://HOST:PORT[?filter_strategy=acorn|sweeping&sslmode=verify-full&cacert=CA.pem]";

/// An HTTP client of one Weaviate server.
#[derive(Clone)]
struct Http {
    client: Client,
    /// `http[s]://host:port/v1`
    base: String,
}

/// Weaviate's own words in an error answer (`{"error":[{"message":…}]}`, GraphQL's `errors`).
fn message(value: &Value) -> String {
    let list = value.get("error").or_else(|| value.get("errors"));
    match list.and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .map(|e| e["message"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
            .join("; "),
        None => value.to_string().chars().take(300).collect(),
    }
}

impl Http {
    /// A client of its own; `timeout` bounds each request (`None`: the caller does).
    fn new(root: &str, access: &Access, timeout: Option<Duration>) -> Result<Http, String> {
        let user_agent = concat!("vector-bench/", env!("CARGO_PKG_VERSION"));
        Ok(Http {
            client: access
                .client(user_agent, timeout)
                .map_err(|e| error_chain(&e))?,
            base: format!("{root}/v1"),
        })
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let url = format!("{}{path}", self.base);
        json_request(&self.client, method, url, body).send().await
    }

    /// Sends a request and returns the status and the JSON body.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(u16, Value), String> {
        json_answer(
            self.send(method, path, body).await,
            &format!("{method} {path}"),
        )
        .await
    }

    /// As [`Http::call`], failing on any status but 2xx, and on GraphQL errors.
    async fn ok(&self, method: &str, path: &str, body: Option<Bytes>) -> Result<Value, String> {
        let (status, value) = self.call(method, path, body).await?;
        if (200..300).contains(&status) && value.get("errors").is_none_or(Value::is_null) {
            Ok(value)
        } else {
            Err(format!(
                "{method} {path}: HTTP {status}: {}",
                message(&value)
            ))
        }
    }

    async fn graphql(&self, query: &str) -> Result<Value, String> {
        let body = json!({ "query": query }).to_string();
        Ok(self.ok("POST", "/graphql", Some(body.into())).await?["data"].take())
    }
}

/// `weaviate://[USER[:KEY]@]HOST:PORT[?…]` → `HOST:PORT`.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let authority = rest.split(['?', '/']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// The class of `spec`: Weaviate's class names start with a capital (`Fairbench_f32`).
fn class_of(spec: &IndexSpec) -> String {
    let name = spec.collection();
    let mut chars = name.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

/// The quantizer of `variant` in a class's `vectorIndexConfig`, and its settings.
fn quantizer(variant: Variant) -> Option<(&'static str, Value)> {
    match variant {
        Variant::F32 => None,
        Variant::Int8 => Some(("rq", json!({ "enabled": true, "bits": 8 }))),
        Variant::Binary => Some(("bq", json!({ "enabled": true }))),
    }
}

fn distance(metric: Metric) -> &'static str {
    match metric {
        Metric::Cosine => "cosine",
        Metric::L2 => "l2-squared",
    }
}

pub struct WeaviateTarget {
    identity: Identity,
    http: Http,
    access: Access,
    root: String,
    tls: TlsState,
    location: Location,
    /// `filterStrategy` of the classes it creates: `None` leaves Weaviate's default (acorn).
    filter_strategy: Option<String>,
}

impl WeaviateTarget {
    /// `weaviate://HOST:PORT` (the REST port): https when the URL's `sslmode=` asks for TLS,
    /// after a probe handshake; one request to `/v1/.well-known/ready` that fails in one line.
    pub async fn open(
        spec: &TargetSpec,
        reach: &Reach,
        bounds: Bounds,
    ) -> Result<Box<dyn VectorTarget>, TargetError> {
        let host = authority(&spec.url);
        if host.is_empty() {
            return Err(TargetError::Url {
                url: spec.url_redacted(),
                message: URL_FORM.into(),
            });
        }
        let host = if host.contains(':') && !host.ends_with(']') {
            host.to_owned()
        } else {
            format!("{host}:{DEFAULT_PORT}")
        };
        let filter_strategy = match common::urlparts::param(&spec.url, &["filterstrategy"]) {
            None => None,
            Some((_, s)) if s == "acorn" || s == "sweeping" => Some(s),
            Some((_, other)) => {
                return Err(TargetError::Url {
                    url: spec.url_redacted(),
                    message: format!(
                        "filter_strategy={other}: use acorn (Weaviate's default) or sweeping"
                    ),
                });
            }
        };
        let identity = Identity::of(spec, "weaviate");
        let settings = reach.tls(spec)?;
        let tls = TlsState::probe(settings.clone(), &spec.url, Some(DEFAULT_PORT)).await?;
        let authorization = match reach.secrets.api_key(spec) {
            Some((key, _)) => {
                let mut header = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                    .map_err(|_| identity.connect_error("the API key is not valid in a header"))?;
                header.set_sensitive(true);
                Some(header)
            }
            None => None,
        };
        let access = Access {
            tls: match settings.uses_tls() {
                true => Some(settings.client_config()?),
                false => None,
            },
            authorization,
        };
        let scheme = if settings.uses_tls() { "https" } else { "http" };
        let root = format!("{scheme}://{host}");
        let http = Http::new(&root, &access, Some(bounds.request()))
            .map_err(|e| identity.connect_error(e))?;
        let path = "/.well-known/ready";
        let ready = http.send("GET", path, None).await.map_err(|e| {
            if let Some(tls) = common::tls::explain(&e, &settings.host) {
                return identity.connect_error(tls);
            }
            let text = error_chain(&e);
            let hint = if text.contains("refused") {
                " — is the server running? (scripts/services start)"
            } else {
                ""
            };
            identity.connect_error(format!("GET /v1{path}: {text}{hint}"))
        })?;
        if !ready.status().is_success() {
            return Err(identity.connect_error(format!(
                "GET /v1{path}: HTTP {} — the server is not ready (or not Weaviate's REST port)",
                ready.status()
            )));
        }
        Ok(Box::new(WeaviateTarget {
            identity,
            http,
            access,
            root,
            tls,
            location: location_of_url(&host),
            filter_strategy,
        }))
    }

    fn answer<T>(&self, result: Result<T, String>) -> Result<T, TargetError> {
        result.map_err(|e| self.identity.query_error(e))
    }

    /// The class `class` as the schema holds it, or `None` when there is none.
    async fn class(&self, class: &str) -> Result<Option<Value>, TargetError> {
        let path = format!("/schema/{class}");
        let (status, value) = self.answer(self.http.call("GET", &path, None).await)?;
        match status {
            200 => Ok(Some(value)),
            404 => Ok(None),
            _ => Err(self
                .identity
                .query_error(format!("GET /v1{path}: HTTP {status}: {}", message(&value)))),
        }
    }

    /// The objects the class holds, counted by the server.
    async fn count(&self, class: &str) -> Result<u64, TargetError> {
        let query = format!("{{ Aggregate {{ {class} {{ meta {{ count }} }} }} }}");
        let data = self.answer(self.http.graphql(&query).await)?;
        Ok(data["Aggregate"][class][0]["meta"]["count"]
            .as_u64()
            .unwrap_or(0))
    }

    /// The dimension of the class's vectors, from one of its objects.
    async fn dimensions(&self, class: &str) -> Result<Option<usize>, TargetError> {
        let path = format!("/objects?class={class}&limit=1&include=vector");
        let objects = self.answer(self.http.ok("GET", &path, None).await)?;
        Ok(objects["objects"][0]["vector"].as_array().map(Vec::len))
    }

    /// Waits until the class counts `rows` objects, its shards' vector queues are empty and,
    /// when it was made `compressed`, every shard says it is.
    async fn wait_indexed(
        &self,
        class: &str,
        rows: usize,
        compressed: bool,
        progress: &BuildProgress,
    ) -> Result<(), TargetError> {
        let path = format!("/nodes?output=verbose&collection={class}");
        loop {
            let counted = self.count(class).await?;
            let nodes = self.answer(self.http.ok("GET", &path, None).await)?;
            let shards: Vec<&Value> = nodes["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|n| n["shards"].as_array().into_iter().flatten())
                .filter(|s| s["class"] == class)
                .collect();
            let queued: u64 = shards
                .iter()
                .map(|s| s["vectorQueueLength"].as_u64().unwrap_or(u64::MAX))
                .sum();
            let ready = !shards.is_empty()
                && shards.iter().all(|s| {
                    s["vectorIndexingStatus"] == "READY" && (!compressed || s["compressed"] == true)
                });
            if counted == rows as u64 && queued == 0 && ready {
                return Ok(());
            }
            if let Err(past) = progress.deadline().check(BUILD_PHASE, BUILD_FLAG) {
                let compression = if compressed && !ready {
                    ", the index not compressed yet"
                } else {
                    ""
                };
                return Err(self.identity.query_error(format!(
                    "{past}: {counted} of {rows} objects counted, {queued} vectors queued{compression}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The body of one batch: rows `start..end` as objects of `class`, each with its row id (and a
/// UUID made from it) and its category.
fn batch_body(class: &str, data: &Dataset, start: usize, end: usize) -> String {
    let mut body = String::with_capacity((end - start) * (data.dims * 12 + 120));
    body.push_str("{\"objects\":[");
    for id in start..end {
        let _ = write!(
            body,
            "{}{{\"class\":\"{class}\",\"id\":\"00000000-0000-0000-0000-{id:012x}\",\"vector\":[",
            if id == start { "" } else { "," }
        );
        for (i, v) in data.row(id).iter().enumerate() {
            let _ = write!(body, "{}{v}", if i == 0 { "" } else { "," });
        }
        let _ = write!(
            body,
            "],\"properties\":{{\"{ROW}\":{id},\"{CATEGORY}\":{}}}}}",
            data.categories[id]
        );
    }
    body.push_str("]}");
    body
}

/// The first error of a batch's answer, or how many objects succeeded.
fn batch_result(answer: &Value, sent: usize) -> Result<(), String> {
    let objects = answer.as_array().ok_or("the batch answer is not a list")?;
    if objects.len() != sent {
        return Err(format!(
            "the batch answer lists {} objects, {sent} were sent",
            objects.len()
        ));
    }
    for object in objects {
        let result = &object["result"];
        if let Some(errors) = result["errors"]["error"].as_array()
            && !errors.is_empty()
        {
            return Err(format!(
                "object {}: {}",
                object["id"],
                message(&result["errors"])
            ));
        }
        if result["status"].as_str().is_some_and(|s| s != "SUCCESS") {
            return Err(format!(
                "object {}: status {}",
                object["id"], result["status"]
            ));
        }
    }
    Ok(())
}

common::identified!(WeaviateTarget);

impl VectorTarget for WeaviateTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>> {
        Box::pin(async move {
            let meta = self.answer(self.http.ok("GET", "/meta", None).await)?;
            Ok(Described {
                kind: self.identity.kind.clone(),
                version: format!("Weaviate {}", meta["version"].as_str().unwrap_or("unknown")),
                settings: BTreeMap::new(),
                // Weaviate's API does not say where it keeps its data.
                location: self.location,
                data_dir: None,
            })
        })
    }

    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
    }

    fn offer(&self, variant: Variant) -> Result<String, String> {
        Ok(match variant {
            Variant::F32 => "HNSW over f32 vectors, flatSearchCutoff 0".into(),
            Variant::Int8 => "HNSW over rotational quantization (rq), 8 bits a dimension: Weaviate's 8-bit quantizer that needs no training (sq compresses only once trainingLimit objects are in, 100,000 by default); the ef candidates rescored with the stored vectors (rescoreLimit 20, Weaviate's default)".into(),
            Variant::Binary => "HNSW over binary quantization (bq), one bit a dimension; the ef candidates rescored with the stored vectors (Weaviate's default for a compressed HNSW)".into(),
        })
    }

    fn check<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let class = class_of(spec);
            let Some(existing) = self.class(&class).await? else {
                return Ok(());
            };
            if existing["description"].as_str() != Some(MARKER) {
                return Err(self.identity.foreign(format!("class {class}")));
            }
            let found = self.dimensions(&class).await?;
            super::check_dimensions(&self.identity, format!("class {class}"), found, spec.dims)
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
            let class = class_of(spec);
            if self.class(&class).await?.is_some() {
                let path = format!("/schema/{class}");
                self.answer(self.http.ok("DELETE", &path, None).await)?;
            }
            let mut create = json!({
                "class": class,
                "description": MARKER,
                "vectorizer": "none",
                "vectorIndexType": "hnsw",
                "vectorIndexConfig": {
                    "distance": distance(spec.metric),
                    "maxConnections": spec.m,
                    "efConstruction": spec.ef_construction,
                    "ef": BUILD_EF,
                    "flatSearchCutoff": 0,
                },
                "properties": [
                    { "name": ROW, "dataType": ["int"], "indexFilterable": false,
                      "indexSearchable": false },
                    { "name": CATEGORY, "dataType": ["int"], "indexFilterable": true,
                      "indexSearchable": false },
                ],
            });
            if let Some(strategy) = &self.filter_strategy {
                create["vectorIndexConfig"]["filterStrategy"] = json!(strategy);
            }
            if let Some((quantizer, config)) = quantizer(spec.variant) {
                create["vectorIndexConfig"][quantizer] = config;
            }
            let create = create.to_string();
            self.answer(self.http.ok("POST", "/schema", Some(create.into())).await)?;
            let began = Instant::now();
            let batch = batch.max(1);
            for start in (0..data.rows()).step_by(batch) {
                let end = (start + batch).min(data.rows());
                let body = batch_body(&class, data, start, end);
                let answer = self.answer(
                    self.http
                        .ok("POST", "/batch/objects", Some(body.into()))
                        .await,
                )?;
                self.answer(batch_result(&answer, end - start))?;
                progress
                    .sent((end - start) as u64)
                    .map_err(|e| self.identity.query_error(e))?;
            }
            let insert_s = began.elapsed().as_secs_f64();
            let compressed = quantizer(spec.variant).is_some();
            self.wait_indexed(&class, data.rows(), compressed, progress)
                .await?;
            Ok(BuildReport {
                insert_s,
                build_s: began.elapsed().as_secs_f64(),
                method: format!(
                    "POST /v1/batch/objects in batches of {batch} (the HNSW index is updated as objects arrive), then until the class counts every row and the vector queue is empty"
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
            let class = class_of(spec);
            let schema = self
                .class(&class)
                .await?
                .ok_or_else(|| self.identity.query_error(format!("class {class} is gone")))?;
            let config = &schema["vectorIndexConfig"];
            let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let mut out = BTreeMap::new();
            out.insert("index_type".into(), text(&schema["vectorIndexType"]));
            out.insert("m".into(), text(&config["maxConnections"]));
            out.insert("ef_construction".into(), text(&config["efConstruction"]));
            out.insert("ef".into(), text(&config["ef"]));
            out.insert("distance".into(), text(&config["distance"]));
            out.insert(
                "flat_search_cutoff".into(),
                text(&config["flatSearchCutoff"]),
            );
            out.insert("filter_strategy".into(), text(&config["filterStrategy"]));
            let quantized: Vec<&str> = ["pq", "bq", "sq", "rq"]
                .into_iter()
                .filter(|q| config[q]["enabled"] == true)
                .collect();
            out.insert(
                "quantization".into(),
                if quantized.is_empty() {
                    "none".into()
                } else {
                    quantized.join(",")
                },
            );
            if config["rq"]["enabled"] == true {
                out.insert("rq_bits".into(), text(&config["rq"]["bits"]));
                out.insert(
                    "rq_rescore_limit".into(),
                    text(&config["rq"]["rescoreLimit"]),
                );
            }
            let dims = self.dimensions(&class).await?;
            out.insert(
                "dimensions".into(),
                dims.map_or("?".into(), |d| d.to_string()),
            );
            out.insert("rows".into(), self.count(&class).await?.to_string());
            let category = schema["properties"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == CATEGORY);
            out.insert(
                "payload_index".into(),
                match category {
                    Some(p) if p["indexFilterable"] == true => {
                        format!("{CATEGORY} ({}, indexFilterable)", p["dataType"][0])
                    }
                    _ => "missing".into(),
                },
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
            let class = class_of(spec);
            let (root, access) = (self.root.clone(), self.access.clone());
            let bound = self.http.clone();
            let connect: Connector<WeaviateSession> = Arc::new(move || {
                let session = Http::new(&root, &access, None).map(|search| WeaviateSession {
                    http: bound.clone(),
                    search,
                    class: class.clone(),
                    bodies: Arc::new(Vec::new()),
                });
                Box::pin(async move { session })
            });
            let searchers = crate::session::open_async(sessions, connect).await?;
            let mut settings = BTreeMap::new();
            settings.insert(
                "ef_applied_by".into(),
                "the class's vectorIndexConfig.ef, changed by a schema update and read back before each point".into(),
            );
            Ok((searchers, settings))
        })
    }

    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.check(spec).await?;
            let class = class_of(spec);
            let (status, value) = self.answer(
                self.http
                    .call("DELETE", &format!("/schema/{class}"), None)
                    .await,
            )?;
            if (200..300).contains(&status) || status == 404 {
                Ok(())
            } else {
                Err(self.identity.query_error(format!(
                    "dropping class {class}: HTTP {status}: {}",
                    message(&value)
                )))
            }
        })
    }
}

/// One keep-alive connection for searches, with every query's GraphQL body encoded before the
/// clock starts.
pub struct WeaviateSession {
    /// The control path (a point's ef), each request bounded.
    http: Http,
    /// Searches, bounded by the ceiling from outside.
    search: Http,
    class: String,
    bodies: Arc<Vec<Bytes>>,
}

impl WeaviateSession {
    /// Sets the class's ef to `ef` unless it is already, and returns it as read back.
    async fn apply_ef(&self, ef: usize) -> Result<String, String> {
        let path = format!("/schema/{}", self.class);
        let mut schema = self.http.ok("GET", &path, None).await?;
        if schema["vectorIndexConfig"]["ef"].as_u64() != Some(ef as u64) {
            schema["vectorIndexConfig"]["ef"] = json!(ef);
            self.http
                .ok("PUT", &path, Some(schema.to_string().into()))
                .await?;
            schema = self.http.ok("GET", &path, None).await?;
        }
        Ok(schema["vectorIndexConfig"]["ef"].to_string())
    }
}

impl SearchSession for WeaviateSession {
    async fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        if work.ef < work.k {
            return Err(format!(
                "ef {} is below k {}: Weaviate would search with ef = k",
                work.ef, work.k
            ));
        }
        let reported = self.apply_ef(work.ef).await?;
        let filter = work.category.map_or(String::new(), |c| {
            format!(", where: {{path: [\"{CATEGORY}\"], operator: Equal, valueInt: {c}}}")
        });
        self.bodies = Arc::new(
            (0..work.query_count())
                .map(|q| {
                    let mut vector = String::with_capacity(work.data.dims * 12);
                    for (i, v) in work.data.query(q).iter().enumerate() {
                        let _ = write!(vector, "{}{v}", if i == 0 { "" } else { "," });
                    }
                    let query = format!(
                        "{{ Get {{ {}(nearVector: {{vector: [{vector}]}}, limit: {}{filter}) {{ {ROW} }} }} }}",
                        self.class, work.k
                    );
                    Bytes::from(json!({ "query": query }).to_string())
                })
                .collect(),
        );
        Ok(reported)
    }

    async fn search(
        &mut self,
        _work: &Work,
        query: usize,
        out: &mut Vec<u64>,
    ) -> Result<(), OpError> {
        let body = self.bodies[query].clone();
        let (status, answer) = self
            .search
            .call("POST", "/graphql", Some(body))
            .await
            .map_err(OpError::Failed)?;
        if status != 200 || answer.get("errors").is_some_and(|e| !e.is_null()) {
            return Err(OpError::Failed(format!(
                "HTTP {status}: {}",
                message(&answer)
            )));
        }
        out.clear();
        let hits = answer["data"]["Get"][&self.class].as_array();
        for hit in hits.map_or(&[][..], Vec::as_slice) {
            out.push(hit[ROW].as_u64().unwrap_or(u64::MAX));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_urls_and_batch_answers_are_read() {
        let spec = IndexSpec {
            namespace: "fairbench".into(),
            variant: Variant::F32,
            dims: 4,
            metric: Metric::Cosine,
            m: 16,
            ef_construction: 200,
            rows: 10,
        };
        assert_eq!(class_of(&spec), "Fairbench_f32");
        assert_eq!(
            authority("weaviate://k@127.0.0.1:8080/?x=1"),
            "127.0.0.1:8080"
        );
        let ok = json!([{ "id": "a", "result": { "status": "SUCCESS" } }]);
        assert_eq!(batch_result(&ok, 1), Ok(()));
        assert!(batch_result(&ok, 2).unwrap_err().contains("2 were sent"));
        let failed = json!([{ "id": "a", "result": { "errors": { "error": [
            { "message": "vector lengths don't match" }
        ] } } }]);
        assert_eq!(
            batch_result(&failed, 1).unwrap_err(),
            "object \"a\": vector lengths don't match"
        );
    }
}
