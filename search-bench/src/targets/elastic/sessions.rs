//! The measured sessions of an Elasticsearch-API server: one client per worker with its
//! connection already open, sending the prepared `_bulk` and `_search` bodies as they are.

use std::sync::Arc;

use bytes::Bytes;
use common::driver::OpError;
use common::target::op_error;
use reqwest::{Client, Url};

use super::replies::{bulk_item_error, error_reason};
use crate::corpus::Bulk;
use crate::queries::QueryKind;
use crate::session::{BulkSession, SearchSession};
use common::http::error_chain;

/// Whether a request error means the connection is gone (the worker stops) or only this
/// request failed.
fn is_fatal(e: &reqwest::Error) -> bool {
    e.is_connect() || e.is_request() || e.is_body()
}

/// One worker's `_bulk` connection.
pub(super) struct BulkClient {
    pub client: Client,
    pub url: Url,
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
            .map_err(|e| op_error(is_fatal(&e), error_chain(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| op_error(true, error_chain(&e)))?;
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

/// One worker's `_search` connection and the prepared bodies of every set.
pub(super) struct SearchClient {
    pub client: Client,
    pub url: Url,
    pub bodies: Arc<[Vec<Bytes>; 4]>,
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
            .map_err(|e| op_error(is_fatal(&e), error_chain(&e)))?;
        let status = response.status();
        // The whole answer is read, as a client must, so the connection can carry the next.
        let answer = response
            .bytes()
            .await
            .map_err(|e| op_error(true, error_chain(&e)))?;
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
