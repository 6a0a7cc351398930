//! Elasticsearch and OpenSearch (and any server speaking their REST API) over HTTP/1.1 with
//! reqwest, plain or https (common's rustls configuration, verified by default; a probe
//! handshake records the version and cipher and fails fast in one line), with basic auth
//! (`https://USER@HOST`, the password from the URL, `--password-file` or
//! `FAIRBENCH_PASSWORD_<NAME>`) or an API key (`api_key=` or `FAIRBENCH_API_KEY_<NAME>`), sent
//! as a sensitive default header: one persistent connection per worker, opened before the
//! clock starts, the prepared request bodies sent as they are. search-bench's index carries a `_meta` marker in
//! its mapping; an index without it is never touched.

mod replies;
mod sessions;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::http::Access;
use common::lanes::Lanes;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector, Pool};

use reqwest::header::HeaderValue;
use reqwest::{Client, Method, StatusCode, Url};
use serde_json::{Value, json};

use common::http::error_chain;
use replies::{error_reason, parse_answer, path_from_fs_stats, path_from_settings};
use sessions::{BulkClient, SearchClient};

use super::{
    Described, Description, Identity, IndexSpec, Reach, Target, TargetError, TlsState, foreign,
    is_local_host, location_of_host,
};
use crate::answer::Answer;
use crate::queries::{Query, QuerySet};
use crate::session::{IngestWorkers, SearchWorkers, async_ingest, async_workers};

/// Written into the index mapping's `_meta`; an index without it is not search-bench's.
const MARKER: &str = "search-bench";
/// Longest a control request (create, refresh, count) may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(600);

/// Opens an Elasticsearch-API server (`http[s]://[USER@]HOST:PORT`).
pub fn open<'a>(
    spec: &'a TargetSpec,
    index: &'a IndexSpec,
    reach: &'a Reach,
) -> BoxFuture<'a, Result<Box<dyn Target>, TargetError>> {
    Box::pin(ElasticTarget::open(spec, index, reach))
}

pub struct ElasticTarget {
    identity: Identity,
    /// The server's URL without credentials, API key or TLS parameters.
    base: Url,
    index: IndexSpec,
    control: Client,
    access: Access,
    tls: TlsState,
}

/// A client of its own, each request bounded by `timeout` (`None`: unbounded).
fn client(timeout: Option<Duration>, access: &Access) -> Result<Client, String> {
    let user_agent = concat!("search-bench/", env!("CARGO_PKG_VERSION"));
    access
        .client(user_agent, timeout)
        .map_err(|e| e.to_string())
}

/// The `Authorization` header `spec` asks for: an API key (URL or variable) wins over basic
/// auth; a password needs a user name in the URL.
fn authorization(spec: &TargetSpec, reach: &Reach) -> Result<Option<HeaderValue>, String> {
    use base64::Engine as _;
    let value = if let Some((key, _)) = reach.secrets.api_key(spec) {
        format!("ApiKey {}", key.expose())
    } else if let Some((password, source)) = reach.secrets.password(spec) {
        let user = match common::urlparts::userinfo(&spec.url) {
            Some((user, _)) if !user.is_empty() => user,
            _ => {
                return Err(format!(
                    "a password is given by {source}, but the URL names no user \
                     (https://USER@HOST:PORT)"
                ));
            }
        };
        let pair = format!("{user}:{}", password.expose());
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    } else {
        return Ok(None);
    };
    let mut header = HeaderValue::from_str(&value)
        .map_err(|_| "the API key or password is not valid in an HTTP header".to_owned())?;
    header.set_sensitive(true);
    Ok(Some(header))
}

/// `url` without its userinfo, password, API key and fairbench's TLS parameters: what is left
/// is sent with every request and may appear in a client's error.
fn bare_url(url: &str) -> Result<Url, String> {
    let secret_params = [common::credentials::API_KEY_PARAMS, &["password"]].concat();
    let without = common::urlparts::without_params(&common::tls::strip_params(url), &secret_params);
    let mut base = Url::parse(&without).map_err(|e| e.to_string())?;
    let _ = base.set_username("");
    let _ = base.set_password(None);
    Ok(base)
}

impl ElasticTarget {
    pub async fn open(
        spec: &TargetSpec,
        index: &IndexSpec,
        reach: &Reach,
    ) -> Result<Box<dyn Target>, TargetError> {
        let url_error = |message: String| TargetError::Url {
            url: spec.url_redacted(),
            message: common::redact::redact_text(&message),
        };
        let settings = reach.tls(spec)?;
        let base = bare_url(&spec.url).map_err(url_error)?;
        let authorization = authorization(spec, reach).map_err(url_error)?;
        let tls = TlsState::probe(settings.clone(), &spec.url, None).await?;
        let access = Access {
            tls: match settings.uses_tls() {
                true => Some(settings.client_config()?),
                false => None,
            },
            authorization,
        };
        let identity = Identity::of(spec, "elastic");
        let control = client(Some(CONTROL_TIMEOUT), &access).map_err(url_error)?;
        let engine = ElasticTarget {
            identity,
            base,
            index: index.clone(),
            control,
            access,
            tls,
        };
        engine.call(Method::GET, "", None).await?;
        Ok(Box::new(engine))
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let joined = format!("{}/{}", url.path().trim_end_matches('/'), path);
        url.set_path(&joined);
        url
    }

    fn search_url(&self) -> Url {
        let mut url = self.url(&format!("{}/_search", self.index.name));
        if !self.index.request_cache {
            url.set_query(Some("request_cache=false"));
        }
        url
    }

    fn error(&self, message: String) -> TargetError {
        self.identity.query_error(message)
    }

    /// One control request: the status and the raw answer (connection failures are errors).
    async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Bytes), TargetError> {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let mut url = self.url(path);
        if !query.is_empty() {
            url.set_query(Some(query));
        }
        let mut request = self.control.request(method.clone(), url);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).expect("JSON values serialize"));
        }
        let response = request.send().await.map_err(|e| {
            if let Some(tls) = common::tls::explain(&e, self.host()) {
                return self.identity.connect_error(tls);
            }
            let closed = error_chain(&e).contains("connection closed before message completed");
            if e.is_connect() || (e.is_timeout() && path.is_empty()) || (closed && path.is_empty())
            {
                let hint = if error_chain(&e).contains("refused") {
                    " — is the server running? (scripts/services start)"
                } else if closed && self.base.scheme() == "http" {
                    " — is this an https port? (use https://)"
                } else {
                    ""
                };
                self.identity
                    .connect_error(format!("{}{hint}", error_chain(&e)))
            } else {
                self.error(format!("{method} /{path}: {}", error_chain(&e)))
            }
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| {
            self.error(format!(
                "{method} /{path}: reading the answer: {}",
                error_chain(&e)
            ))
        })?;
        Ok((status, bytes))
    }

    /// A control request that must succeed; 4xx/5xx become errors with the server's reason.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, TargetError> {
        let (status, bytes) = self.send(method.clone(), path, body).await?;
        if !status.is_success() {
            let path = path.split('?').next().unwrap_or(path);
            let hint = match status {
                StatusCode::UNAUTHORIZED => {
                    " — check the user and password (FAIRBENCH_PASSWORD_<NAME>) or the API key \
                     (FAIRBENCH_API_KEY_<NAME>)"
                }
                _ => "",
            };
            return Err(self.error(format!(
                "HTTP {} from {method} /{path}: {}{hint}",
                status.as_u16(),
                error_reason(&bytes)
            )));
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            self.error(format!(
                "{method} /{path} answered with something that is not JSON ({e}): {}",
                error_reason(&bytes)
            ))
        })
    }

    /// `Some(true)` ours, `Some(false)` someone else's, `None` absent.
    async fn ownership(&self) -> Result<Option<bool>, TargetError> {
        let name = &self.index.name;
        let (status, bytes) = self
            .send(Method::GET, &format!("{name}/_mapping"), None)
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(self.error(format!(
                "HTTP {} from GET /{name}/_mapping: {}",
                status.as_u16(),
                error_reason(&bytes)
            )));
        }
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        // An alias answers under the concrete index's name: never ours.
        let marker = value
            .get(name)
            .and_then(|i| i.pointer("/mappings/_meta/created_by"))
            .and_then(Value::as_str);
        Ok(Some(marker == Some(MARKER)))
    }

    fn host(&self) -> &str {
        self.base.host_str().unwrap_or("")
    }

    /// Where the node keeps its data, as it says itself: `path.data` from its settings, or
    /// the data paths of its file-system stats when the setting is left at its default.
    /// `None` when the node will not tell (a security plugin, an old version).
    async fn data_path(&self) -> Option<PathBuf> {
        let settings = self
            .call(
                Method::GET,
                "_nodes/_local/settings?filter_path=nodes.*.settings.path",
                None,
            )
            .await
            .ok()?;
        if let Some(path) = path_from_settings(&settings) {
            return Some(path);
        }
        let stats = self
            .call(
                Method::GET,
                "_nodes/_local/stats/fs?filter_path=nodes.*.fs.data.path",
                None,
            )
            .await
            .ok()?;
        path_from_fs_stats(&stats)
    }

    /// The report's word on the shard request cache, as this run used it.
    fn cache_note(&self) -> String {
        if self.index.request_cache {
            "The shard request cache was left as configured (on by default): Elasticsearch/OpenSearch may serve a repeated size-0 aggregation from it rather than recompute it; --no-request-cache bypasses it.".into()
        } else {
            "--no-request-cache: every search is sent with `request_cache=false`, so no size-0 aggregation is served from Elasticsearch's shard request cache.".into()
        }
    }

    /// A connector for worker sessions: each its own client, its connection opened (by a
    /// `GET /`) on the lane it will run on, before any clock starts.
    fn connector(&self) -> Connector<Client> {
        let base = self.base.clone();
        let identity = self.identity.clone();
        let access = self.access.clone();
        Arc::new(move || {
            let base = base.clone();
            let identity = identity.clone();
            let access = access.clone();
            Box::pin(async move {
                let client = client(None, &access)?;
                let response = client
                    .get(base)
                    .send()
                    .await
                    .map_err(|e| identity.connect_error(error_chain(&e)).to_string())?;
                // Reading the body returns the connection to the client's pool for reuse.
                let _ = response.bytes().await;
                Ok(client)
            })
        })
    }

    async fn read_settings(&self) -> Result<BTreeMap<String, String>, TargetError> {
        let name = &self.index.name;
        let settings = self
            .call(
                Method::GET,
                &format!("{name}/_settings?include_defaults=true&flat_settings=true"),
                None,
            )
            .await?;
        let mut verified = BTreeMap::new();
        for key in [
            "index.number_of_shards",
            "index.number_of_replicas",
            "index.refresh_interval",
            "index.translog.durability",
            "index.requests.cache.enable",
        ] {
            let value = settings[name]["settings"][key]
                .as_str()
                .or_else(|| settings[name]["defaults"][key].as_str());
            if let Some(value) = value {
                verified.insert(key.to_owned(), value.to_lowercase());
            }
        }
        verified.insert(
            "search.request_cache".into(),
            if self.index.request_cache {
                "as configured".into()
            } else {
                "bypassed (request_cache=false)".into()
            },
        );
        let mapping = self
            .call(Method::GET, &format!("{name}/_mapping"), None)
            .await?;
        if let Some(fields) = mapping[name]["mappings"]["properties"].as_object() {
            for (field, spec) in fields {
                let kind = spec["type"].as_str().unwrap_or("?");
                verified.insert(format!("mapping.{field}"), kind.to_owned());
            }
        }
        Ok(verified)
    }
}

/// The explicit mapping (seed 000): text title/body, keyword category, numeric price/stock;
/// one shard, no replica.
fn index_body() -> Value {
    json!({
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {
            "_meta": {"created_by": MARKER},
            "dynamic": "strict",
            "properties": {
                "title": {"type": "text"},
                "body": {"type": "text"},
                "category": {"type": "keyword"},
                "price": {"type": "double"},
                "stock": {"type": "integer"},
            },
        },
    })
}

/// How the server was built, as `GET /` says (`version.build_flavor`, `build_type`,
/// `build_hash`, `lucene_version`): Elasticsearch names a flavour (`default`), OpenSearch its
/// distribution instead; what a server leaves out is left out.
fn build_settings(root: &Value) -> BTreeMap<String, String> {
    let mut settings = BTreeMap::new();
    for key in [
        "distribution",
        "build_flavor",
        "build_type",
        "build_hash",
        "lucene_version",
    ] {
        if let Some(value) = root
            .pointer(&format!("/version/{key}"))
            .and_then(Value::as_str)
        {
            settings.insert(format!("version.{key}"), value.to_owned());
        }
    }
    settings
}

common::identified!(ElasticTarget);

impl Target for ElasticTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let root = self.call(Method::GET, "", None).await?;
            let number = root.pointer("/version/number").and_then(Value::as_str);
            let Some(number) = number else {
                return Err(self.error(
                    "GET / did not answer like Elasticsearch or OpenSearch (no version.number)"
                        .into(),
                ));
            };
            let distribution = root
                .pointer("/version/distribution")
                .and_then(Value::as_str)
                .unwrap_or("elasticsearch");
            let (kind, product) = if distribution == "opensearch" {
                ("opensearch", "OpenSearch")
            } else {
                ("elasticsearch", "Elasticsearch")
            };
            let settings = build_settings(&root);
            let local = is_local_host(self.host());
            let (server_pid, data_dir) = if local {
                let port = self.base.port_or_known_default();
                (
                    port.and_then(common::procstat::listening_pid),
                    self.data_path().await,
                )
            } else {
                (None, None)
            };
            Ok(Description {
                system: Described {
                    kind: kind.into(),
                    version: format!("{product} {number}"),
                    location: location_of_host(self.host()),
                    data_dir,
                    settings,
                },
                server_pid,
                notes: vec![self.cache_note()],
                tls: Some(self.tls.clone()),
            })
        })
    }

    fn check_index(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            match self.ownership().await? {
                Some(false) => Err(foreign(
                    &self.identity,
                    &format!("index `{}`", self.index.name),
                )),
                _ => Ok(()),
            }
        })
    }

    fn create_index(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            self.check_index().await?;
            let name = self.index.name.clone();
            if self.ownership().await? == Some(true) {
                self.call(Method::DELETE, &name, None).await?;
            }
            self.call(Method::PUT, &name, Some(index_body())).await?;
            self.call(
                Method::GET,
                &format!("_cluster/health/{name}?wait_for_status=yellow&timeout=60s"),
                None,
            )
            .await?;
            self.read_settings().await
        })
    }

    fn open_ingest(&mut self, n: usize) -> BoxFuture<'_, Result<IngestWorkers, TargetError>> {
        Box::pin(async move {
            let connect = self.connector();
            let mut url = self.url(&format!("{}/_bulk", self.index.name));
            // The acknowledgement must not wait for a refresh: the suite refreshes once at the end.
            url.set_query(Some("refresh=false"));
            let mut sessions = Vec::with_capacity(n);
            for slot in 0..n {
                let client = Lanes::shared()
                    .spawn(slot, connect())
                    .await
                    .map_err(|e| self.error(format!("opening a session failed: {e}")))?
                    .map_err(|message| self.error(message))?;
                sessions.push(BulkClient {
                    client,
                    url: url.clone(),
                });
            }
            Ok(async_ingest(sessions))
        })
    }

    fn refresh(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            self.call(Method::POST, &format!("{}/_refresh", self.index.name), None)
                .await
                .map(drop)
        })
    }

    fn count(&mut self) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let answer = self
                .call(Method::GET, &format!("{}/_count", self.index.name), None)
                .await?;
            answer["count"]
                .as_u64()
                .ok_or_else(|| self.error(format!("_count answered without a count: {answer}")))
        })
    }

    fn answer<'a>(
        &'a mut self,
        _query: &'a Query,
        body: &'a Bytes,
    ) -> BoxFuture<'a, Result<Answer, TargetError>> {
        Box::pin(async move {
            let body: Value = serde_json::from_slice(body).expect("the suite's bodies are JSON");
            let path = match self.search_url().query() {
                Some(q) => format!("{}/_search?{q}", self.index.name),
                None => format!("{}/_search", self.index.name),
            };
            let value = self.call(Method::POST, &path, Some(body)).await?;
            parse_answer(&value).map_err(|e| self.error(format!("_search answer: {e}")))
        })
    }

    fn open_search<'a>(
        &'a mut self,
        n: usize,
        sets: &'a [QuerySet],
    ) -> BoxFuture<'a, Result<Box<dyn SearchWorkers>, TargetError>> {
        Box::pin(async move {
            let mut bodies: [Vec<Bytes>; 4] = Default::default();
            let mut set_len = [0; 4];
            for set in sets {
                bodies[set.kind as usize].clone_from(&set.bodies);
                set_len[set.kind as usize] = set.bodies.len();
            }
            let bodies = Arc::new(bodies);
            let url = self.search_url();
            let connect = self.connector();
            let make: Connector<SearchClient> = Arc::new(move || {
                let connect = connect.clone();
                let bodies = bodies.clone();
                let url = url.clone();
                Box::pin(async move {
                    Ok(SearchClient {
                        client: connect().await?,
                        url,
                        bodies,
                    })
                })
            });
            let pool = Pool::open(n, make)
                .await
                .map_err(|message| self.error(message))?;
            Ok(async_workers(pool, set_len))
        })
    }

    fn drop_index(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            if self.ownership().await? == Some(true) {
                self.call(Method::DELETE, &self.index.name.clone(), None)
                    .await?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str) -> TargetSpec {
        TargetSpec::parse(&format!("os={url}")).unwrap()
    }

    #[test]
    fn credentials_become_one_sensitive_authorization_header() {
        let reach = Reach::default();
        let basic = authorization(&spec("https://bench:pw@127.0.0.1:9200"), &reach)
            .unwrap()
            .unwrap();
        // base64("bench:pw")
        assert_eq!(basic.to_str().unwrap(), "Basic YmVuY2g6cHc=");
        assert!(basic.is_sensitive());
        let keyed = authorization(&spec("https://127.0.0.1:9200?api_key=k3y"), &reach)
            .unwrap()
            .unwrap();
        assert_eq!(keyed.to_str().unwrap(), "ApiKey k3y");
        assert!(keyed.is_sensitive());
        assert!(
            authorization(&spec("https://127.0.0.1:9200"), &reach)
                .unwrap()
                .is_none()
        );
        let error = authorization(&spec("https://127.0.0.1:9200?password=pw"), &reach).unwrap_err();
        assert!(error.contains("names no user"), "{error}");
    }

    #[test]
    fn the_build_is_read_from_the_root_document_and_what_is_absent_is_left_out() {
        let elasticsearch = json!({"version": {"number": "8.18.0", "build_flavor": "default",
            "build_type": "unknown", "build_hash": "04e979a", "lucene_version": "9.12.1"}});
        let settings = build_settings(&elasticsearch);
        assert_eq!(settings["version.build_flavor"], "default");
        assert_eq!(settings["version.lucene_version"], "9.12.1");
        assert!(!settings.contains_key("version.distribution"));
        let opensearch = json!({"version": {"distribution": "opensearch", "number": "2.19.6",
            "build_type": "tar"}});
        let settings = build_settings(&opensearch);
        assert_eq!(settings["version.distribution"], "opensearch");
        assert!(!settings.contains_key("version.build_flavor"));
        assert_eq!(settings.len(), 2);
    }

    #[test]
    fn the_url_sent_carries_no_credential_and_no_tls_parameter() {
        let url = "https://bench:pw@127.0.0.1:9200/?api_key=k&password=p&cacert=/ca.pem&x=1";
        assert_eq!(
            bare_url(url).unwrap().as_str(),
            "https://127.0.0.1:9200/?x=1"
        );
    }
}
