//! Chroma over its HTTP API (v2), with `ureq` (one keep-alive connection per session): a
//! collection with its HNSW parameters (space, max_neighbors = m, ef_construction, ef_search)
//! set at creation and read back, the category as metadata (Chroma indexes every metadata key)
//! and the filter as `where`.
//!
//! Chroma (1.5) stores a changed `ef_search` and reports it, but an HNSW index already loaded
//! keeps the ef it was loaded with (hnswlib loads with its own default; chroma #2675, #2176):
//! the answers do not change. So by default (`?ef=rebuild`) every ef point searches a
//! collection created with that `ef_search` and filled with the same rows, which Chroma loads
//! with it; `?ef=update` changes the existing collection's configuration instead (what a
//! Chroma that applies it would need), and the sweep's check marks the curve invalid when its
//! answers do not move.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::deadline::Deadline;
use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use serde_json::{Value, json};

use super::{
    BuildProgress, BuildReport, Description, Identity, Mode, Opened, Reach, TargetError,
    VectorTarget, check_dimensions, host_of, location_of_host,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{BlockingSearchSession, BlockingSearchers, Pass, Searchers, Work};
use common::pool::Pool;
use common::window::{WindowOutcome, WindowPlan};

const TIMEOUT: Duration = Duration::from_secs(120);
const MARKER_KEY: &str = "created_by";
const MARKER: &str = "fairbench";
/// The ef_search of the collection `build` makes (the build's own).
const BUILD_EF: usize = 64;

/// An HTTP client of one Chroma server and database.
#[derive(Clone)]
struct Http {
    agent: ureq::Agent,
    /// `http://host:port/api/v2/tenants/T/databases/D`
    base: String,
    root: String,
}

impl Http {
    fn new(root: &str, tenant: &str, database: &str) -> Http {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .max_idle_connections_per_host(1)
            .build();
        Http {
            agent: ureq::Agent::new_with_config(config),
            base: format!("{root}/api/v2/tenants/{tenant}/databases/{database}"),
            root: root.to_owned(),
        }
    }

    /// Sends a request and returns the status and the JSON body.
    fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<(u16, Value), String> {
        let url = if path.starts_with("/api") {
            format!("{}{path}", self.root)
        } else {
            format!("{}{path}", self.base)
        };
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            ("PUT", Some(b)) => self
                .agent
                .put(&url)
                .content_type("application/json")
                .send(b),
            (_, Some(b)) => self
                .agent
                .post(&url)
                .content_type("application/json")
                .send(b),
            (_, None) => self.agent.post(&url).send_empty(),
        };
        let mut response = response.map_err(|e| format!("{method} {url}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .map_err(|e| format!("{method} {url}: reading the answer: {e}"))?;
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| format!("{method} {url}: the answer is not JSON ({e}): {text:.200}"))?
        };
        Ok((status, value))
    }

    /// As [`Http::call`], failing on any status but 2xx with the server's message.
    fn ok(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Value, String> {
        let (status, value) = self.call(method, path, body)?;
        if (200..300).contains(&status) {
            Ok(value)
        } else {
            Err(format!(
                "{method} {path}: HTTP {status}: {}",
                value.get("message").and_then(Value::as_str).unwrap_or("")
            ))
        }
    }
}

pub struct ChromaTarget {
    identity: Identity,
    http: Http,
    location: Location,
    /// Set ef by creating a collection per ef (true), or by changing the configuration.
    rebuild: bool,
    batch: usize,
    /// `--build-ceiling`, as the last build was given it: each per-ef collection is a build too.
    build_bound: Duration,
}

impl ChromaTarget {
    /// `chroma://HOST:PORT…`, plaintext HTTP: a URL asking for TLS is refused in one line.
    pub async fn open(
        spec: &TargetSpec,
        reach: &Reach,
    ) -> Result<Box<dyn VectorTarget>, TargetError> {
        reach.refuse_tls(spec, "TLS for Chroma is not supported yet")?;
        let rest = spec.url.split_once("://").map_or("", |(_, r)| r);
        let (host, query) = rest.split_once('?').unwrap_or((rest, ""));
        let host = host.trim_end_matches('/');
        if host.is_empty() {
            return Err(TargetError::Url {
                url: spec.url_redacted(),
                message: "write it as chroma://HOST:PORT[?tenant=T&database=D&ef=rebuild|update]"
                    .into(),
            });
        }
        let param = |key: &str, default: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                .unwrap_or(default)
                .to_owned()
        };
        let identity = Identity::of(spec, "chroma");
        let rebuild = match param("ef", "rebuild").as_str() {
            "rebuild" => true,
            "update" => false,
            other => {
                return Err(TargetError::Url {
                    url: spec.url_redacted(),
                    message: format!(
                        "ef={other}: use ef=rebuild (a collection per ef, the default) or ef=update"
                    ),
                });
            }
        };
        let http = Http::new(
            &format!("http://{host}"),
            &param("tenant", "default_tenant"),
            &param("database", "default_database"),
        );
        let probe = http.clone();
        let alive = tokio::task::spawn_blocking(move || probe.ok("GET", "/api/v2/heartbeat", None))
            .await
            .map_err(|e| TargetError::Other(e.to_string()))?;
        if let Err(message) = alive {
            return Err(identity.connect_error(format!(
                "{message} — is the server running? (scripts/services start)"
            )));
        }
        Ok(Box::new(ChromaTarget {
            identity,
            http,
            location: location_of_host(host_of(host)),
            rebuild,
            batch: 1000,
            build_bound: Duration::MAX,
        }))
    }

    /// Runs a blocking HTTP exchange off the runtime's workers.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(Http) -> Result<T, String> + Send + 'static,
    ) -> Result<T, TargetError> {
        let http = self.http.clone();
        tokio::task::spawn_blocking(move || work(http))
            .await
            .map_err(|e| self.identity.query_error(e))?
            .map_err(|e| self.identity.query_error(e))
    }

    /// The collection named `name`, or `None` when there is none.
    async fn collection(&self, name: &str) -> Result<Option<Value>, TargetError> {
        let path = format!("/collections/{name}");
        let (status, value) = self
            .blocking(move |http| http.call("GET", &path, None))
            .await?;
        match status {
            200 => Ok(Some(value)),
            404 => Ok(None),
            _ if value.get("error").and_then(Value::as_str) == Some("NotFoundError") => Ok(None),
            _ => Err(self
                .identity
                .query_error(format!("reading collection {name}: HTTP {status}: {value}"))),
        }
    }
}

fn space(metric: Metric) -> &'static str {
    match metric {
        Metric::Cosine => "cosine",
        Metric::L2 => "l2",
    }
}

/// The body of one `add`: ids, embeddings and categories of rows `start..end`.
fn add_body(data: &Dataset, start: usize, end: usize) -> String {
    let mut body = String::with_capacity((end - start) * (data.dims * 12 + 40));
    body.push_str("{\"ids\":[");
    for id in start..end {
        let _ = write!(body, "{}\"{id}\"", if id == start { "" } else { "," });
    }
    body.push_str("],\"embeddings\":[");
    for id in start..end {
        body.push_str(if id == start { "[" } else { ",[" });
        for (i, v) in data.row(id).iter().enumerate() {
            let _ = write!(body, "{}{v}", if i == 0 { "" } else { "," });
        }
        body.push(']');
    }
    body.push_str("],\"metadatas\":[");
    for id in start..end {
        let _ = write!(
            body,
            "{}{{\"category\":{}}}",
            if id == start { "" } else { "," },
            data.categories[id]
        );
    }
    body.push_str("]}");
    body
}

/// Creates collection `name` (marked as fairbench's) with the HNSW parameters of `spec` and
/// `ef_search`, and adds every row in batches no larger than the server allows; returns its id
/// and the batch size used. Blocking.
fn fill(
    http: &Http,
    name: &str,
    spec: &IndexSpec,
    ef_search: usize,
    data: &Dataset,
    batch: usize,
    progress: &BuildProgress,
) -> Result<(String, usize), String> {
    let create = json!({
        "name": name,
        "metadata": { MARKER_KEY: MARKER },
        "configuration": { "hnsw": {
            "space": space(spec.metric),
            "max_neighbors": spec.m,
            "ef_construction": spec.ef_construction,
            "ef_search": ef_search,
        }},
    })
    .to_string();
    let created = http.ok("POST", "/collections", Some(create.as_bytes()))?;
    let id = created["id"]
        .as_str()
        .ok_or("creating the collection returned no id")?
        .to_owned();
    let limit = http.ok("GET", "/api/v2/pre-flight-checks", None)?["max_batch_size"]
        .as_u64()
        .map_or(batch, |m| m as usize);
    let batch = batch.min(limit).max(1);
    for start in (0..data.rows()).step_by(batch) {
        let end = (start + batch).min(data.rows());
        let body = add_body(data, start, end);
        http.ok(
            "POST",
            &format!("/collections/{id}/add"),
            Some(body.as_bytes()),
        )?;
        progress.sent((end - start) as u64)?;
    }
    Ok((id, batch))
}

/// Deletes fairbench's collection `name` if it is there.
fn delete(http: &Http, name: &str) -> Result<(), String> {
    let (status, value) = http.call("DELETE", &format!("/collections/{name}"), None)?;
    if (200..300).contains(&status)
        || status == 404
        || value.get("error").is_some_and(|e| e == "NotFoundError")
    {
        Ok(())
    } else {
        Err(format!(
            "dropping collection {name}: HTTP {status}: {value}"
        ))
    }
}

/// The collection of one ef point in rebuild mode.
fn ef_collection(spec: &IndexSpec, ef: usize) -> String {
    format!("{}_ef{ef}", spec.collection())
}

impl VectorTarget for ChromaTarget {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let version = self
                .blocking(|http| http.ok("GET", "/api/v2/version", None))
                .await?;
            let checks = self
                .blocking(|http| http.ok("GET", "/api/v2/pre-flight-checks", None))
                .await?;
            let mut settings = BTreeMap::new();
            settings.insert(
                "max_batch_size".into(),
                checks["max_batch_size"].to_string(),
            );
            Ok(Description {
                version: format!(
                    "Chroma (server API version {})",
                    version.as_str().unwrap_or("unknown")
                ),
                settings,
                // Chroma's API does not say where it keeps its data.
                location: self.location,
                data_dir: None,
            })
        })
    }

    fn offer(&self, variant: Variant) -> Result<String, String> {
        match variant {
            Variant::F32 => Ok("HNSW (hnswlib) over f32 vectors".into()),
            _ => Err("Chroma's single-node HNSW index has no quantization".into()),
        }
    }

    fn check<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let name = spec.collection();
            let Some(existing) = self.collection(&name).await? else {
                return Ok(());
            };
            if existing["metadata"][MARKER_KEY].as_str() != Some(MARKER) {
                return Err(self.identity.foreign(format!("collection {name}")));
            }
            check_dimensions(
                &self.identity,
                format!("collection {name}"),
                existing["dimension"].as_u64().map(|d| d as usize),
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
            if self.collection(&name).await?.is_some() {
                let path = format!("/collections/{name}");
                self.blocking(move |http| http.ok("DELETE", &path, None))
                    .await?;
            }
            let began = Instant::now();
            let (id, batch) = tokio::task::block_in_place(|| {
                fill(&self.http, &name, spec, BUILD_EF, data, batch, progress)
            })
            .map_err(|e| self.identity.query_error(e))?;
            self.batch = batch;
            self.build_bound = progress.deadline().bound();
            let insert_s = began.elapsed().as_secs_f64();
            let probe = json!({
                "query_embeddings": [data.query(0)],
                "n_results": 1,
                "include": [],
            })
            .to_string();
            let path = format!("/collections/{id}/query");
            let answer = self
                .blocking(move |http| http.ok("POST", &path, Some(probe.as_bytes())))
                .await?;
            if answer["ids"][0].as_array().is_none_or(Vec::is_empty) {
                return Err(self
                    .identity
                    .query_error("the collection returned nothing after every row was added"));
            }
            Ok(BuildReport {
                insert_s,
                build_s: began.elapsed().as_secs_f64(),
                method: format!(
                    "add in batches of {batch}; the HNSW index is updated as rows arrive, and the first query answers after the last add{}",
                    if self.rebuild {
                        "; every ef point searches a collection of its own created with that ef_search (Chroma applies ef_search only when it loads an index)"
                    } else {
                        ""
                    }
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
            let name = spec.collection();
            let collection = self.collection(&name).await?.ok_or_else(|| {
                self.identity
                    .query_error(format!("collection {name} is gone"))
            })?;
            let hnsw = &collection["configuration_json"]["hnsw"];
            let mut out = BTreeMap::new();
            let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            out.insert("m".into(), text(&hnsw["max_neighbors"]));
            out.insert("ef_construction".into(), text(&hnsw["ef_construction"]));
            out.insert("space".into(), text(&hnsw["space"]));
            out.insert("dimensions".into(), text(&collection["dimension"]));
            let id = text(&collection["id"]);
            let path = format!("/collections/{id}/count");
            let count = self
                .blocking(move |http| http.ok("GET", &path, None))
                .await?;
            out.insert("rows".into(), text(&count));
            out.insert(
                "payload_index".into(),
                "automatic: Chroma indexes every metadata key (int_inverted_index)".into(),
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
            let name = spec.collection();
            let collection = self.collection(&name).await?.ok_or_else(|| {
                self.identity
                    .query_error(format!("collection {name} is gone"))
            })?;
            let id = collection["id"].as_str().unwrap_or_default().to_owned();
            let root = self.http.clone();
            let update = !self.rebuild;
            let connect: Connector<ChromaSession> = Arc::new(move || {
                let http = Http::new(&root.root, "", "");
                let mut session = ChromaSession {
                    http: Http {
                        base: root.base.clone(),
                        ..http
                    },
                    query_path: String::new(),
                    config_path: String::new(),
                    name: String::new(),
                    update,
                    bodies: Arc::new(Vec::new()),
                };
                session.point_at(&name, &id);
                Box::pin(async move { Ok(session) })
            });
            let pool = Pool::open(sessions, connect)
                .await
                .map_err(TargetError::Other)?;
            let mut settings = BTreeMap::new();
            settings.insert(
                "ef_applied_by".into(),
                if self.rebuild {
                    "a collection per ef, created with that ef_search (?ef=rebuild)".into()
                } else {
                    "changing the collection's ef_search (?ef=update)".into()
                },
            );
            let searchers = ChromaSearchers {
                inner: BlockingSearchers { pool },
                http: self.http.clone(),
                spec: spec.clone(),
                batch: self.batch,
                build_bound: self.build_bound,
                current_ef: BUILD_EF,
                current: None,
                rebuild: self.rebuild,
                notes: Vec::new(),
            };
            Ok((Box::new(searchers) as Box<dyn Searchers>, settings))
        })
    }

    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.check(spec).await?;
            let name = spec.collection();
            self.blocking(move |http| delete(&http, &name)).await
        })
    }
}

/// One keep-alive connection, with every query's request body encoded before the clock starts.
pub struct ChromaSession {
    http: Http,
    query_path: String,
    config_path: String,
    name: String,
    /// Change the collection's ef_search at each point (else the collection was made with it).
    update: bool,
    bodies: Arc<Vec<Vec<u8>>>,
}

impl ChromaSession {
    /// Searches collection `name` (id `id`) from now on.
    fn point_at(&mut self, name: &str, id: &str) {
        self.name = name.to_owned();
        self.query_path = format!("/collections/{id}/query");
        self.config_path = format!("/collections/{id}");
    }
}

impl BlockingSearchSession for ChromaSession {
    fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        if self.update {
            let update =
                json!({ "new_configuration": { "hnsw": { "ef_search": work.ef } } }).to_string();
            self.http
                .ok("PUT", &self.config_path, Some(update.as_bytes()))?;
        }
        let collection = self
            .http
            .ok("GET", &format!("/collections/{}", self.name), None)?;
        let filter = work.category.map(|c| json!({ "category": c }));
        self.bodies = Arc::new(
            (0..work.query_count())
                .map(|q| {
                    let mut body = json!({
                        "query_embeddings": [work.data.query(q)],
                        "n_results": work.k,
                        "include": [],
                    });
                    if let Some(filter) = &filter {
                        body["where"] = filter.clone();
                    }
                    body.to_string().into_bytes()
                })
                .collect(),
        );
        Ok(collection["configuration_json"]["hnsw"]["ef_search"].to_string())
    }

    fn search(&mut self, _work: &Work, query: usize, out: &mut Vec<u64>) -> Result<(), OpError> {
        let body = &self.bodies[query];
        let (status, answer) = self
            .http
            .call("POST", &self.query_path, Some(body))
            .map_err(OpError::Failed)?;
        if status != 200 {
            return Err(OpError::Failed(format!(
                "HTTP {status}: {}",
                answer.get("message").and_then(Value::as_str).unwrap_or("")
            )));
        }
        out.clear();
        let ids = answer["ids"][0].as_array().map_or(&[][..], Vec::as_slice);
        for id in ids {
            let id = id
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(u64::MAX);
            out.push(id);
        }
        Ok(())
    }
}

/// Chroma's sessions, with the collection each ef point searches: in rebuild mode, one
/// created with that ef_search and filled with every row before the point's clock starts.
struct ChromaSearchers {
    inner: BlockingSearchers<ChromaSession>,
    http: Http,
    spec: IndexSpec,
    batch: usize,
    build_bound: Duration,
    current_ef: usize,
    /// The per-ef collection searched now (`None`: the build's own).
    current: Option<String>,
    rebuild: bool,
    notes: Vec<String>,
}

impl ChromaSearchers {
    /// Creates and fills the collection of `ef`, drops the previous per-ef one, and points
    /// every session at it.
    fn rebuild_for(&mut self, work: &Work) -> Result<(), String> {
        let name = ef_collection(&self.spec, work.ef);
        let began = Instant::now();
        delete(&self.http, &name)?;
        let (id, _) = fill(
            &self.http,
            &name,
            &self.spec,
            work.ef,
            &work.data,
            self.batch,
            &BuildProgress::new(Deadline::after(self.build_bound)),
        )?;
        if let Some(previous) = self.current.replace(name.clone()) {
            delete(&self.http, &previous)?;
        }
        for session in self.inner.pool.sessions_mut() {
            session.point_at(&name, &id);
        }
        self.current_ef = work.ef;
        self.notes.push(format!(
            "ef {}: collection {name} created with ef_search = {} and filled in {:.1}s (Chroma applies ef_search when it loads an index, not to one already loaded)",
            work.ef,
            work.ef,
            began.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}

impl Drop for ChromaSearchers {
    fn drop(&mut self) {
        // The per-ef collection goes with the sessions; the build's own is dropped by the target.
        if let Some(name) = self.current.take() {
            let _ = delete(&self.http, &name);
        }
    }
}

impl Searchers for ChromaSearchers {
    fn prepare<'a>(&'a mut self, work: &'a Arc<Work>) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            if self.rebuild && work.ef != self.current_ef {
                tokio::task::block_in_place(|| self.rebuild_for(work))?;
            }
            self.inner.prepare(work).await
        })
    }

    fn pass<'a>(
        &'a mut self,
        work: &'a Arc<Work>,
        ceiling: Duration,
    ) -> BoxFuture<'a, Result<Pass, String>> {
        self.inner.pass(work, ceiling)
    }

    fn window<'a>(
        &'a mut self,
        n: usize,
        work: &'a Arc<Work>,
        plan: &'a WindowPlan,
    ) -> BoxFuture<'a, Result<WindowOutcome, String>> {
        self.inner.window(n, work, plan)
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}
