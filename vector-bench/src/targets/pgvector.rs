//! PostgreSQL with pgvector, through tokio-postgres: rows loaded with COPY, then an HNSW index
//! built with the same m/ef_construction (in memory: maintenance_work_mem is raised for the
//! build, as pgvector recommends), a btree index on the category, `hnsw.ef_search` set per
//! point on every session, and the filter as a WHERE clause. Besides the server's own settings,
//! filtered search is measured with pgvector 0.8's iterative index scans (`relaxed_order` and
//! `strict_order`, each its own lane), set per session after `LOAD 'vector'` and read back.
//! Vectors travel in pgvector's binary format. fairbench's tables live in a schema named after
//! --namespace, marked as fairbench's.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::postgres::{CancelOnDrop, Canceller, Link, connect, message};
use common::results::Location;
use futures_util::SinkExt;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Statement};

use super::{
    BuildProgress, BuildReport, Described, Identity, Mode, Opened, Reach, TargetError, TlsState,
    VectorTarget, check_dimensions,
};
use crate::dataset::{Dataset, Metric};
use crate::index::{IndexSpec, Variant};
use crate::session::{SearchSession, Work};

const MARKER: &str = "created by fairbench";
/// Memory for the index build, so the graph is built in memory rather than on disk pages.
const BUILD_MEMORY: &str = "2GB";
/// pgvector's iterative scan settings, read back into every lane's report entry.
const SCAN_SETTINGS: [&str; 3] = [
    "hnsw.iterative_scan",
    "hnsw.max_scan_tuples",
    "hnsw.scan_mem_multiplier",
];
/// The iterative scan modes measured besides the server's own setting.
const ITERATIVE: [&str; 2] = ["relaxed_order", "strict_order"];

pub struct PgvectorTarget {
    identity: Identity,
    link: Link,
    control: Client,
}

/// Names of one variant's objects.
struct Names {
    schema: String,
    table: String,
    hnsw: String,
    category: String,
}

impl Names {
    fn of(spec: &IndexSpec) -> Names {
        let table = format!("vectors_{}", spec.variant.as_str());
        Names {
            schema: spec.namespace.clone(),
            hnsw: format!("{table}_hnsw"),
            category: format!("{table}_category"),
            table,
        }
    }

    fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// The distance operator and operator class of a metric.
fn operator(metric: Metric) -> (&'static str, &'static str) {
    match metric {
        Metric::Cosine => ("<=>", "vector_cosine_ops"),
        Metric::L2 => ("<->", "vector_l2_ops"),
    }
}

/// The search statement of a variant: `$1` is the query, `$2` is k; the binary variant takes
/// the Hamming-nearest `$3` candidates and re-ranks them exactly; a filtered statement takes the
/// category as its last parameter.
fn search_sql(spec: &IndexSpec, filtered: bool) -> String {
    let names = Names::of(spec);
    let (op, _) = operator(spec.metric);
    let binary = spec.variant == Variant::Binary;
    let filter = match (filtered, binary) {
        (false, _) => String::new(),
        (true, false) => "WHERE category = $3 ".into(),
        (true, true) => "WHERE category = $4 ".into(),
    };
    if binary {
        format!(
            "SELECT id FROM (SELECT id, embedding FROM {t} {filter}ORDER BY binary_quantize(embedding)::bit({d}) <~> binary_quantize($1::vector)::bit({d}) LIMIT $3) candidates ORDER BY embedding {op} $1::vector LIMIT $2",
            t = names.qualified(),
            d = spec.dims
        )
    } else {
        format!(
            "SELECT id FROM {} {filter}ORDER BY embedding {op} $1::vector LIMIT $2",
            names.qualified()
        )
    }
}

/// Runs a search statement with its parameters in the variant's order.
async fn search(
    client: &Client,
    statement: &Statement,
    binary: bool,
    vector: &[f32],
    k: usize,
    ef: usize,
    category: Option<u8>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let vector = PgVector(vector);
    let (k, candidates) = (k as i64, ef as i64);
    match (category.map(i16::from), binary) {
        (None, false) => client.query(statement, &[&vector, &k]).await,
        (None, true) => client.query(statement, &[&vector, &k, &candidates]).await,
        (Some(c), false) => client.query(statement, &[&vector, &k, &c]).await,
        (Some(c), true) => {
            client
                .query(statement, &[&vector, &k, &candidates, &c])
                .await
        }
    }
}

/// A vector in pgvector's binary wire format: dimension (int16), unused (int16), then the
/// values as big-endian float4.
#[derive(Debug)]
struct PgVector<'a>(&'a [f32]);

impl ToSql for PgVector<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_i16(i16::try_from(self.0.len())?);
        out.put_i16(0);
        for value in self.0 {
            out.put_f32(*value);
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        ty.name() == "vector"
    }

    to_sql_checked!();
}

impl PgvectorTarget {
    /// libpq's `sslmode`/`sslrootcert` read by common; the password from its file or variable
    /// when the URL has none.
    pub async fn open(
        spec: &TargetSpec,
        reach: &Reach,
    ) -> Result<Box<dyn VectorTarget>, TargetError> {
        let link = Link::of(spec, reach, &["pgvector"])?;
        let identity = Identity::of(spec, "pgvector");
        let control = connect(&link, &identity).await?;
        Ok(Box::new(PgvectorTarget {
            identity,
            link,
            control,
        }))
    }

    async fn one(&self, sql: &str) -> Result<Option<String>, TargetError> {
        let rows = self
            .control
            .simple_query(sql)
            .await
            .map_err(|e| self.identity.query_error(format!("{sql}: {}", message(&e))))?;
        Ok(rows.into_iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        }))
    }

    async fn run(&self, sql: &str) -> Result<(), TargetError> {
        self.control
            .batch_execute(sql)
            .await
            .map_err(|e| self.identity.query_error(format!("{sql}: {}", message(&e))))
    }

    /// Streams every row through COPY (text format), `batch` rows per message.
    async fn copy_rows(
        &self,
        table: &str,
        data: &Dataset,
        batch: usize,
        progress: &BuildProgress,
    ) -> Result<(), TargetError> {
        let sink = self
            .control
            .copy_in(&format!(
                "COPY {table} (id, category, embedding) FROM STDIN"
            ))
            .await
            .map_err(|e| {
                self.identity
                    .query_error(format!("COPY into {table}: {}", message(&e)))
            })?;
        let mut sink = std::pin::pin!(sink);
        let mut buffer = String::with_capacity(batch * (data.dims * 12 + 16));
        for start in (0..data.rows()).step_by(batch.max(1)) {
            buffer.clear();
            let end = (start + batch.max(1)).min(data.rows());
            for id in start..end {
                use std::fmt::Write as _;
                let _ = write!(buffer, "{id}\t{}\t[", data.categories[id]);
                for (i, v) in data.row(id).iter().enumerate() {
                    let _ = write!(buffer, "{}{v}", if i == 0 { "" } else { "," });
                }
                buffer.push_str("]\n");
            }
            sink.send(bytes::Bytes::copy_from_slice(buffer.as_bytes()))
                .await
                .map_err(|e| {
                    self.identity
                        .query_error(format!("COPY into {table}: {}", message(&e)))
                })?;
            progress
                .sent((end - start) as u64)
                .map_err(|e| self.identity.query_error(e))?;
        }
        sink.as_mut().finish().await.map_err(|e| {
            self.identity
                .query_error(format!("COPY into {table}: {}", message(&e)))
        })?;
        Ok(())
    }
}

common::identified!(PgvectorTarget);

impl VectorTarget for PgvectorTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.link.tls_state())
    }

    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>> {
        Box::pin(async move {
            let version = self.one("SELECT version()").await?.unwrap_or_default();
            let Some(extension) = self
                .one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                .await?
            else {
                return Err(self.identity.query_error(
                    "the pgvector extension is not installed in this database (CREATE EXTENSION vector)",
                ));
            };
            // pgvector's own settings (hnsw.*) exist once its library is loaded in the session.
            self.one("SELECT '[1]'::vector").await?;
            let mut settings = BTreeMap::new();
            settings.insert("pgvector".into(), extension.clone());
            for name in [
                "shared_buffers",
                "max_parallel_maintenance_workers",
                "hnsw.iterative_scan",
                "jit",
            ] {
                if let Some(value) = self
                    .one(&format!("SELECT current_setting('{name}', true)"))
                    .await?
                {
                    settings.insert(name.into(), value);
                }
            }
            // Only a privileged role sees data_directory; without it the floor is not measured.
            let data_dir = self
                .one("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
                .await?;
            let location = self.link.location();
            let short = version.split(" on ").next().unwrap_or(&version).to_owned();
            Ok(Described {
                kind: self.identity.kind.clone(),
                version: format!("{short}, pgvector {extension}"),
                settings,
                location,
                data_dir: data_dir
                    .filter(|_| location == Location::Local)
                    .map(PathBuf::from),
            })
        })
    }

    fn offer(&self, variant: Variant) -> Result<String, String> {
        match variant {
            Variant::F32 => Ok("vector(d), HNSW".into()),
            Variant::Int8 => Err(
                "pgvector has no int8 scalar quantization (its reduced-precision type is halfvec, 16-bit)"
                    .into(),
            ),
            Variant::Binary => Ok(
                "HNSW over binary_quantize(embedding) with bit_hamming_ops; the ef nearest by Hamming distance re-ranked by exact distance (pgvector's documented rescoring)"
                    .into(),
            ),
        }
    }

    fn check<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let names = Names::of(spec);
            let qualified = names.qualified();
            let Some(oid) = self
                .one(&format!("SELECT to_regclass('{qualified}')::oid"))
                .await?
            else {
                return Ok(());
            };
            let comment = self
                .one(&format!("SELECT obj_description({oid}, 'pg_class')"))
                .await?;
            if comment.as_deref() != Some(MARKER) {
                return Err(self.identity.foreign(format!("table {qualified}")));
            }
            let dims = self
                .one(&format!(
                    "SELECT atttypmod FROM pg_attribute WHERE attrelid = {oid} AND attname = 'embedding'"
                ))
                .await?
                .and_then(|d| d.parse::<usize>().ok());
            check_dimensions(
                &self.identity,
                format!("table {qualified}"),
                dims,
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
            let names = Names::of(spec);
            let table = names.qualified();
            self.check(spec).await?;
            // Stopped at --build-ceiling, this future is dropped: the COPY or CREATE INDEX it
            // was waiting on is cancelled on the server too.
            let running = CancelOnDrop::arm(&self.control, &self.link);
            self.run(&format!(
                "CREATE SCHEMA IF NOT EXISTS {schema}; DROP TABLE IF EXISTS {table}; \
                 CREATE TABLE {table} (id bigint PRIMARY KEY, category smallint NOT NULL, embedding vector({d}) NOT NULL); \
                 COMMENT ON TABLE {table} IS '{MARKER}'",
                schema = names.schema,
                d = spec.dims
            ))
            .await?;
            let began = Instant::now();
            self.copy_rows(&table, data, batch, progress).await?;
            let insert_s = began.elapsed().as_secs_f64();
            let (_, opclass) = operator(spec.metric);
            let indexed = match spec.variant {
                Variant::Binary => format!(
                    "(binary_quantize(embedding)::bit({})) bit_hamming_ops",
                    spec.dims
                ),
                _ => format!("embedding {opclass}"),
            };
            self.run(&format!(
                "SET maintenance_work_mem = '{BUILD_MEMORY}'; \
                 CREATE INDEX {hnsw} ON {table} USING hnsw ({indexed}) WITH (m = {m}, ef_construction = {efc}); \
                 CREATE INDEX {category} ON {table} (category); ANALYZE {table}; RESET maintenance_work_mem",
                hnsw = names.hnsw,
                category = names.category,
                m = spec.m,
                efc = spec.ef_construction
            ))
            .await?;
            let statement = self
                .control
                .prepare(&search_sql(spec, false))
                .await
                .map_err(|e| {
                    self.identity
                        .query_error(format!("preparing the search: {}", message(&e)))
                })?;
            let binary = spec.variant == Variant::Binary;
            let answered = !search(
                &self.control,
                &statement,
                binary,
                data.query(0),
                1,
                40,
                None,
            )
            .await
            .map_err(|e| {
                self.identity
                    .query_error(format!("the first query failed: {}", message(&e)))
            })?
            .is_empty();
            running.disarm();
            if !answered {
                return Err(self
                    .identity
                    .query_error("the index returned nothing after the build"));
            }
            Ok(BuildReport {
                insert_s,
                build_s: began.elapsed().as_secs_f64(),
                method: format!(
                    "COPY, then CREATE INDEX … USING hnsw (maintenance_work_mem = {BUILD_MEMORY}) and the category btree, ANALYZE"
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
            let names = Names::of(spec);
            let table = names.qualified();
            let mut out = BTreeMap::new();
            let options = self
                .one(&format!(
                    "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = to_regclass('{}.{}')",
                    names.schema, names.hnsw
                ))
                .await?
                .unwrap_or_default();
            for option in options.split(',') {
                if let Some((key, value)) = option.split_once('=') {
                    out.insert(key.to_owned(), value.to_owned());
                }
            }
            let definition = self
                .one(&format!(
                    "SELECT indexdef FROM pg_indexes WHERE schemaname = '{}' AND indexname = '{}'",
                    names.schema, names.hnsw
                ))
                .await?
                .unwrap_or_default();
            out.insert("index".into(), definition);
            let category = self
                .one(&format!(
                    "SELECT indexdef FROM pg_indexes WHERE schemaname = '{}' AND indexname = '{}'",
                    names.schema, names.category
                ))
                .await?;
            out.insert(
                "payload_index".into(),
                category.unwrap_or_else(|| "missing".into()),
            );
            let rows = self.one(&format!("SELECT count(*) FROM {table}")).await?;
            out.insert("rows".into(), rows.unwrap_or_default());
            out.insert("dimensions".into(), spec.dims.to_string());
            // What the planner does with each search: an index scan, or (filtered) perhaps the
            // category btree and an exact sort.
            let probe = vec![0.5f32; spec.dims];
            let binary = spec.variant == Variant::Binary;
            for filtered in [false, true] {
                let sql = format!("EXPLAIN (COSTS OFF) {}", search_sql(spec, filtered));
                let statement =
                    self.control.prepare(&sql).await.map_err(|e| {
                        self.identity.query_error(format!("{sql}: {}", message(&e)))
                    })?;
                let category = filtered.then_some(crate::dataset::CATEGORY_1PCT);
                let rows = search(&self.control, &statement, binary, &probe, 10, 64, category)
                    .await
                    .map_err(|e| self.identity.query_error(format!("{sql}: {}", message(&e))))?;
                let plan: Vec<String> = rows
                    .iter()
                    .map(|r| r.get::<_, String>(0).trim().to_owned())
                    .collect();
                let key = if filtered {
                    "plan_filtered_1pct"
                } else {
                    "plan"
                };
                out.insert(key.into(), plan.join(" / "));
            }
            Ok(out)
        })
    }

    fn modes(&self) -> Vec<Mode> {
        let mut modes = vec![Mode::default()];
        modes.extend(ITERATIVE.iter().map(|order| Mode {
            suffix: (*order).to_owned(),
            description: format!(
                "hnsw.iterative_scan = {order} (pgvector 0.8's iterative index scan: the index is scanned further until k rows pass the filter or hnsw.max_scan_tuples is reached)"
            ),
            variants: Vec::new(),
            filtered_only: true,
        }));
        modes
    }

    fn searchers<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        sessions: usize,
        mode: &'a Mode,
    ) -> BoxFuture<'a, Result<Opened, TargetError>> {
        Box::pin(async move {
            let link = self.link.clone();
            let identity = self.identity.clone();
            let (plain, filtered) = (search_sql(spec, false), search_sql(spec, true));
            let binary = spec.variant == Variant::Binary;
            let iterative = (!mode.suffix.is_empty()).then(|| mode.suffix.clone());
            let readback = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
            let first = readback.clone();
            let connect: Connector<PgSession> = Arc::new(move || {
                let (link, identity) = (link.clone(), identity.clone());
                let (plain, filtered) = (plain.clone(), filtered.clone());
                let (iterative, first) = (iterative.clone(), first.clone());
                Box::pin(async move {
                    let client = connect(&link, &identity).await.map_err(|e| e.to_string())?;
                    let settings = scan_settings(&client, iterative.as_deref()).await?;
                    if let Ok(mut first) = first.lock()
                        && first.is_empty()
                    {
                        *first = settings;
                    }
                    let prepare = |sql: String| {
                        let client = &client;
                        async move {
                            client
                                .prepare(&sql)
                                .await
                                .map_err(|e| format!("preparing {sql}: {}", message(&e)))
                        }
                    };
                    let plain = prepare(plain).await?;
                    let filtered = prepare(filtered).await?;
                    Ok(PgSession {
                        canceller: Canceller::of(&client, &link),
                        client,
                        plain,
                        filtered,
                        binary,
                    })
                })
            });
            let searchers = crate::session::open_async(sessions, connect).await?;
            let settings = readback.lock().map(|s| s.clone()).unwrap_or_default();
            Ok((searchers, settings))
        })
    }

    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            self.check(spec).await?;
            self.run(&format!(
                "DROP TABLE IF EXISTS {}",
                Names::of(spec).qualified()
            ))
            .await
        })
    }
}

/// Loads pgvector in the session (its `hnsw.*` settings exist only then: a value set before is
/// an unchecked placeholder), sets the iterative scan when asked, and reads every scan setting
/// back; a value that did not take is an error.
async fn scan_settings(
    client: &Client,
    iterative: Option<&str>,
) -> Result<BTreeMap<String, String>, String> {
    let mut sql = String::from("LOAD 'vector';");
    if let Some(order) = iterative {
        sql.push_str(&format!(" SET hnsw.iterative_scan = {order};"));
    }
    client.batch_execute(&sql).await.map_err(|e| message(&e))?;
    let mut out = BTreeMap::new();
    for name in SCAN_SETTINGS {
        let rows = client
            .simple_query(&format!("SHOW {name}"))
            .await
            .map_err(|e| message(&e))?;
        let value = rows
            .into_iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .unwrap_or_default();
        out.insert(name.to_owned(), value);
    }
    if let Some(order) = iterative
        && out.get("hnsw.iterative_scan").map(String::as_str) != Some(order)
    {
        return Err(format!(
            "SET hnsw.iterative_scan = {order} did not take: the session reports {:?}",
            out.get("hnsw.iterative_scan")
        ));
    }
    Ok(out)
}

/// One connection with its statements prepared.
pub struct PgSession {
    client: Client,
    /// Stops a search that passed the ceiling.
    canceller: Canceller,
    plain: Statement,
    filtered: Statement,
    binary: bool,
}

impl SearchSession for PgSession {
    async fn prepare(&mut self, work: &Arc<Work>) -> Result<String, String> {
        self.client
            .batch_execute(&format!("SET hnsw.ef_search = {}", work.ef))
            .await
            .map_err(|e| message(&e))?;
        let rows = self
            .client
            .simple_query("SHOW hnsw.ef_search")
            .await
            .map_err(|e| message(&e))?;
        Ok(rows
            .into_iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .unwrap_or_default())
    }

    async fn search(
        &mut self,
        work: &Work,
        query: usize,
        out: &mut Vec<u64>,
    ) -> Result<(), OpError> {
        let statement = if work.category.is_some() {
            &self.filtered
        } else {
            &self.plain
        };
        let rows = search(
            &self.client,
            statement,
            self.binary,
            work.data.query(query),
            work.k,
            work.ef,
            work.category,
        )
        .await
        .map_err(|e| {
            if e.is_closed() {
                OpError::Fatal(message(&e))
            } else {
                OpError::Failed(message(&e))
            }
        })?;
        out.clear();
        out.extend(rows.iter().map(|row| row.get::<_, i64>(0) as u64));
        Ok(())
    }

    async fn cancel(&mut self) -> Result<(), OpError> {
        self.canceller.cancel().await
    }
}
