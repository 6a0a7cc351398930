//! Elasticsearch and OpenSearch (and any server speaking their REST API) over plain HTTP/1.1
//! with reqwest: one persistent connection per worker, opened before the clock starts, the
//! prepared request bodies sent as they are. search-bench's index carries a `_meta` marker in
//! its mapping; an index without it is never touched.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::driver::OpError;
use common::lanes::Lanes;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector, Pool};
use reqwest::{Client, Method, StatusCode, Url};
use serde_json::{Value, json};

use super::{
    BulkSession, Description, Engine, EngineError, Identity, IndexSpec, IngestWorkers,
    SearchSession, SearchWorkers, op_error,
};
use crate::answer::{Answer, parse_buckets};
use crate::corpus::Bulk;
use crate::queries::{Query, QueryKind, QuerySet};
use crate::workloads::ingest::async_ingest;
use crate::workloads::search::async_workers;

/// Written into the index mapping's `_meta`; an index without it is not search-bench's.
const MARKER: &str = "search-bench";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a control request (create, refresh, count) may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(600);

pub struct ElasticEngine {
    identity: Identity,
    base: Url,
    index: IndexSpec,
    control: Client,
}

fn client(timeout: Option<Duration>) -> Result<Client, String> {
    let mut builder = Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(None::<Duration>)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("search-bench/", env!("CARGO_PKG_VERSION")));
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    builder.build().map_err(|e| e.to_string())
}

/// The error and its causes in one line (reqwest keeps `Connection refused` in a source).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The server's own reason from an error body (`{"error":{"type","reason"}}`), else the text.
fn error_reason(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let reason = parsed.as_ref().and_then(|v| {
        let error = v.get("error")?;
        match error {
            Value::String(s) => Some(s.clone()),
            _ => {
                let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
                let reason = error.get("reason").and_then(Value::as_str).unwrap_or("");
                Some(format!("{kind}: {reason}"))
            }
        }
    });
    reason.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        text.chars().take(300).collect()
    })
}

impl ElasticEngine {
    pub async fn open(
        spec: &TargetSpec,
        index: &IndexSpec,
    ) -> Result<Box<dyn Engine>, EngineError> {
        let url_error = |message: String| EngineError::Url {
            url: spec.url_redacted(),
            message,
        };
        let base = Url::parse(&spec.url).map_err(|e| url_error(e.to_string()))?;
        if base.scheme() == "https" {
            return Err(url_error(
                "https needs TLS, which search-bench is built without; reach the server over http (on loopback)".into(),
            ));
        }
        let identity = Identity {
            name: spec.name.clone().unwrap_or_else(|| "elastic".into()),
            kind: "elastic".into(),
            url_redacted: spec.url_redacted(),
        };
        let control = client(Some(CONTROL_TIMEOUT)).map_err(url_error)?;
        let engine = ElasticEngine {
            identity,
            base,
            index: index.clone(),
            control,
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

    fn error(&self, message: String) -> EngineError {
        EngineError::Request {
            system: self.identity.name.clone(),
            message,
        }
    }

    /// One control request: the status and the raw answer (connection failures are errors).
    async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Bytes), EngineError> {
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
            if e.is_connect() || (e.is_timeout() && path.is_empty()) {
                let hint = if chain(&e).contains("refused") {
                    " — is the server running? (scripts/services start)"
                } else {
                    ""
                };
                EngineError::Connect {
                    system: self.identity.name.clone(),
                    url: self.identity.url_redacted.clone(),
                    message: format!("{}{hint}", chain(&e)),
                }
            } else {
                self.error(format!("{method} /{path}: {}", chain(&e)))
            }
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| {
            self.error(format!(
                "{method} /{path}: reading the answer: {}",
                chain(&e)
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
    ) -> Result<Value, EngineError> {
        let (status, bytes) = self.send(method.clone(), path, body).await?;
        if !status.is_success() {
            let path = path.split('?').next().unwrap_or(path);
            return Err(self.error(format!(
                "HTTP {} from {method} /{path}: {}",
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
    async fn ownership(&self) -> Result<Option<bool>, EngineError> {
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

    fn is_local(&self) -> bool {
        match self.base.host_str() {
            Some("localhost") => true,
            Some(host) => host
                .trim_matches(['[', ']'])
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()),
            None => false,
        }
    }

    /// A connector for worker sessions: each its own client, its connection opened (by a
    /// `GET /`) on the lane it will run on, before any clock starts.
    fn connector(&self) -> Connector<Client> {
        let base = self.base.clone();
        let identity = self.identity.clone();
        Arc::new(move || {
            let base = base.clone();
            let identity = identity.clone();
            Box::pin(async move {
                let client = client(None)?;
                let response = client.get(base).send().await.map_err(|e| {
                    EngineError::Connect {
                        system: identity.name.clone(),
                        url: identity.url_redacted.clone(),
                        message: chain(&e),
                    }
                    .to_string()
                })?;
                // Reading the body returns the connection to the client's pool for reuse.
                let _ = response.bytes().await;
                Ok(client)
            })
        })
    }

    async fn read_settings(&self) -> Result<BTreeMap<String, String>, EngineError> {
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

impl Engine for ElasticEngine {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn identity_mut(&mut self) -> &mut Identity {
        &mut self.identity
    }

    fn describe(&mut self) -> BoxFuture<'_, Result<Description, EngineError>> {
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
            let server_pid = if self.is_local() {
                self.base
                    .port_or_known_default()
                    .and_then(common::procstat::listening_pid)
            } else {
                None
            };
            Ok(Description {
                kind: kind.into(),
                version: format!("{product} {number}"),
                server_pid,
                embedded: false,
            })
        })
    }

    fn check_index(&mut self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async move {
            match self.ownership().await? {
                Some(false) => Err(EngineError::Foreign {
                    system: self.identity.name.clone(),
                    object: format!("index `{}`", self.index.name),
                }),
                _ => Ok(()),
            }
        })
    }

    fn create_index(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, EngineError>> {
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

    fn open_ingest(&mut self, n: usize) -> BoxFuture<'_, Result<IngestWorkers, EngineError>> {
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

    fn refresh(&mut self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async move {
            self.call(Method::POST, &format!("{}/_refresh", self.index.name), None)
                .await
                .map(drop)
        })
    }

    fn count(&mut self) -> BoxFuture<'_, Result<u64, EngineError>> {
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
    ) -> BoxFuture<'a, Result<Answer, EngineError>> {
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
    ) -> BoxFuture<'a, Result<Box<dyn SearchWorkers>, EngineError>> {
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

    fn drop_index(&mut self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async move {
            if self.ownership().await? == Some(true) {
                self.call(Method::DELETE, &self.index.name.clone(), None)
                    .await?;
            }
            Ok(())
        })
    }
}

/// Reads total (which must be exact), hit ids and buckets from a `_search` answer.
fn parse_answer(value: &Value) -> Result<Answer, String> {
    let total = &value["hits"]["total"];
    let (count, relation) = match total {
        Value::Number(n) => (n.as_u64(), "eq"),
        _ => (
            total["value"].as_u64(),
            total["relation"].as_str().unwrap_or("eq"),
        ),
    };
    let count = count.ok_or("no hits.total")?;
    if relation != "eq" {
        return Err(format!(
            "hits.total is a lower bound ({relation} {count}), not exact"
        ));
    }
    let top_ids = value["hits"]["hits"]
        .as_array()
        .map(|hits| {
            hits.iter()
                .filter_map(|h| h["_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let buckets = match value.get("aggregations") {
        Some(aggs) => Some(parse_buckets(aggs)?),
        None => None,
    };
    Ok(Answer {
        total: count,
        top_ids,
        buckets,
    })
}

/// Whether a request error means the connection is gone (the worker stops) or only this
/// request failed.
fn is_fatal(e: &reqwest::Error) -> bool {
    e.is_connect() || e.is_request() || e.is_body()
}

/// One worker's `_bulk` connection.
struct BulkClient {
    client: Client,
    url: Url,
}

impl BulkSession for BulkClient {
    async fn bulk(&mut self, bulk: &Bulk) -> Result<(), OpError> {
        let response = self
            .client
            .post(self.url.clone())
            .header("content-type", "application/x-ndjson")
            .body(bulk.body.clone())
            .send()
            .await
            .map_err(|e| op_error(is_fatal(&e), chain(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| op_error(true, chain(&e)))?;
        if !status.is_success() {
            return Err(OpError::Failed(format!(
                "HTTP {} from _bulk: {}",
                status.as_u16(),
                error_reason(&body)
            )));
        }
        // `"errors":false` comes first in every answer; only a failed batch is parsed whole.
        const NO_ERRORS: &[u8] = b"\"errors\":false";
        let head = &body[..body.len().min(64)];
        if head.windows(NO_ERRORS.len()).any(|w| w == NO_ERRORS) {
            return Ok(());
        }
        Err(OpError::Failed(bulk_item_error(&body)))
    }
}

/// The first failed item of a `_bulk` answer with `errors: true`.
fn bulk_item_error(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let failed = value["items"].as_array().and_then(|items| {
        let count = items
            .iter()
            .filter(|i| i["index"]["error"].is_object())
            .count();
        let first = items.iter().find(|i| i["index"]["error"].is_object())?;
        let error = &first["index"]["error"];
        Some(format!(
            "_bulk rejected {count} documents; first: {}: {}",
            error["type"].as_str().unwrap_or("error"),
            error["reason"].as_str().unwrap_or("")
        ))
    });
    failed.unwrap_or_else(|| {
        format!(
            "_bulk answered without `\"errors\":false`: {}",
            error_reason(body)
        )
    })
}

/// One worker's `_search` connection and the prepared bodies of every set.
struct SearchClient {
    client: Client,
    url: Url,
    bodies: Arc<[Vec<Bytes>; 4]>,
}

impl SearchSession for SearchClient {
    async fn search(&mut self, kind: QueryKind, index: usize) -> Result<(), OpError> {
        let body = self.bodies[kind as usize][index].clone();
        let response = self
            .client
            .post(self.url.clone())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| op_error(is_fatal(&e), chain(&e)))?;
        let status = response.status();
        // The whole answer is read, as a client must, so the connection can carry the next.
        let answer = response
            .bytes()
            .await
            .map_err(|e| op_error(true, chain(&e)))?;
        if status.is_success() {
            Ok(())
        } else {
            Err(OpError::Failed(format!(
                "HTTP {} from _search: {}",
                status.as_u16(),
                error_reason(&answer)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_show_their_reason() {
        let body = br#"{"error":{"root_cause":[],"type":"index_not_found_exception","reason":"no such index [x]"},"status":404}"#;
        assert_eq!(
            error_reason(body),
            "index_not_found_exception: no such index [x]"
        );
        assert_eq!(error_reason(b"plain text"), "plain text");
    }

    #[test]
    fn answers_need_exact_totals() {
        let exact = json!({"hits": {"total": {"value": 12, "relation": "eq"},
            "hits": [{"_id": "3"}, {"_id": "9"}]}});
        let answer = parse_answer(&exact).unwrap();
        assert_eq!(answer.total, 12);
        assert_eq!(answer.top_ids, ["3", "9"]);
        assert!(answer.buckets.is_none());
        let capped = json!({"hits": {"total": {"value": 10000, "relation": "gte"}, "hits": []}});
        assert!(parse_answer(&capped).unwrap_err().contains("lower bound"));
    }

    #[test]
    fn a_failed_bulk_item_is_reported() {
        let body = br#"{"took":3,"errors":true,"items":[{"index":{"_id":"1","status":201}},{"index":{"_id":"2","status":400,"error":{"type":"strict_dynamic_mapping_exception","reason":"mapping set to strict"}}}]}"#;
        let message = bulk_item_error(body);
        assert!(message.contains("rejected 1 documents"), "{message}");
        assert!(
            message.contains("strict_dynamic_mapping_exception"),
            "{message}"
        );
    }
}
