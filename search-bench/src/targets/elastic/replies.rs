//! What an Elasticsearch-API server sends back, read into what search-bench needs: the
//! server's reason for a refusal, a `_search` answer (whose total must be exact), the first
//! failed item of a `_bulk` answer, and where the node keeps its data.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::answer::{Answer, parse_buckets};

/// The server's own reason from an error body (`{"error":{"type","reason"}}`), else the text.
pub(super) fn error_reason(body: &[u8]) -> String {
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

/// The first node's `path.data` (a string or a list), against `path.home` when relative.
pub(super) fn path_from_settings(answer: &Value) -> Option<PathBuf> {
    let node = answer["nodes"].as_object()?.values().next()?;
    let path = &node["settings"]["path"];
    let data = match &path["data"] {
        Value::String(s) => s.as_str(),
        Value::Array(list) => list.first()?.as_str()?,
        _ => return None,
    };
    let data = PathBuf::from(data);
    match path["home"].as_str() {
        Some(home) if data.is_relative() => Some(Path::new(home).join(data)),
        _ => Some(data),
    }
}

/// The first data path of the first node's file-system stats.
pub(super) fn path_from_fs_stats(answer: &Value) -> Option<PathBuf> {
    let node = answer["nodes"].as_object()?.values().next()?;
    node["fs"]["data"][0]["path"].as_str().map(PathBuf::from)
}

/// Reads total (which must be exact), hit ids and buckets from a `_search` answer.
pub(super) fn parse_answer(value: &Value) -> Result<Answer, String> {
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

/// The first failed item of a `_bulk` answer with `errors: true`.
pub(super) fn bulk_item_error(body: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn the_data_path_is_read_from_the_settings_or_the_fs_stats() {
        let listed = json!({"nodes": {"n1": {"settings": {"path": {
            "data": ["/srv/os/data"], "home": "/srv/os"}}}}});
        assert_eq!(
            path_from_settings(&listed),
            Some(PathBuf::from("/srv/os/data"))
        );
        let relative = json!({"nodes": {"n1": {"settings": {"path": {
            "data": "data", "home": "/srv/es"}}}}});
        assert_eq!(
            path_from_settings(&relative),
            Some(PathBuf::from("/srv/es/data"))
        );
        let unset = json!({"nodes": {"n1": {"settings": {"path": {"home": "/srv/es"}}}}});
        assert_eq!(path_from_settings(&unset), None);
        assert_eq!(path_from_settings(&json!({})), None);
        let fs = json!({"nodes": {"n1": {"fs": {"data": [{"path": "/srv/es/data/nodes/0"}]}}}});
        assert_eq!(
            path_from_fs_stats(&fs),
            Some(PathBuf::from("/srv/es/data/nodes/0"))
        );
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
