//! Turns a data-layer [`Query`] into SQL over a table of JSON documents. The statement shape is
//! shared; each engine's [`Dialect`] says how it reads a JSON field, writes a placeholder and
//! binds a value.

use crate::query::{Collection, Condition, Query, Value};

/// What a SQL engine binds for a placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Text(String),
    Bool(bool),
    Int(i64),
    Float(f64),
}

/// How one engine spells the parts of a query over `(id, doc)` rows.
pub trait Dialect {
    /// The table of `collection`, qualified with fairbench's namespace.
    fn table(&self, collection: &Collection) -> String;
    /// Placeholder number `n` (1-based).
    fn placeholder(&self, n: usize) -> String;
    /// The expression reading text field `field` (indexed fields must use the expression the
    /// index was built on, or the engine cannot use it).
    fn text_field(&self, collection: &Collection, field: &str) -> String;
    /// The expression reading a boolean field, and the parameter to compare it with.
    fn bool_field(&self, field: &str, value: bool) -> (String, Param);
    /// The expression reading a numeric field as a double.
    fn number_field(&self, field: &str) -> String;
    /// The column holding the document as JSON text.
    fn doc_text(&self) -> &'static str;
}

/// What a statement returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Documents,
    Count,
}

/// The statement and its parameters.
pub fn select(
    dialect: &impl Dialect,
    collection: &Collection,
    query: &Query,
    output: Output,
) -> (String, Vec<Param>) {
    let mut params = Vec::new();
    let next = |param: Param, params: &mut Vec<Param>| {
        params.push(param);
        dialect.placeholder(params.len())
    };
    let mut conditions = Vec::new();
    if let Some(id) = &query.id {
        let p = next(Param::Text(id.clone()), &mut params);
        conditions.push(format!("id = {p}"));
    }
    for filter in &query.filters {
        match &filter.condition {
            Condition::Equals(Value::Text(text)) => {
                let p = next(Param::Text(text.clone()), &mut params);
                conditions.push(format!(
                    "{} = {p}",
                    dialect.text_field(collection, filter.field)
                ));
            }
            Condition::Equals(Value::Bool(value)) => {
                let (expr, param) = dialect.bool_field(filter.field, *value);
                let p = next(param, &mut params);
                conditions.push(format!("{expr} = {p}"));
            }
            Condition::Equals(Value::Number(value)) => {
                let p = next(Param::Float(*value), &mut params);
                conditions.push(format!("{} = {p}", dialect.number_field(filter.field)));
            }
            Condition::GreaterThan(bound) => {
                let p = next(Param::Float(*bound), &mut params);
                conditions.push(format!("{} > {p}", dialect.number_field(filter.field)));
            }
        }
    }
    let what = match output {
        Output::Documents => dialect.doc_text().to_owned(),
        Output::Count => "COUNT(*)".to_owned(),
    };
    let mut sql = format!("SELECT {what} FROM {}", dialect.table(collection));
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
    }
    if output == Output::Documents {
        if let Some(sort) = query.sort {
            let direction = if sort.descending { "DESC" } else { "ASC" };
            sql.push_str(&format!(
                " ORDER BY {} {direction}, id ASC",
                dialect.text_field(collection, sort.field)
            ));
        }
        if let Some(limit) = query.limit {
            let p = next(Param::Int(limit as i64), &mut params);
            sql.push_str(&format!(" LIMIT {p}"));
        }
        if query.skip > 0 {
            let p = next(Param::Int(query.skip as i64), &mut params);
            sql.push_str(&format!(" OFFSET {p}"));
        }
    }
    (sql, params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{Filter, Sort};

    struct Dollar;

    impl Dialect for Dollar {
        fn table(&self, collection: &Collection) -> String {
            format!("ns.{}", collection.name)
        }
        fn placeholder(&self, n: usize) -> String {
            format!("${n}")
        }
        fn text_field(&self, _: &Collection, field: &str) -> String {
            format!("doc->>'{field}'")
        }
        fn bool_field(&self, field: &str, value: bool) -> (String, Param) {
            (format!("(doc->>'{field}')::boolean"), Param::Bool(value))
        }
        fn number_field(&self, field: &str) -> String {
            format!("(doc->>'{field}')::float8")
        }
        fn doc_text(&self) -> &'static str {
            "doc::text"
        }
    }

    const C: Collection = Collection {
        name: "records",
        indexed: &["_a"],
    };

    #[test]
    fn a_sorted_page_with_filters() {
        let query = Query {
            id: None,
            filters: vec![
                Filter::equals("_a", Value::Text("x".into())),
                Filter::equals("flag", Value::Bool(false)),
                Filter::greater_than("value", 9.5),
            ],
            sort: Some(Sort {
                field: "_created_at",
                descending: true,
            }),
            skip: 100,
            limit: Some(50),
        };
        let (sql, params) = select(&Dollar, &C, &query, Output::Documents);
        assert_eq!(
            sql,
            "SELECT doc::text FROM ns.records WHERE doc->>'_a' = $1 AND (doc->>'flag')::boolean = $2 \
             AND (doc->>'value')::float8 > $3 ORDER BY doc->>'_created_at' DESC, id ASC LIMIT $4 OFFSET $5"
        );
        assert_eq!(
            params,
            vec![
                Param::Text("x".into()),
                Param::Bool(false),
                Param::Float(9.5),
                Param::Int(50),
                Param::Int(100)
            ]
        );
    }

    #[test]
    fn a_count_ignores_order_and_paging_and_a_key_lookup_uses_the_key() {
        let query = Query {
            id: Some("k1".into()),
            sort: Some(Sort {
                field: "_created_at",
                descending: false,
            }),
            limit: Some(5),
            ..Query::default()
        };
        let (sql, params) = select(&Dollar, &C, &query, Output::Count);
        assert_eq!(sql, "SELECT COUNT(*) FROM ns.records WHERE id = $1");
        assert_eq!(params, vec![Param::Text("k1".into())]);
    }
}
