//! Chroma over its HTTP API (v2), with reqwest (one keep-alive connection per session), plain
//! or https: `sslmode=require|verify-ca|verify-full` and `cacert=` in the URL (as CouchDB's),
//! common's rustls configuration verified by default, a probe handshake in the connect phase
//! recording the version and cipher; a token (`token=`/`api_key=`, `FAIRBENCH_API_KEY_<NAME>`,
//! or the password sources) sent as `Authorization: Bearer`, a sensitive header. A collection
//! has its HNSW parameters (space, max_neighbors = m, ef_construction, ef_search) set at
//! creation and read back, the category as metadata (Chroma indexes every metadata key) and
//! the filter as `where`.
//!
//! Bounds ([`Bounds`]): a search request has no timeout of its own (`--ceiling` bounds it: the
//! pass and the window drop it there and count a timeout); every other request (describe,
//! check, the build's adds, verify, a session's preparation, drop) times out at the larger of
//! `--ceiling` and `--build-ceiling`; a build as a whole, the collection of an ef point too,
//! is stopped at `--build-ceiling` and is a `timeout`.
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

use bytes::Bytes;
use common::deadline::Deadline;
use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use serde_json::{Value, json};

mod http;

use http::{Access, Http, authorization, heartbeat};

use super::{
    BUILD_FLAG, BUILD_PHASE, Bounds, BuildProgress, BuildReport, Described, Identity, Mode, Opened,
    Reach, TargetError, TlsState, VectorTarget, check_dimensions, location_of_url,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{AsyncSearchers, NotReady, Pass, SearchSession, Searchers, Work};
use common::pool::Pool;
use common::window::{WindowOutcome, WindowPlan};

const DEFAULT_PORT: u16 = 8000;
const MARKER_KEY: &str = "created_by";
const MARKER: &str = "fairbench";
/// The ef_search of the collection `build` makes (the build's own).
const BUILD_EF: usize = 64;
const URL_FORM: &str = "write it as chroma://HOST:PORT[?tenant=T&database=D&ef=rebuild|update\
                        &sslmode=verify-full&cacert=CA.pem]";

/// `chroma://[USER[:TOKEN]@]HOST:PORT[?…]` → `HOST:PORT` and the query.
fn authority_and_query(url: &str) -> (&str, &str) {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = authority.trim_end_matches('/');
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    (authority, query)
}

pub struct ChromaTarget {
    identity: Identity,
    http: Http,
    access: Access,
    tls: TlsState,
    location: Location,
    /// Set ef by creating a collection per ef (true), or by changing the configuration.
    rebuild: bool,
    batch: usize,
    /// `--build-ceiling`: each per-ef collection is a build too.
    build_bound: Duration,
}

impl ChromaTarget {
    /// `chroma://HOST:PORT…`: https when the URL's `sslmode=` asks for TLS, after a probe
    /// handshake that fails fast in one line; plaintext HTTP otherwise.
    pub async fn open(
        spec: &TargetSpec,
        reach: &Reach,
        bounds: Bounds,
    ) -> Result<Box<dyn VectorTarget>, TargetError> {
        let url_error = |message: String| TargetError::Url {
            url: spec.url_redacted(),
            message: common::redact::redact_text(&message),
        };
        let (host, query) = authority_and_query(&spec.url);
        if host.is_empty() {
            return Err(url_error(URL_FORM.into()));
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
                return Err(url_error(format!(
                    "ef={other}: use ef=rebuild (a collection per ef, the default) or ef=update"
                )));
            }
        };
        let settings = reach.tls(spec)?;
        let authorization = authorization(spec, reach).map_err(url_error)?;
        let tls = TlsState::probe(settings.clone(), &spec.url, Some(DEFAULT_PORT)).await?;
        let access = Access {
            tls: match settings.uses_tls() {
                true => Some(settings.client_config()?),
                false => None,
            },
            authorization,
        };
        let scheme = if settings.uses_tls() { "https" } else { "http" };
        let http = Http::new(
            &format!("{scheme}://{host}"),
            &param("tenant", "default_tenant"),
            &param("database", "default_database"),
            &access,
            Some(bounds.request()),
        )
        .map_err(url_error)?;
        heartbeat(&http, &identity, &settings.host, settings.uses_tls()).await?;
        Ok(Box::new(ChromaTarget {
            identity,
            http,
            access,
            tls,
            location: location_of_url(host),
            rebuild,
            batch: 1000,
            build_bound: bounds.build,
        }))
    }

    /// A control-path answer, or the system's error.
    fn answer<T>(&self, result: Result<T, String>) -> Result<T, TargetError> {
        result.map_err(|e| self.identity.query_error(e))
    }

    /// The collection named `name`, or `None` when there is none.
    async fn collection(&self, name: &str) -> Result<Option<Value>, TargetError> {
        let path = format!("/collections/{name}");
        let (status, value) = self.answer(self.http.call("GET", &path, None).await)?;
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
/// and the batch size used.
async fn fill(
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
    let created = http.ok("POST", "/collections", Some(create.into())).await?;
    let id = created["id"]
        .as_str()
        .ok_or("creating the collection returned no id")?
        .to_owned();
    let limit = http.ok("GET", "/api/v2/pre-flight-checks", None).await?["max_batch_size"]
        .as_u64()
        .map_or(batch, |m| m as usize);
    let batch = batch.min(limit).max(1);
    for start in (0..data.rows()).step_by(batch) {
        let end = (start + batch).min(data.rows());
        let body = add_body(data, start, end);
        http.ok("POST", &format!("/collections/{id}/add"), Some(body.into()))
            .await?;
        progress.sent((end - start) as u64)?;
    }
    Ok((id, batch))
}

/// Deletes fairbench's collection `name` if it is there.
async fn delete(http: &Http, name: &str) -> Result<(), String> {
    let (status, value) = http
        .call("DELETE", &format!("/collections/{name}"), None)
        .await?;
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

common::identified!(ChromaTarget);

impl VectorTarget for ChromaTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>> {
        Box::pin(async move {
            let version = self.answer(self.http.ok("GET", "/api/v2/version", None).await)?;
            let checks =
                self.answer(self.http.ok("GET", "/api/v2/pre-flight-checks", None).await)?;
            let mut settings = BTreeMap::new();
            settings.insert(
                "max_batch_size".into(),
                checks["max_batch_size"].to_string(),
            );
            Ok(Described {
                kind: self.identity.kind.clone(),
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

    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
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
                self.answer(self.http.ok("DELETE", &path, None).await)?;
            }
            let began = Instant::now();
            let filled = fill(&self.http, &name, spec, BUILD_EF, data, batch, progress).await;
            let (id, batch) = self.answer(filled)?;
            self.batch = batch;
            let insert_s = began.elapsed().as_secs_f64();
            let probe = json!({
                "query_embeddings": [data.query(0)],
                "n_results": 1,
                "include": [],
            })
            .to_string();
            let path = format!("/collections/{id}/query");
            let answer = self.answer(self.http.ok("POST", &path, Some(probe.into())).await)?;
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
            let count = self.answer(self.http.ok("GET", &path, None).await)?;
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
            let access = self.access.clone();
            let update = !self.rebuild;
            let connect: Connector<ChromaSession> = Arc::new(move || {
                let mut session = root.fresh(&access).map(|http| ChromaSession {
                    search: http.unbounded(),
                    http,
                    query_path: String::new(),
                    config_path: String::new(),
                    name: String::new(),
                    update,
                    bodies: Arc::new(Vec::new()),
                });
                if let Ok(session) = &mut session {
                    session.point_at(&name, &id);
                }
                Box::pin(async move { session })
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
                inner: AsyncSearchers { pool },
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
            self.answer(delete(&self.http, &name).await)
        })
    }
}

/// One keep-alive connection, with every query's request body encoded before the clock starts.
pub struct ChromaSession {
    /// Preparing a point: each request bounded by [`Bounds::request`].
    http: Http,
    /// The same connection for searches, which the ceiling bounds from outside.
    search: Http,
    query_path: String,
    config_path: String,
    name: String,
    /// Change the collection's ef_search at each point (else the collection was made with it).
    update: bool,
    bodies: Arc<Vec<Bytes>>,
}

impl ChromaSession {
    /// Searches collection `name` (id `id`) from now on.
    fn point_at(&mut self, name: &str, id: &str) {
        self.name = name.to_owned();
        self.query_path = format!("/collections/{id}/query");
        self.config_path = format!("/collections/{id}");
    }
}

impl SearchSession for ChromaSession {
    async fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        if self.update {
            let update =
                json!({ "new_configuration": { "hnsw": { "ef_search": work.ef } } }).to_string();
            self.http
                .ok("PUT", &self.config_path, Some(update.into()))
                .await?;
        }
        let collection = self
            .http
            .ok("GET", &format!("/collections/{}", self.name), None)
            .await?;
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
                    Bytes::from(body.to_string())
                })
                .collect(),
        );
        Ok(collection["configuration_json"]["hnsw"]["ef_search"].to_string())
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
            .call("POST", &self.query_path, Some(body))
            .await
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
    inner: AsyncSearchers<ChromaSession>,
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
    /// every session at it. The fill is a build: past `--build-ceiling` it is dropped (the
    /// request in flight with it) and its collection deleted.
    async fn rebuild_for(&mut self, work: &Work) -> Result<(), NotReady> {
        let name = ef_collection(&self.spec, work.ef);
        let began = Instant::now();
        delete(&self.http, &name).await?;
        let progress = BuildProgress::new(Deadline::after(self.build_bound));
        let deadline = *progress.deadline();
        let filled = deadline
            .within(
                BUILD_PHASE,
                BUILD_FLAG,
                fill(
                    &self.http, &name, &self.spec, work.ef, &work.data, self.batch, &progress,
                ),
            )
            .await;
        let id = match filled {
            Ok(Ok((id, _))) => id,
            Ok(Err(e)) if !deadline.passed() => return Err(NotReady::Failed(e)),
            Ok(Err(_)) | Err(_) => {
                let _ = delete(&self.http, &name).await;
                return Err(NotReady::PastBound(format!(
                    "the collection of ef {}: {}; {} rows sent by then",
                    work.ef,
                    deadline.past(BUILD_PHASE, BUILD_FLAG),
                    progress.rows()
                )));
            }
        };
        if let Some(previous) = self.current.replace(name.clone()) {
            delete(&self.http, &previous).await?;
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
        // Drop cannot await: the runtime's handle runs the request from this worker thread
        // (vector-bench's runtime is multi-threaded).
        if let Some(name) = self.current.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let http = self.http.clone();
            let _ = tokio::task::block_in_place(|| runtime.block_on(delete(&http, &name)));
        }
    }
}

impl Searchers for ChromaSearchers {
    fn prepare<'a>(&'a mut self, work: &'a Arc<Work>) -> BoxFuture<'a, Result<String, NotReady>> {
        Box::pin(async move {
            if self.rebuild && work.ef != self.current_ef {
                self.rebuild_for(work).await?;
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
