//! CouchDB's (and pouchdb-server's) YCSB database and sessions: one document per record in
//! `fairbench_ycsb`, `_id` the record's key (the by-id B-tree), one text field per `field{n}`.
//! CouchDB has no partial update: an update, a read-modify-write and a delete each read the
//! document and its `_rev`, then write with that `_rev`, which the server accepts only if the
//! document is still at that revision (an atomic compare-and-set; a 409 conflict restarts both).
//! A scan is `_all_docs` from `startkey` with a `limit`: `_all_docs` orders ids by their raw
//! bytes (Erlang's binary comparison; views use ICU), which `create_table` checks on a probe
//! database; a server of unknown kind has its scans refused. A write is counted only when the
//! server answers 201/200 (committed); 202 (accepted before its copies committed it) fails it.
//! The load is one `_bulk_docs` per batch, every row checked.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use common::driver::OpError;
use common::pool::{BoxFuture, Connector};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value as Json, json};

use super::{CONNECT_TIMEOUT, CouchTarget, Flavor, Http, database, http_op_error};
use crate::session::ycsb::keys::key_of;
use crate::session::ycsb::stats::Kind;
use crate::session::ycsb::{Fetched, Record, YcsbSession, YcsbWorkers, async_workers};
use crate::targets::ycsb::{YcsbTable, YcsbTarget, in_order};
use crate::targets::{Marked, TargetError};

/// Keys asked for in one `_all_docs` `keys` request when the load's sample is read back.
const READ_CHUNK: usize = 1_000;
/// Conflicts in a row (another writer between our read and our write) before an update fails.
const CONFLICT_RETRIES: usize = 16;
/// The database the key order is probed in, created and dropped in `create_table`.
const ORDER_PROBE: &str = "ycsb_key_order_probe";

const UPDATE_ANSWERED_BY: &str = "GET the document and its _rev, then PUT it whole with that \
    _rev (CouchDB has no partial update); a 409 conflict from a writer in between restarts both";
const RMW_ANSWERED_BY: &str = "GET the document and its _rev, then PUT it with that _rev: an \
    atomic compare-and-set on the revision (no transaction; a 409 conflict from a writer in \
    between restarts the read and the write)";
const DELETE_ANSWERED_BY: &str = "GET the document's _rev, then DELETE with that _rev (a 409 \
    conflict restarts both)";
const SCAN_REFUSED: &str = "an unknown CouchDB-compatible server: the order of its _all_docs \
    cannot be known, so a scan from a key may return other records than YCSB's";

/// `field0` … `field{n-1}`, built once per table.
fn field_names(table: &YcsbTable) -> Arc<[String]> {
    (0..table.shape.fields)
        .map(|i| format!("field{i}"))
        .collect()
}

/// A stored document's fields (every member but CouchDB's own `_id`, `_rev`, …), counted as
/// the session traits count them; a field that is not text counts with no bytes.
fn fetched(document: &Map<String, Json>) -> Fetched {
    let mut got = Fetched {
        records: 1,
        ..Fetched::default()
    };
    for (name, value) in document {
        if name.starts_with('_') {
            continue;
        }
        got.fields += 1;
        got.bytes += value.as_str().map_or(0, str::len);
    }
    got
}

/// The record's document: every field, in order, and `_id` when given.
fn record_document(key: Option<&str>, names: &[String], values: &[&str]) -> Json {
    let mut document = Map::with_capacity(names.len() + 1);
    if let Some(key) = key {
        document.insert("_id".into(), Json::from(key));
    }
    for (name, value) in names.iter().zip(values) {
        document.insert(name.clone(), Json::from(*value));
    }
    Json::Object(document)
}

/// `text` as a URL query value (everything but unreserved characters percent-encoded).
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            write!(out, "%{byte:02X}").expect("writing to a String");
        }
    }
    out
}

/// `_all_docs` query of a JSON string key.
fn key_param(name: &str, key: &str) -> String {
    format!("{name}={}", query_value(&Json::from(key).to_string()))
}

/// The ids the key-order probe writes: YCSB keys of several lengths, and ids on which byte
/// order and ICU collation disagree (`A` < `_` < `a` in bytes; ICU puts `_` first, `a` before `A`).
fn probe_ids() -> Vec<String> {
    let mut ids: Vec<String> = (0..12).map(key_of).collect();
    ids.extend(["user1", "user10", "user2", "userA", "user_", "usera"].map(String::from));
    ids
}

impl CouchTarget {
    /// Writes the probe ids into a database of their own and checks that `_all_docs` returns
    /// them in byte order; the evidence names the order it saw.
    async fn probe_key_order(&mut self) -> Result<String, TargetError> {
        self.recreate(ORDER_PROBE).await?;
        let ids = probe_ids();
        let docs: Vec<Json> = ids.iter().map(|id| json!({"_id": id})).collect();
        let db = database(ORDER_PROBE);
        let written = self
            .expect(
                Method::POST,
                &format!("{db}/_bulk_docs"),
                Some(&json!({"docs": docs})),
            )
            .await;
        let listed = match written {
            Ok(_) => self.all_docs(&db, None, false).await,
            Err(e) => Err(e),
        };
        self.drop_own(ORDER_PROBE).await?;
        let got: Vec<String> = listed?
            .iter()
            .filter_map(|row| row.get("id").and_then(Json::as_str).map(str::to_owned))
            .collect();
        let mut bytewise = ids;
        bytewise.sort_unstable();
        if got != bytewise {
            return Err(self.error(format!(
                "_all_docs returned the probe ids in the order {got:?}, not their byte order \
                 {bytewise:?}: a YCSB scan from a key would return other records"
            )));
        }
        Ok(
            "byte order of the ids (a probe's _all_docs: user1 < user10 < user2 < userA < \
            user_ < usera, and 12 YCSB keys in byte order)"
                .to_owned(),
        )
    }

    /// What the database's own info says of where and how its documents are kept.
    async fn storage_evidence(&self, table: &YcsbTable) -> Result<String, TargetError> {
        let info = self
            .expect(Method::GET, &database(table.name), None)
            .await?;
        if let Some(cluster) = info.get("cluster").and_then(Json::as_object) {
            let part = |k: &str| cluster.get(k).map_or("?".to_owned(), Json::to_string);
            return Ok(format!(
                "cluster n={} q={} w={} r={} (database info)",
                part("n"),
                part("q"),
                part("w"),
                part("r")
            ));
        }
        let text = |k: &str| info.get(k).and_then(Json::as_str).unwrap_or("?");
        Ok(format!(
            "adapter {} ({}) (database info)",
            text("adapter"),
            text("backend_adapter")
        ))
    }
}

impl YcsbTarget for CouchTarget {
    fn refuses(&self, kind: Kind) -> Option<String> {
        (kind == Kind::Scan && self.http.flavor == Flavor::Other).then(|| SCAN_REFUSED.to_owned())
    }

    fn answered_by(&self, kind: Kind) -> Option<String> {
        match kind {
            Kind::Update => Some(UPDATE_ANSWERED_BY.to_owned()),
            Kind::ReadModifyWrite => Some(RMW_ANSWERED_BY.to_owned()),
            Kind::Delete => Some(DELETE_ANSWERED_BY.to_owned()),
            _ => None,
        }
    }

    /// The probe database the key order is read with is fairbench's too.
    fn check_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.ensure_ours_or_absent(ORDER_PROBE).await?;
            self.ensure_ours_or_absent(table.name).await
        })
    }

    fn create_table<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let order = self.probe_key_order().await?;
            self.recreate(table.name).await?;
            let storage = self.storage_evidence(table).await?;
            Ok(BTreeMap::from([
                (
                    format!("{}.primary_key", table.name),
                    "_id (the document id: CouchDB's by-id B-tree)".to_owned(),
                ),
                (format!("{}.key_order", table.name), order),
                (format!("{}.storage", table.name), storage),
            ]))
        })
    }

    fn count_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(async move {
            // doc_count: live documents (design documents too, of which this database has
            // none; `_local` documents such as the marker are never counted).
            let info = self
                .expect(Method::GET, &database(table.name), None)
                .await?;
            info.get("doc_count")
                .and_then(Json::as_u64)
                .ok_or_else(|| self.error(format!("database info without doc_count: {info}")))
        })
    }

    fn read_records<'a>(
        &'a mut self,
        table: &'a YcsbTable,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Vec<String>>>, TargetError>> {
        Box::pin(async move {
            let names = field_names(table);
            let path = format!("{}/_all_docs?include_docs=true", database(table.name));
            let mut found = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(READ_CHUNK) {
                let body = self
                    .expect(Method::POST, &path, Some(&json!({"keys": chunk})))
                    .await?;
                let rows = body.get("rows").and_then(Json::as_array);
                for row in rows.into_iter().flatten() {
                    let (Some(id), Some(doc)) = (
                        row.get("id").and_then(Json::as_str),
                        row.get("doc").filter(|d| d.is_object()),
                    ) else {
                        continue; // not_found, or deleted: the sample check names it
                    };
                    // A missing or non-text field reads as empty: the sample check names it.
                    let values = names
                        .iter()
                        .map(|n| doc.get(n).and_then(Json::as_str).unwrap_or("").to_owned())
                        .collect();
                    found.push((id.to_owned(), values));
                }
            }
            Ok(in_order(keys, found))
        })
    }

    fn open_ycsb_workers<'a>(
        &'a self,
        size: usize,
        table: &'a YcsbTable,
    ) -> BoxFuture<'a, Result<Box<dyn YcsbWorkers>, TargetError>> {
        let (http, identity) = (self.http.clone(), self.identity.clone());
        let (db, names) = (database(table.name), field_names(table));
        let connector: Connector<CouchYcsb> = Arc::new(move || {
            let (http, identity, names) = (http.clone(), identity.clone(), names.clone());
            let db = db.clone();
            Box::pin(async move {
                let mut own = Http::new(http.base.clone(), http.auth.clone(), 1, http.tls.clone())?;
                own.flavor = http.flavor;
                // One request opens the session's connection before any clock starts.
                own.call(Method::GET, "", None, CONNECT_TIMEOUT)
                    .await
                    .map_err(|e| identity.query_error(e).to_string())?;
                let db_url = format!("{}/{db}", own.base);
                Ok(CouchYcsb {
                    http: own,
                    db_url,
                    names,
                })
            })
        });
        async_workers(size, connector)
    }
}

/// How the server answered a write made with a `_rev`.
enum Write {
    Done,
    /// 409: the document is no longer at the revision read.
    Conflict,
    /// 404: it is not there (any more).
    Missing,
}

/// A worker's HTTP client (one kept-alive connection) and its database.
struct CouchYcsb {
    http: Http,
    /// `http://host:port/fairbench_ycsb`.
    db_url: String,
    names: Arc<[String]>,
}

impl CouchYcsb {
    /// One request on the session's connection: the status and the body as JSON (`Null`
    /// when it is not JSON). Writes ask old servers for a full commit.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Json>,
    ) -> Result<(StatusCode, Json), OpError> {
        let mut request = self.http.client.request(method, url);
        if let Some((user, password)) = &self.http.auth {
            request = request.basic_auth(user, Some(password));
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(body).expect("JSON serializes"));
            if self.http.flavor == Flavor::CouchDbOld {
                request = request.header("X-Couch-Full-Commit", "true");
            }
        }
        let response = request.send().await.map_err(http_op_error)?;
        let status = response.status();
        // The body must be read for the connection to be reused.
        let bytes = response.bytes().await.map_err(http_op_error)?;
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Json::Null)))
    }

    fn doc_url(&self, key: &str) -> String {
        format!("{}/{}", self.db_url, query_value(key))
    }

    /// The document (with its `_rev`), or `None` when it is not there.
    async fn get(&self, key: &str) -> Result<Option<Map<String, Json>>, OpError> {
        match self.send(Method::GET, &self.doc_url(key), None).await? {
            (StatusCode::OK, Json::Object(document)) => Ok(Some(document)),
            (StatusCode::NOT_FOUND, _) => Ok(None),
            (status, body) => Err(failed(key, status, &body)),
        }
    }

    /// PUT (the document carries the `_rev` it was read at) or DELETE at `rev`.
    async fn write(
        &self,
        key: &str,
        document: Option<&Map<String, Json>>,
        rev: &str,
    ) -> Result<Write, OpError> {
        let (status, body) = match document {
            Some(document) => {
                let body = Json::Object(document.clone());
                self.send(Method::PUT, &self.doc_url(key), Some(&body))
                    .await?
            }
            None => {
                let url = format!("{}?rev={}", self.doc_url(key), query_value(rev));
                self.send(Method::DELETE, &url, None).await?
            }
        };
        match status {
            StatusCode::OK | StatusCode::CREATED => Ok(Write::Done),
            StatusCode::CONFLICT => Ok(Write::Conflict),
            StatusCode::NOT_FOUND => Ok(Write::Missing),
            _ => Err(failed(key, status, &body)),
        }
    }

    /// Reads the record and writes it back changed by `change` (`None`: deleted) at the
    /// revision read, again from the read while another writer comes in between. Returns
    /// what was read, `None` when the record is not there.
    async fn swap(
        &self,
        key: &str,
        change: Option<(usize, &str)>,
    ) -> Result<Option<Fetched>, OpError> {
        for _ in 0..CONFLICT_RETRIES {
            let Some(mut document) = self.get(key).await? else {
                return Ok(None);
            };
            let read = fetched(&document);
            let rev = document
                .get("_rev")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned();
            let written = match change {
                Some((field, value)) => {
                    document.insert(self.names[field].clone(), Json::from(value));
                    self.write(key, Some(&document), &rev).await?
                }
                None => self.write(key, None, &rev).await?,
            };
            match written {
                Write::Done => return Ok(Some(read)),
                Write::Missing => return Ok(None),
                Write::Conflict => continue,
            }
        }
        Err(OpError::Failed(format!(
            "{key}: {CONFLICT_RETRIES} conflicts in a row (409) between the read and the write"
        )))
    }
}

/// A refusal in the server's own words; 202 is named, since it means the write was not yet
/// committed as asked.
fn failed(key: &str, status: StatusCode, body: &Json) -> OpError {
    if status == StatusCode::ACCEPTED {
        return OpError::Failed(format!(
            "{key}: HTTP 202 Accepted: the server acknowledged the write before committing it"
        ));
    }
    let field = |name| body.get(name).and_then(Json::as_str).unwrap_or("");
    OpError::Failed(format!(
        "{key}: HTTP {}: {}: {}",
        status.as_u16(),
        field("error"),
        field("reason")
    ))
}

impl YcsbSession for CouchYcsb {
    async fn read(&mut self, key: &str) -> Result<Option<Fetched>, OpError> {
        Ok(self.get(key).await?.as_ref().map(fetched))
    }

    async fn update(&mut self, key: &str, field: usize, value: &str) -> Result<u64, OpError> {
        Ok(u64::from(
            self.swap(key, Some((field, value))).await?.is_some(),
        ))
    }

    async fn insert(&mut self, key: &str, values: &[&str]) -> Result<(), OpError> {
        let document = record_document(None, &self.names, values);
        let (status, body) = self
            .send(Method::PUT, &self.doc_url(key), Some(&document))
            .await?;
        match status {
            StatusCode::CREATED | StatusCode::OK => Ok(()),
            _ => Err(failed(key, status, &body)),
        }
    }

    async fn scan(&mut self, start: &str, count: usize) -> Result<Fetched, OpError> {
        let url = format!(
            "{}/_all_docs?include_docs=true&limit={count}&{}",
            self.db_url,
            key_param("startkey", start)
        );
        let (status, body) = self.send(Method::GET, &url, None).await?;
        if status != StatusCode::OK {
            return Err(failed(start, status, &body));
        }
        let mut got = Fetched::default();
        let rows = body.get("rows").and_then(Json::as_array);
        for row in rows.into_iter().flatten() {
            match row.get("doc").and_then(Json::as_object) {
                Some(document) => got.add(fetched(document)),
                None => {
                    return Err(OpError::Failed(format!(
                        "scan from {start}: a row without its document: {row}"
                    )));
                }
            }
        }
        Ok(got)
    }

    async fn read_modify_write(
        &mut self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<Option<Fetched>, OpError> {
        self.swap(key, Some((field, value))).await
    }

    async fn delete(&mut self, key: &str) -> Result<u64, OpError> {
        Ok(u64::from(self.swap(key, None).await?.is_some()))
    }

    async fn insert_batch(&mut self, records: &[Record]) -> Result<(), OpError> {
        let docs: Vec<Json> = records
            .iter()
            .map(|r| {
                let values: Vec<&str> = r.values.iter().map(String::as_str).collect();
                record_document(Some(&r.key), &self.names, &values)
            })
            .collect();
        let url = format!("{}/_bulk_docs", self.db_url);
        let (status, body) = self
            .send(Method::POST, &url, Some(&json!({"docs": docs})))
            .await?;
        if status != StatusCode::CREATED {
            return Err(failed("_bulk_docs", status, &body));
        }
        let rows = body.as_array().map_or(&[][..], Vec::as_slice);
        if rows.len() != records.len() {
            return Err(OpError::Failed(format!(
                "_bulk_docs answered {} rows for {} documents",
                rows.len(),
                records.len()
            )));
        }
        match rows.iter().find(|r| r.get("ok") != Some(&Json::Bool(true))) {
            Some(refused) => Err(OpError::Failed(format!(
                "_bulk_docs refused a document: {refused}"
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_its_fields_and_reads_back_without_couchdbs_own_members() {
        let names: Vec<String> = (0..3).map(|i| format!("field{i}")).collect();
        let document = record_document(Some("user42"), &names, &["aa", "bbb", "c"]);
        assert_eq!(
            document,
            json!({"_id": "user42", "field0": "aa", "field1": "bbb", "field2": "c"})
        );
        let mut stored = document.as_object().unwrap().clone();
        stored.insert("_rev".into(), json!("1-abc"));
        assert_eq!(
            fetched(&stored),
            Fetched {
                records: 1,
                fields: 3,
                bytes: 6
            }
        );
        let number = json!({"_id": "k", "field0": 7});
        assert_eq!(fetched(number.as_object().unwrap()).bytes, 0);
    }

    #[test]
    fn start_keys_are_json_strings_in_the_query() {
        assert_eq!(key_param("startkey", "user12"), "startkey=%22user12%22");
        assert_eq!(query_value("a b/\"é"), "a%20b%2F%22%C3%A9");
    }

    #[test]
    fn the_probe_tells_byte_order_from_icu_collation() {
        let mut ids = probe_ids();
        ids.sort_unstable();
        let tail: Vec<&str> = ids.iter().rev().take(3).map(String::as_str).collect();
        assert_eq!(tail, ["usera", "user_", "userA"], "bytes: A < _ < a");
        assert!(ids.iter().all(|id| id.starts_with("user")));
    }
}
