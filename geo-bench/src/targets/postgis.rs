//! PostGIS (PostgreSQL with the `postgis` extension) through tokio-postgres: events in a
//! table with a `geography(Point, 4326)` column under a GIST index, a batch inserted as one
//! multi-row `INSERT … SELECT FROM unnest(…)` (one statement, one commit), radius queries with
//! `ST_DWithin` (spheroid distance) and polygon queries with `ST_Covers`. Tables live in the
//! `fairbench_geo` schema and carry a comment that marks them as fairbench's. The extension is
//! never created here: the database must already have it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::postgres::{Canceller, Link, connect, message};
use common::results::Location;
use tokio_postgres::{Client, Statement};
use uuid::Uuid;

use super::{Described, Description, Identity, Reach, Target, TargetError, TlsState, op_error};
use crate::events::Event;
use crate::queries::Query;
use crate::session::{GeoSession, GeoWorkers, async_workers};

const SCHEMA: &str = "fairbench_geo";
const MARKER: &str = "created by fairbench";
const QUERY_SET: &str = "events";
const INSERT_SET: &str = "inserts";
/// Rows per statement when loading the query set.
const LOAD_CHUNK: usize = 5_000;

fn insert_sql(set: &str) -> String {
    format!(
        "INSERT INTO {SCHEMA}.{set} (event_id, entity_id, ts_ms, geog, attrs)
         SELECT id, entity, ts, ST_SetSRID(ST_MakePoint(lon, lat), 4326)::geography, attrs
           FROM unnest($1::uuid[], $2::uuid[], $3::int8[], $4::float8[], $5::float8[], $6::bytea[])
             AS u(id, entity, ts, lat, lon, attrs)"
    )
}

const LATEST_SQL: &str =
    "SELECT event_id FROM fairbench_geo.events WHERE entity_id = $1 ORDER BY ts_ms DESC LIMIT 1";
const RADIUS_SQL: &str = "SELECT event_id FROM fairbench_geo.events
    WHERE ST_DWithin(geog, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography, $3)";
const POLYGON_SQL: &str =
    "SELECT event_id FROM fairbench_geo.events WHERE ST_Covers(ST_GeogFromText($1), geog)";

/// Reusable column buffers for one batch.
#[derive(Default)]
struct Columns {
    ids: Vec<Uuid>,
    entities: Vec<Uuid>,
    ts: Vec<i64>,
    lats: Vec<f64>,
    lons: Vec<f64>,
}

impl Columns {
    fn fill(&mut self, batch: &[Event]) {
        self.ids.clear();
        self.entities.clear();
        self.ts.clear();
        self.lats.clear();
        self.lons.clear();
        for e in batch {
            self.ids.push(Uuid::from_u128(e.id));
            self.entities.push(Uuid::from_u128(e.entity));
            self.ts.push(e.ts_ms as i64);
            self.lats.push(e.lat);
            self.lons.push(e.lon);
        }
    }
}

async fn insert(
    client: &Client,
    statement: &Statement,
    columns: &mut Columns,
    batch: &[Event],
) -> Result<u64, tokio_postgres::Error> {
    columns.fill(batch);
    let attrs: Vec<&[u8]> = batch.iter().map(|e| &e.attributes[..]).collect();
    client
        .execute(
            statement,
            &[
                &columns.ids,
                &columns.entities,
                &columns.ts,
                &columns.lats,
                &columns.lons,
                &attrs,
            ],
        )
        .await
}

fn pg_op_error(e: tokio_postgres::Error) -> OpError {
    op_error(e.is_closed(), message(&e))
}

pub struct PostgisTarget {
    identity: Identity,
    link: Link,
    control: Client,
}

impl PostgisTarget {
    /// libpq's `sslmode`/`sslrootcert` read by common (tokio-postgres does not know them); the
    /// password from its file or variable when the URL has none.
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let link = Link::of(spec, reach, &["postgis"])?;
        let identity = Identity::of(spec, "postgis");
        let control = connect(&link, &identity).await?;
        Ok(Box::new(PostgisTarget {
            identity,
            link,
            control,
        }))
    }

    fn error(&self, e: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(e)
    }

    async fn batch(&self, sql: &str) -> Result<(), TargetError> {
        self.control
            .batch_execute(sql)
            .await
            .map_err(|e| self.error(message(&e)))
    }

    /// `Some(true)` ours, `Some(false)` someone else's, `None` absent.
    async fn ownership(&self, table: &str) -> Result<Option<bool>, TargetError> {
        let row = self
            .control
            .query_opt(
                "SELECT coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                &[&SCHEMA, &table],
            )
            .await
            .map_err(|e| self.error(message(&e)))?;
        Ok(row.map(|r| r.get::<_, String>(0) == MARKER))
    }

    async fn settings(&self) -> Result<BTreeMap<String, String>, TargetError> {
        let names = [
            "fsync",
            "synchronous_commit",
            "wal_sync_method",
            "synchronous_standby_names",
            "data_directory",
        ];
        common::postgres::read_settings(&self.control, &names)
            .await
            .map_err(|e| self.error(message(&e)))
    }

    async fn index_evidence(&self, table: &str) -> Result<(String, String), TargetError> {
        let rows = self
            .control
            .query(
                "SELECT am.amname, pg_get_indexdef(x.indexrelid), x.indisprimary, c.relpersistence::text
                   FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam
                   JOIN pg_class c ON c.oid = x.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = $1 AND c.relname = $2",
                &[&SCHEMA, &table],
            )
            .await
            .map_err(|e| self.error(message(&e)))?;
        let has = |am: &str, column: &str| {
            rows.iter()
                .any(|r| r.get::<_, String>(0) == am && r.get::<_, String>(1).contains(column))
        };
        let primary = rows.iter().any(|r| r.get::<_, bool>(2));
        let logged = rows.iter().all(|r| r.get::<_, String>(3) == "p");
        if !(has("gist", "(geog)") && has("btree", "entity_id") && primary && logged) {
            return Err(self.error(format!(
                "{SCHEMA}.{table} is not indexed as declared (pg_index shows {:?})",
                rows.iter()
                    .map(|r| r.get::<_, String>(1))
                    .collect::<Vec<_>>()
            )));
        }
        Ok((format!("{table}.spatial_index"), "GIST on geog (pg_index, pg_am); primary key event_id; btree (entity_id, ts_ms); logged".into()))
    }
}

common::identified!(PostgisTarget);

impl Target for PostgisTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.link.tls_state())
    }

    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let full: String = self
                .control
                .query_one("SELECT version()", &[])
                .await
                .map_err(|e| self.error(message(&e)))?
                .get(0);
            let postgis: Option<String> = self
                .control
                .query_opt(
                    "SELECT extversion FROM pg_extension WHERE extname = 'postgis'",
                    &[],
                )
                .await
                .map_err(|e| self.error(message(&e)))?
                .map(|r| r.get(0));
            let mut settings = self.settings().await?;
            let data_dir = settings
                .remove("data_directory")
                .filter(|_| self.link.location() == Location::Local)
                .map(PathBuf::from);
            let get = |name: &str| settings.get(name).cloned().unwrap_or_default();
            let durable = get("fsync") == "on"
                && matches!(
                    get("synchronous_commit").as_str(),
                    "on" | "local" | "remote_write" | "remote_apply"
                );
            let durability = if durable {
                format!(
                    "durable: fsync=on, synchronous_commit={} (WAL flushed before each commit returns)",
                    get("synchronous_commit")
                )
            } else {
                format!(
                    "not durable per commit: fsync={}, synchronous_commit={}",
                    get("fsync"),
                    get("synchronous_commit")
                )
            };
            let refusal = postgis.is_none().then(|| {
                "PostGIS is not enabled in this database: run CREATE EXTENSION postgis in it (geo-bench creates nothing outside its own schema)".to_owned()
            });
            if let Some(v) = &postgis {
                settings.insert("postgis".into(), v.clone());
            }
            let version = full.split(" on ").next().unwrap_or(&full).to_owned();
            Ok(Description {
                system: Described {
                    kind: "postgis".into(),
                    version: format!("{version}, PostGIS {}", postgis.as_deref().unwrap_or("(absent)")),
                    settings,
                    data_dir,
                    location: self.link.location(),
                },
                default_name: "postgis".into(),
                notes: Vec::new(),
                durable,
                durability,
                refusal,
                method: vec![
                    "a batch is one INSERT … SELECT FROM unnest(arrays) statement: one commit".into(),
                    "radius: ST_DWithin on geography (spheroid distance); polygon: ST_Covers on geography (great-circle edges); both use the GIST index".into(),
                ],
            })
        })
    }

    fn prepare(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            for table in [QUERY_SET, INSERT_SET] {
                if self.ownership(table).await? == Some(false) {
                    return Err(self.identity.foreign(format!("relation {SCHEMA}.{table}")));
                }
            }
            self.batch(&format!("CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
                .await?;
            for table in [QUERY_SET, INSERT_SET] {
                self.batch(&format!(
                    "DROP TABLE IF EXISTS {SCHEMA}.{table};
                     CREATE TABLE {SCHEMA}.{table} (event_id uuid PRIMARY KEY, entity_id uuid NOT NULL,
                         ts_ms bigint NOT NULL, geog geography(Point, 4326) NOT NULL, attrs bytea NOT NULL);
                     CREATE INDEX ON {SCHEMA}.{table} USING GIST (geog);
                     CREATE INDEX ON {SCHEMA}.{table} (entity_id, ts_ms DESC);
                     COMMENT ON TABLE {SCHEMA}.{table} IS '{MARKER}';"
                ))
                .await?;
            }
            Ok(())
        })
    }

    fn load<'a>(&'a mut self, events: &'a [Event]) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let statement = self
                .control
                .prepare(&insert_sql(QUERY_SET))
                .await
                .map_err(|e| self.error(message(&e)))?;
            let mut columns = Columns::default();
            for chunk in events.chunks(LOAD_CHUNK) {
                insert(&self.control, &statement, &mut columns, chunk)
                    .await
                    .map_err(|e| self.error(message(&e)))?;
            }
            self.batch(&format!("ANALYZE {SCHEMA}.{QUERY_SET}")).await
        })
    }

    fn verify_indexes(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let mut evidence = BTreeMap::new();
            for table in [QUERY_SET, INSERT_SET] {
                let (k, v) = self.index_evidence(table).await?;
                evidence.insert(k, v);
            }
            Ok(evidence)
        })
    }

    fn reset_inserts(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move { self.batch(&format!("TRUNCATE {SCHEMA}.{INSERT_SET}")).await })
    }

    fn count_inserts(&mut self) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let row = self
                .control
                .query_one(&format!("SELECT count(*) FROM {SCHEMA}.{INSERT_SET}"), &[])
                .await
                .map_err(|e| self.error(message(&e)))?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn cleanup(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            for table in [QUERY_SET, INSERT_SET] {
                if self.ownership(table).await? == Some(true) {
                    self.batch(&format!("DROP TABLE {SCHEMA}.{table}")).await?;
                }
            }
            Ok(())
        })
    }

    fn open_workers(&self, size: usize) -> BoxFuture<'_, Result<Box<dyn GeoWorkers>, TargetError>> {
        let (link, identity) = (self.link.clone(), self.identity.clone());
        let connector: Connector<PgSession> = Arc::new(move || {
            let (link, identity) = (link.clone(), identity.clone());
            Box::pin(async move {
                let client = connect(&link, &identity).await.map_err(|e| e.to_string())?;
                let prepare = |sql: String| {
                    let (client, identity) = (&client, &identity);
                    async move {
                        client
                            .prepare(&sql)
                            .await
                            .map_err(|e| format!("{}: {}", identity.name, message(&e)))
                    }
                };
                Ok(PgSession {
                    canceller: Canceller::of(&client, &link),
                    insert: prepare(insert_sql(INSERT_SET)).await?,
                    latest: prepare(LATEST_SQL.into()).await?,
                    radius: prepare(RADIUS_SQL.into()).await?,
                    polygon: prepare(POLYGON_SQL.into()).await?,
                    columns: Columns::default(),
                    client,
                })
            })
        });
        async_workers(size, connector)
    }
}

/// A worker's connection, opened on the lane it runs on, its statements prepared.
struct PgSession {
    client: Client,
    insert: Statement,
    latest: Statement,
    radius: Statement,
    polygon: Statement,
    columns: Columns,
    /// Stops a statement that passed the ceiling.
    canceller: Canceller,
}

impl GeoSession for PgSession {
    async fn insert(&mut self, batch: &[Event]) -> Result<(), OpError> {
        let inserted = insert(&self.client, &self.insert, &mut self.columns, batch)
            .await
            .map_err(pg_op_error)?;
        if inserted != batch.len() as u64 {
            return Err(OpError::Failed(format!(
                "inserted {inserted} of {} events",
                batch.len()
            )));
        }
        Ok(())
    }

    async fn query(&mut self, query: &Query, ids: &mut Vec<u128>) -> Result<(), OpError> {
        ids.clear();
        let rows = match query {
            Query::Latest { entity } => {
                self.client
                    .query(&self.latest, &[&Uuid::from_u128(*entity)])
                    .await
            }
            Query::Radius { lat, lon, radius_m } => {
                self.client.query(&self.radius, &[lon, lat, radius_m]).await
            }
            Query::Polygon { wkt, .. } => self.client.query(&self.polygon, &[wkt]).await,
        }
        .map_err(pg_op_error)?;
        ids.extend(rows.iter().map(|r| r.get::<_, Uuid>(0).as_u128()));
        Ok(())
    }
    async fn cancel(&mut self) -> Result<(), OpError> {
        self.canceller.cancel().await
    }
}
