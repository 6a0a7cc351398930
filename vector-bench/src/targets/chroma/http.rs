//! Chroma's HTTP client: one reqwest client per session (one keep-alive connection), plain or
//! https with the system's one rustls configuration, the token as a sensitive
//! `Authorization: Bearer` header, and the connect phase's first request, whose failures
//! (TLS, refused, plaintext to a TLS port, a token wanted) are one line each.

use std::time::Duration;

use bytes::Bytes;
pub(super) use common::http::Access;
use common::http::{error_chain, json_answer, json_request};
use common::options::TargetSpec;
use reqwest::Client;
use reqwest::header::HeaderValue;
use serde_json::Value;

use super::{Identity, Reach, TargetError};

/// An HTTP client of one Chroma server and database.
#[derive(Clone)]
pub(super) struct Http {
    client: Client,
    /// `http[s]://host:port/api/v2/tenants/T/databases/D`
    base: String,
    root: String,
    /// How long one request may take (`None`: as long as the caller lets it run). A search's
    /// bound is `--ceiling`, kept by the pass and the window, which drop the request with its
    /// future; a timer of the client's own set to the same moment could fire first and make
    /// the timeout an `error`.
    timeout: Option<Duration>,
}

impl Http {
    pub(super) fn new(
        root: &str,
        tenant: &str,
        database: &str,
        access: &Access,
        timeout: Option<Duration>,
    ) -> Result<Http, String> {
        let user_agent = concat!("vector-bench/", env!("CARGO_PKG_VERSION"));
        let client = access.client(user_agent, None);
        Ok(Http {
            client: client.map_err(|e| error_chain(&e))?,
            base: format!("{root}/api/v2/tenants/{tenant}/databases/{database}"),
            root: root.to_owned(),
            timeout,
        })
    }

    /// The same server, credentials and bound on a connection of its own.
    pub(super) fn fresh(&self, access: &Access) -> Result<Http, String> {
        Ok(Http {
            base: self.base.clone(),
            ..Http::new(&self.root, "", "", access, self.timeout)?
        })
    }

    /// The same connection, its requests bounded only by the caller (a search by the
    /// ceiling, which drops it).
    pub(super) fn unbounded(&self) -> Http {
        Http {
            timeout: None,
            ..self.clone()
        }
    }

    pub(super) fn url(&self, path: &str) -> String {
        if path.starts_with("/api") {
            format!("{}{path}", self.root)
        } else {
            format!("{}{path}", self.base)
        }
    }

    /// Sends a request; the client's own error when it got no answer.
    pub(super) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut request = json_request(&self.client, method, self.url(path), body);
        if let Some(timeout) = self.timeout {
            request = request.timeout(timeout);
        }
        request.send().await
    }

    /// Sends a request and returns the status and the JSON body.
    pub(super) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(u16, Value), String> {
        let url = self.url(path);
        json_answer(
            self.send(method, path, body).await,
            &format!("{method} {url}"),
        )
        .await
    }

    /// As [`Http::call`], failing on any status but 2xx with the server's message.
    pub(super) async fn ok(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Value, String> {
        let (status, value) = self.call(method, path, body).await?;
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

/// The `Authorization` header of `spec`'s token: its API key or token (URL or variable), else
/// its password (URL, `--password-file`, `FAIRBENCH_PASSWORD_<NAME>`).
pub(super) fn authorization(
    spec: &TargetSpec,
    reach: &Reach,
) -> Result<Option<HeaderValue>, String> {
    let Some((token, _)) = reach
        .secrets
        .api_key(spec)
        .or_else(|| reach.secrets.password(spec))
    else {
        return Ok(None);
    };
    let mut header = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .map_err(|_| "the token is not valid in an HTTP header".to_owned())?;
    header.set_sensitive(true);
    Ok(Some(header))
}

/// The connect phase's first request: a TLS failure, a refused connection or a plaintext
/// request to a TLS port becomes one line that says what to change.
pub(super) async fn heartbeat(
    http: &Http,
    identity: &Identity,
    host: &str,
    tls: bool,
) -> Result<(), TargetError> {
    let path = "/api/v2/heartbeat";
    let response = http.send("GET", path, None).await.map_err(|e| {
        if let Some(tls) = common::tls::explain(&e, host) {
            return identity.connect_error(tls);
        }
        let text = error_chain(&e);
        let hint = if text.contains("refused") {
            " — is the server running? (scripts/services start)"
        } else if !tls && (e.is_request() || text.contains("closed") || text.contains("reset")) {
            " — is this a TLS port? (add sslmode=verify-full and cacert= to the URL)"
        } else {
            ""
        };
        identity.connect_error(format!("GET {path}: {text}{hint}"))
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let auth = matches!(status.as_u16(), 401 | 403);
    Err(identity.connect_error(format!(
        "GET {path}: HTTP {status}{}",
        if auth {
            " — the server wants a token: token= in the URL or FAIRBENCH_API_KEY_<NAME>"
        } else {
            ""
        }
    )))
}
