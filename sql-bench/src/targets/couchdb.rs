//! CouchDB's HTTP API (Apache CouchDB, and servers that speak it such as pouchdb-server) over
//! reqwest and JSON: one database per table or collection, named `fairbench_…` and marked by a
//! `_local/fairbench` document (local documents are never counted or replicated). The engine is
//! named after what `GET /` says it is, so a PouchDB figure is never published as CouchDB's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use std::sync::Arc;

use common::tls::rustls::ClientConfig;
use common::tls::{Endpoint, Prelude};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value as Json, json};

mod docs;
mod ycsb;

use super::{
    Described, Description, Identity, KvTable, Marked, Reach, Target, TargetError, TlsState,
    location_of_url, op_error, split_authority,
};
use crate::durability::Durability;
use crate::session::{KvSession, KvWorkers, async_workers};

const PREFIX: &str = "fairbench_";
const MARKER_DOC: &str = "_local/fairbench";
const DEFAULT_PORT: u16 = 5984;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Control-path requests (creating, loading, verifying) never wait longer than this.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(300);
/// Keys are zero-padded so the B-tree's text order is their numeric order.
const KEY_DIGITS: usize = 19;

/// Which server answered `GET /`, and how it commits a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// Apache CouchDB 3+: every update is fsynced before the server answers.
    CouchDb3,
    /// Apache CouchDB 1.x/2.x: full commits only when asked (`X-Couch-Full-Commit: true`) or
    /// with `delayed_commits = false`.
    CouchDbOld,
    /// pouchdb-server: PouchDB over LevelDB, written without an fsync per write.
    PouchDb,
    /// Anything else that speaks the API.
    Other,
}

/// An HTTP client bound to one server, with its credentials.
#[derive(Clone)]
struct Http {
    client: Client,
    base: String,
    auth: Option<(String, String)>,
    /// The system's one TLS configuration (`None` = http://).
    tls: Option<Arc<ClientConfig>>,
    flavor: Flavor,
}

/// What one request came back with.
struct Answer {
    status: StatusCode,
    body: Json,
}

impl Answer {
    /// `error: reason`, CouchDB's own words for a refusal.
    fn message(&self) -> String {
        let field = |name| self.body.get(name).and_then(Json::as_str).unwrap_or("");
        format!(
            "HTTP {}: {}: {}",
            self.status.as_u16(),
            field("error"),
            field("reason")
        )
    }
}

impl Http {
    fn new(
        base: String,
        auth: Option<(String, String)>,
        idle: usize,
        tls: Option<Arc<ClientConfig>>,
    ) -> Result<Http, String> {
        let mut builder = Client::builder()
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_max_idle_per_host(idle);
        if let Some(config) = &tls {
            builder = builder.tls_backend_preconfigured((**config).clone());
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        Ok(Http {
            client,
            base,
            auth,
            tls,
            flavor: Flavor::Other,
        })
    }

    fn builder(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}/{path}", self.base));
        if let Some((user, password)) = &self.auth {
            request = request.basic_auth(user, Some(password));
        }
        request
    }

    /// One request with an optional JSON body; the answer's body parsed as JSON.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Json>,
        timeout: Duration,
    ) -> Result<Answer, reqwest::Error> {
        let mut request = self.builder(method, path).timeout(timeout);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(body).expect("JSON serializes"));
            if self.flavor == Flavor::CouchDbOld {
                request = request.header("X-Couch-Full-Commit", "true");
            }
        }
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Json::Null);
        Ok(Answer { status, body })
    }
}

/// `couchdb://[user:password@]host[:port]` → the server's HTTP base URL and credentials
/// (`https://` when `tls`; fairbench's own TLS parameters are removed first).
fn parse_url(url: &str, tls: bool) -> Result<(String, Option<(String, String)>), String> {
    let url = common::tls::strip_params(url);
    let rest = url
        .strip_prefix("couchdb://")
        .ok_or("a CouchDB target looks like couchdb://user:password@127.0.0.1:5984")?;
    let rest = rest.trim_end_matches('/');
    if rest.contains('/') || rest.contains('?') {
        return Err(
            "name only the server: fairbench keeps each table in a database of its own, named fairbench_…".into(),
        );
    }
    let (auth, host) = split_authority(rest, DEFAULT_PORT)?;
    let scheme = if tls { "https" } else { "http" };
    Ok((format!("{scheme}://{host}"), auth))
}

fn database(name: &str) -> String {
    format!("{PREFIX}{name}")
}

fn key_id(key: i64) -> String {
    format!("{key:0KEY_DIGITS$}")
}

/// What the server's welcome (`GET /`) says it is: flavor, kind and version line.
fn identify(welcome: &Json) -> (Flavor, &'static str, String) {
    let text = |key: &str| welcome.get(key).and_then(Json::as_str).unwrap_or("");
    let version = text("version");
    if welcome.get("couchdb").is_some() {
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let flavor = if major >= 3 {
            Flavor::CouchDb3
        } else {
            Flavor::CouchDbOld
        };
        let sha = text("git_sha");
        let sha = if sha.is_empty() {
            String::new()
        } else {
            format!(" ({sha})")
        };
        (flavor, "couchdb", format!("Apache CouchDB {version}{sha}"))
    } else if welcome.get("express-pouchdb").is_some() {
        let adapters = welcome
            .get("pouchdb-adapters")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        (
            Flavor::PouchDb,
            "pouchdb-server",
            format!(
                "pouchdb-server {version} (express-pouchdb; adapters: {adapters}) — not Apache CouchDB"
            ),
        )
    } else {
        let vendor = welcome
            .pointer("/vendor/name")
            .and_then(Json::as_str)
            .unwrap_or("unknown vendor");
        (
            Flavor::Other,
            "couchdb-compatible",
            format!("{vendor} {version}"),
        )
    }
}

/// What each configuration needs of a CouchDB-API server. C1–C4 map to a cluster's `w`
/// quorum on writes over `n` copies; C0 is one node committing each write itself.
fn check(
    durability: Durability,
    flavor: Flavor,
    nodes: usize,
    delayed_commits: Option<&str>,
) -> (String, Vec<String>) {
    let mut mismatches = Vec::new();
    let guarantee = match flavor {
        Flavor::CouchDb3 => {
            "every update is fsynced before the server answers (CouchDB 3 removed delayed commits)"
                .to_owned()
        }
        Flavor::CouchDbOld => {
            if delayed_commits != Some("false") {
                mismatches.push(format!(
                    "couchdb/delayed_commits={} (needs false: a write is acknowledged before its fsync)",
                    delayed_commits.unwrap_or("not readable")
                ));
            }
            "full commit asked for on every write (X-Couch-Full-Commit: true)".to_owned()
        }
        Flavor::PouchDb => {
            mismatches.push(
                "pouchdb-server acknowledges a write once LevelDB has it, without an fsync (leveldown's default sync: false): an acknowledged write can be lost in a power failure".into(),
            );
            "none beyond the OS page cache (LevelDB without sync)".to_owned()
        }
        Flavor::Other => {
            mismatches.push(
                "an unknown CouchDB-compatible server: its commit behaviour cannot be read".into(),
            );
            "unknown".to_owned()
        }
    };
    if durability.is_replicated() {
        // A clustered CouchDB acknowledges after its write quorum (`w`), which this adapter
        // neither sets per request nor can read back from the server: not verifiable.
        mismatches.push(format!(
            "{durability:?} needs {}; the couchdb target measures a single node only (its write quorum cannot be verified)",
            durability.summary()
        ));
    } else if nodes != 1 {
        mismatches.push(format!(
            "{nodes} cluster nodes (_membership; C0 is one node)"
        ));
    }
    (guarantee, mismatches)
}

pub struct CouchTarget {
    identity: Identity,
    http: Http,
    tls: TlsState,
}

impl CouchTarget {
    /// TLS with `sslmode=verify-full|verify-ca|require` (and `cacert=`) in the URL: https to
    /// the same host and port, after a probe handshake that fails fast in one line.
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let url_error = |message: String| TargetError::Url {
            url: spec.url_redacted(),
            message: common::redact::redact_text(&message),
        };
        let settings = reach.tls(spec)?;
        let (base, auth) = parse_url(&reach.url(spec), settings.uses_tls()).map_err(url_error)?;
        let identity = Identity::of(spec, "couchdb");
        let (config, negotiated) = if settings.uses_tls() {
            let config = settings.client_config()?;
            let endpoint = Endpoint::from_url(&spec.url, Some(DEFAULT_PORT))?;
            let negotiated = common::tls::probe(
                &endpoint,
                Prelude::Direct,
                config.clone(),
                common::tls::HANDSHAKE_TIMEOUT,
            )
            .await?;
            (Some(config), Some(negotiated))
        } else {
            (None, None)
        };
        let mut http = Http::new(base, auth, 4, config).map_err(url_error)?;
        let welcome = http
            .call(Method::GET, "", None, CONNECT_TIMEOUT)
            .await
            .map_err(|e| match common::tls::explain(&e, &settings.host) {
                Some(tls) => identity.connect_error(tls),
                None => identity.connect_error(format!(
                    "{e} — is the server running? (scripts/services start)"
                )),
            })?;
        http.flavor = identify(&welcome.body).0;
        let tls = TlsState {
            settings,
            negotiated,
        };
        Ok(Box::new(CouchTarget {
            identity,
            http,
            tls,
        }))
    }

    fn error(&self, e: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(e)
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Json>,
    ) -> Result<Answer, TargetError> {
        self.http
            .call(method, path, body, CONTROL_TIMEOUT)
            .await
            .map_err(|e| self.error(e))
    }

    /// A request that must succeed.
    async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&Json>,
    ) -> Result<Json, TargetError> {
        let answer = self.call(method, path, body).await?;
        if answer.status.is_success() {
            Ok(answer.body)
        } else {
            Err(self.error(format!("{path}: {}", answer.message())))
        }
    }

    /// Deletes the database when it is fairbench's (a foreign one is refused), then creates it
    /// empty and marked.
    async fn recreate(&mut self, name: &str) -> Result<(), TargetError> {
        self.make_room(name).await?;
        let db = database(name);
        self.expect(Method::PUT, &db, None).await?;
        self.expect(
            Method::PUT,
            &format!("{db}/{MARKER_DOC}"),
            Some(&json!({"created_by": "fairbench"})),
        )
        .await?;
        Ok(())
    }

    /// Rows of `_all_docs` between two keys (`end` excluded).
    async fn all_docs(
        &self,
        db: &str,
        range: Option<(String, String)>,
        docs: bool,
    ) -> Result<Vec<Json>, TargetError> {
        let mut path = format!("{db}/_all_docs?include_docs={docs}");
        if let Some((start, end)) = range {
            write!(
                path,
                "&startkey=%22{start}%22&endkey=%22{end}%22&inclusive_end=false"
            )
            .expect("writing to a String");
        }
        let body = self.expect(Method::GET, &path, None).await?;
        Ok(body
            .get("rows")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default())
    }
}

impl Marked for CouchTarget {
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
        Box::pin(async move {
            let db = database(name);
            let head = self.call(Method::GET, &db, None).await?;
            if head.status == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            let marker = self
                .call(Method::GET, &format!("{db}/{MARKER_DOC}"), None)
                .await?;
            Ok(Some(marker.status.is_success()))
        })
    }

    fn object(&self, name: &str) -> String {
        format!("database {}", database(name))
    }

    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.expect(Method::DELETE, &database(name), None)
                .await
                .map(drop)
        })
    }
}

common::identified!(CouchTarget);

impl Target for CouchTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
    }

    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let welcome = self.expect(Method::GET, "", None).await?;
            let (flavor, kind, version) = identify(&welcome);
            let mut settings = BTreeMap::new();
            let nodes = match self.call(Method::GET, "_membership", None).await? {
                answer if answer.status.is_success() => answer
                    .body
                    .get("all_nodes")
                    .and_then(Json::as_array)
                    .map_or(1, Vec::len),
                _ => 1,
            };
            settings.insert("nodes".into(), nodes.to_string());
            let delayed = if flavor == Flavor::CouchDbOld {
                let answer = self
                    .call(
                        Method::GET,
                        "_node/_local/_config/couchdb/delayed_commits",
                        None,
                    )
                    .await?;
                answer.body.as_str().map(str::to_owned)
            } else {
                None
            };
            if let Some(d) = &delayed {
                settings.insert("couchdb/delayed_commits".into(), d.clone());
            }
            let (guarantee, mismatches) = check(durability, flavor, nodes, delayed.as_deref());
            settings.insert("write_durability".into(), guarantee);
            settings.insert("server".into(), kind.into());
            Ok(Description {
                system: Described {
                    kind: kind.into(),
                    version,
                    settings,
                    data_dir: None,
                    location: location_of_url(&self.identity.url_redacted),
                },
                mismatches,
                settings_checks: None,
            })
        })
    }

    fn create_kv<'a>(
        &'a mut self,
        table: KvTable,
        rows: &'a [(i64, String)],
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.recreate(table.name).await?;
            for chunk in rows.chunks(5_000) {
                let docs: Vec<Json> = chunk
                    .iter()
                    .map(|(k, v)| json!({"_id": key_id(*k), "v": v}))
                    .collect();
                let answer = self
                    .expect(
                        Method::POST,
                        &format!("{}/_bulk_docs", database(table.name)),
                        Some(&json!({"docs": docs})),
                    )
                    .await?;
                if let Some(failed) = answer
                    .as_array()
                    .and_then(|a| a.iter().find(|r| r.get("error").is_some()))
                {
                    return Err(self.error(format!("loading {}: {failed}", database(table.name))));
                }
            }
            Ok(())
        })
    }

    fn verify_kv<'a>(
        &'a mut self,
        table: KvTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            if self.ownership(table.name).await? != Some(true) {
                return Err(self.error(format!(
                    "database {} is not fairbench's",
                    database(table.name)
                )));
            }
            Ok(BTreeMap::from([(
                format!("{}.primary_key", table.name),
                "_id (the document id: CouchDB's by-id B-tree)".to_owned(),
            )]))
        })
    }

    fn read_kv(
        &mut self,
        table: KvTable,
    ) -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>> {
        Box::pin(async move {
            let rows = self.all_docs(&database(table.name), None, true).await?;
            let mut found = Vec::with_capacity(rows.len());
            for row in rows {
                let id = row.get("id").and_then(Json::as_str).unwrap_or_default();
                let Ok(key) = id.parse::<i64>() else { continue };
                let value = row
                    .pointer("/doc/v")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                found.push((key, value.to_owned()));
            }
            Ok(found)
        })
    }

    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let rows = self
                .all_docs(
                    &database(table.name),
                    Some((key_id(low), key_id(high))),
                    false,
                )
                .await?;
            Ok(rows.len() as u64)
        })
    }

    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>> {
        let (http, identity) = (self.http.clone(), self.identity.clone());
        let connector: Connector<CouchSession> = std::sync::Arc::new(move || {
            let (http, identity) = (http.clone(), identity.clone());
            Box::pin(async move {
                let mut own = Http::new(http.base.clone(), http.auth.clone(), 1, http.tls.clone())?;
                own.flavor = http.flavor;
                // One request opens the session's connection before any clock starts.
                own.call(Method::GET, "", None, CONNECT_TIMEOUT)
                    .await
                    .map_err(|e| identity.query_error(e).to_string())?;
                let read_base = format!("{}/{}/", own.base, database(read.name));
                let write_base = format!("{}/{}/", own.base, database(write.name));
                Ok(CouchSession {
                    http: own,
                    read_url: read_base.clone(),
                    read_base: read_base.len(),
                    write_url: write_base.clone(),
                    write_base: write_base.len(),
                })
            })
        });
        async_workers(size, connector)
    }

    fn ycsb(&mut self) -> Option<&mut dyn super::YcsbTarget> {
        Some(self)
    }
}

/// A worker's HTTP client (one kept-alive connection), opened on the lane it runs on. The
/// document URLs are rewritten in place, so an operation allocates only what reqwest needs.
struct CouchSession {
    http: Http,
    read_url: String,
    read_base: usize,
    write_url: String,
    write_base: usize,
}

fn http_op_error(e: reqwest::Error) -> OpError {
    op_error(e.is_connect() || e.is_request() || e.is_body(), e)
}

impl KvSession for CouchSession {
    async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        self.write_url.truncate(self.write_base);
        write!(self.write_url, "{key:0KEY_DIGITS$}").expect("writing to a String");
        let body = serde_json::to_vec(&json!({"v": value})).expect("JSON serializes");
        let mut request = self
            .http
            .client
            .put(self.write_url.as_str())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some((user, password)) = &self.http.auth {
            request = request.basic_auth(user, Some(password));
        }
        if self.http.flavor == Flavor::CouchDbOld {
            request = request.header("X-Couch-Full-Commit", "true");
        }
        let response = request.send().await.map_err(http_op_error)?;
        let status = response.status();
        // The body must be read for the connection to be reused.
        let _ = response.bytes().await.map_err(http_op_error)?;
        if status.is_success() {
            Ok(())
        } else {
            Err(OpError::Failed(format!(
                "key {key}: HTTP {}",
                status.as_u16()
            )))
        }
    }

    async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        self.read_url.truncate(self.read_base);
        write!(self.read_url, "{key:0KEY_DIGITS$}").expect("writing to a String");
        let mut request = self.http.client.get(self.read_url.as_str());
        if let Some((user, password)) = &self.http.auth {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await.map_err(http_op_error)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(http_op_error)?;
        if !status.is_success() {
            return Err(OpError::Failed(format!(
                "key {key}: HTTP {}",
                status.as_u16()
            )));
        }
        #[derive(serde::Deserialize)]
        struct Row<'a> {
            #[serde(borrow)]
            v: std::borrow::Cow<'a, str>,
        }
        serde_json::from_slice::<Row<'_>>(&bytes)
            .map(|row| row.v.len())
            .map_err(|e| OpError::Failed(format!("key {key}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_only_the_server() {
        assert_eq!(
            parse_url("couchdb://127.0.0.1", false).unwrap(),
            ("http://127.0.0.1:5984".into(), None)
        );
        let (base, auth) = parse_url("couchdb://admin:pw@127.0.0.1:15984/", false).unwrap();
        assert_eq!(base, "http://127.0.0.1:15984");
        assert_eq!(auth, Some(("admin".into(), "pw".into())));
        assert!(
            parse_url("couchdb://127.0.0.1/mydb", false)
                .unwrap_err()
                .contains("fairbench_")
        );
        assert!(parse_url("http://127.0.0.1:5984", false).is_err());
    }

    #[test]
    fn the_server_is_named_after_its_welcome_and_only_couchdb_3_commits_every_write() {
        let couch = json!({"couchdb": "Welcome", "version": "3.4.3", "git_sha": "e12b967d7"});
        let (flavor, kind, version) = identify(&couch);
        assert_eq!((flavor, kind), (Flavor::CouchDb3, "couchdb"));
        assert_eq!(version, "Apache CouchDB 3.4.3 (e12b967d7)");
        assert!(check(Durability::C0, flavor, 1, None).1.is_empty());
        assert_eq!(check(Durability::C0, flavor, 3, None).1.len(), 1);
        let pouch = json!({"express-pouchdb": "Welcome", "version": "4.2.0", "pouchdb-adapters": ["leveldb"]});
        let (flavor, kind, version) = identify(&pouch);
        assert_eq!((flavor, kind), (Flavor::PouchDb, "pouchdb-server"));
        assert!(version.contains("not Apache CouchDB"), "{version}");
        assert!(check(Durability::C0, flavor, 1, None).1[0].contains("without an fsync"));
        let old = identify(&json!({"couchdb": "Welcome", "version": "2.3.1"})).0;
        assert_eq!(check(Durability::C0, old, 1, Some("true")).1.len(), 1);
        assert!(check(Durability::C0, old, 1, Some("false")).1.is_empty());
    }

    #[test]
    fn keys_sort_as_text_in_numeric_order() {
        assert_eq!(key_id(42), "0000000000000000042");
        assert!(key_id(9) < key_id(10) && key_id(10) < key_id(1 << 50));
    }
}
