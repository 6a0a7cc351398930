//! The HTTP client of a server a tool measures over REST (reqwest over rustls, with the
//! target's one TLS configuration from [`crate::tls`] and its credentials as a sensitive
//! `Authorization` header), made the same way for every tool so that no tool's figures carry
//! a client setting another's do not.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Client;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::tls::rustls::ClientConfig;

/// Longest a TCP connect (and TLS handshake) to the server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How every client of one server is made: its TLS configuration and its credentials.
#[derive(Clone)]
pub struct Access {
    /// The system's one TLS configuration (`None` = http://).
    pub tls: Option<Arc<ClientConfig>>,
    /// `Authorization` (basic, an API key or a bearer token), marked sensitive; `None` =
    /// anonymous.
    pub authorization: Option<HeaderValue>,
}

impl Access {
    /// A client of its own (one measured session, or the control path): no proxy, TCP_NODELAY,
    /// one keep-alive connection never closed for idleness, [`CONNECT_TIMEOUT`], `timeout` on
    /// every request (`None`: none), `user_agent` (`tool/version`), and this access's TLS and
    /// `Authorization`.
    pub fn client(&self, user_agent: &str, timeout: Option<Duration>) -> reqwest::Result<Client> {
        let mut builder = Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1)
            .pool_idle_timeout(None::<Duration>)
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(user_agent);
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(config) = &self.tls {
            builder = builder.tls_backend_preconfigured((**config).clone());
        }
        if let Some(value) = &self.authorization {
            builder =
                builder.default_headers(HeaderMap::from_iter([(AUTHORIZATION, value.clone())]));
        }
        builder.build()
    }
}

/// A request of `method` (`GET`, `POST`, …) to `url`, with `body` as JSON when there is one.
pub fn json_request(
    client: &Client,
    method: &str,
    url: String,
    body: Option<impl Into<reqwest::Body>>,
) -> reqwest::RequestBuilder {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let request = client.request(method, url);
    match body {
        Some(body) => request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body),
        None => request,
    }
}

/// An error and its causes on one line, each cause once (reqwest's own line names only the
/// request; `Connection refused` is in a source).
pub fn error_chain(e: &dyn std::error::Error) -> String {
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

/// The status and JSON body of an answer (`Null` when the body is empty); `request` (`GET
/// /v1/meta`) opens every error: no answer, a body cut short, a body that is not JSON.
pub async fn json_answer(
    answer: reqwest::Result<reqwest::Response>,
    request: &str,
) -> Result<(u16, serde_json::Value), String> {
    let response = answer.map_err(|e| format!("{request}: {}", error_chain(&e)))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("{request}: reading the answer: {}", error_chain(&e)))?;
    if bytes.is_empty() {
        return Ok((status, serde_json::Value::Null));
    }
    let value = serde_json::from_slice(&bytes).map_err(|e| {
        let text = String::from_utf8_lossy(&bytes);
        format!("{request}: the answer is not JSON ({e}): {text:.200}")
    })?;
    Ok((status, value))
}
