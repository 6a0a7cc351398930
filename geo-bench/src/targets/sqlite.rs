//! SQLite, embedded in the client process, as an R*Tree store: an events table, an R*Tree
//! index over each event's point, WAL with `synchronous=FULL` (a commit is durable when it
//! returns). Radius and polygon queries probe the R*Tree with a bounding box, then filter the
//! candidates exactly (geodesic distance; point in polygon). One writer at a time: writers
//! queue on an in-process lock, as an application embedding SQLite does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use common::driver::{OpError, failed};
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use common::sqlite::connect_durable as connect;
use common::watchdog::Interrupt;
use geo::{Contains, Distance, Geodesic, Point};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Described, Description, Identity, Target, TargetError};
use crate::events::Event;
use crate::queries::{Query, bounds};
use crate::session::{BlockingGeoSession, GeoWorkers, blocking_workers};

/// Lists the tables fairbench created in this file (shared with sql-bench's SQLite target).
const MARKER_TABLE: &str = "fairbench_objects";
/// The query set and the insert set.
const QUERY_SET: &str = "fairbench_geo_events";
const INSERT_SET: &str = "fairbench_geo_inserts";
/// Rows per transaction when loading the query set.
const LOAD_CHUNK: usize = 10_000;

pub struct SqliteTarget {
    identity: Identity,
    path: PathBuf,
    control: Connection,
    write_lock: Arc<Mutex<()>>,
}

/// The objects of one set: the table, its entity index and its R*Tree.
fn objects(set: &str) -> [String; 3] {
    [
        set.to_owned(),
        format!("{set}_entity"),
        format!("{set}_rtree"),
    ]
}

/// Inserts `events` into `set` (table and R*Tree) inside the caller's transaction.
fn insert_events(conn: &Connection, set: &str, events: &[Event]) -> rusqlite::Result<()> {
    let mut row = conn.prepare_cached(&format!(
        "INSERT INTO {set} (event_id, entity_id, ts_ms, lat, lon, attrs) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    ))?;
    let mut point = conn.prepare_cached(&format!(
        "INSERT INTO {set}_rtree VALUES (?1, ?2, ?2, ?3, ?3)"
    ))?;
    for e in events {
        row.execute(params![
            &e.id.to_be_bytes()[..],
            &e.entity.to_be_bytes()[..],
            e.ts_ms as i64,
            e.lat,
            e.lon,
            &e.attributes[..]
        ])?;
        point.execute(params![conn.last_insert_rowid(), e.lat, e.lon])?;
    }
    Ok(())
}

fn id_of(bytes: &[u8]) -> rusqlite::Result<u128> {
    let array: [u8; 16] = bytes.try_into().map_err(|_| {
        rusqlite::Error::InvalidColumnType(0, "event_id".into(), rusqlite::types::Type::Blob)
    })?;
    Ok(u128::from_be_bytes(array))
}

/// Candidates whose R*Tree box overlaps the given one, with their exact position.
fn probe(
    conn: &Connection,
    (min_lat, max_lat, min_lon, max_lon): (f64, f64, f64, f64),
    mut keep: impl FnMut(f64, f64) -> bool,
    ids: &mut Vec<u128>,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT e.event_id, e.lat, e.lon FROM {QUERY_SET}_rtree r JOIN {QUERY_SET} e ON e.seq = r.id
          WHERE r.max_lat >= ?1 AND r.min_lat <= ?2 AND r.max_lon >= ?3 AND r.min_lon <= ?4"
    ))?;
    let mut rows = stmt.query(params![min_lat, max_lat, min_lon, max_lon])?;
    while let Some(row) = rows.next()? {
        let (lat, lon): (f64, f64) = (row.get(1)?, row.get(2)?);
        if keep(lat, lon) {
            ids.push(id_of(row.get_ref(0)?.as_blob()?)?);
        }
    }
    Ok(())
}

/// Answers a query from `conn` into `ids`.
fn answer(conn: &Connection, query: &Query, ids: &mut Vec<u128>) -> rusqlite::Result<()> {
    ids.clear();
    match query {
        Query::Latest { entity } => {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT event_id FROM {QUERY_SET} WHERE entity_id = ?1 ORDER BY ts_ms DESC LIMIT 1"
            ))?;
            let found: Option<Vec<u8>> = stmt
                .query_row([&entity.to_be_bytes()[..]], |r| r.get(0))
                .optional()?;
            if let Some(bytes) = found {
                ids.push(id_of(&bytes)?);
            }
        }
        Query::Radius { lat, lon, radius_m } => {
            // 1° of latitude is at least 110.5 km and 1° of longitude at least that times the
            // cosine of the highest latitude reached, so this box holds the whole circle.
            let dlat = radius_m / 110_000.0;
            let cos = (lat.abs() + dlat).min(89.9).to_radians().cos();
            let dlon = radius_m / (110_000.0 * cos);
            let (min_lon, max_lon) = if lon - dlon < -180.0 || lon + dlon > 180.0 {
                (-180.0, 180.0)
            } else {
                (lon - dlon, lon + dlon)
            };
            let centre = Point::new(*lon, *lat);
            let keep = |plat: f64, plon: f64| {
                Geodesic.distance(centre, Point::new(plon, plat)) <= *radius_m
            };
            probe(conn, (lat - dlat, lat + dlat, min_lon, max_lon), keep, ids)?;
        }
        Query::Polygon { ring, .. } => {
            let polygon = Query::geo_polygon(ring);
            let keep = |plat: f64, plon: f64| polygon.contains(&Point::new(plon, plat));
            probe(conn, bounds(ring), keep, ids)?;
        }
    }
    Ok(())
}

impl SqliteTarget {
    /// `sqlite` (a file in the results folder), `sqlite:PATH` or `sqlite://PATH`.
    pub fn open(spec: &TargetSpec, results_dir: &Path) -> Result<Box<dyn Target>, TargetError> {
        let path = common::sqlite::file_of(&spec.url, results_dir, "fairbench-geo.db");
        let identity = Identity {
            url_redacted: format!("sqlite:{}", path.display()),
            ..Identity::of(spec, "sqlite")
        };
        let control =
            common::sqlite::create_durable(&path).map_err(|e| identity.connect_error(e))?;
        Ok(Box::new(SqliteTarget {
            identity,
            path,
            control,
            write_lock: Arc::new(Mutex::new(())),
        }))
    }

    fn error(&self, e: impl ToString) -> TargetError {
        self.identity.query_error(e)
    }

    /// Whether `name` exists, and if so whether fairbench's marker lists it.
    fn ownership(&self, name: &str) -> rusqlite::Result<Option<bool>> {
        common::sqlite::ownership(&self.control, name, MARKER_TABLE)
    }

    fn check_ours(&self) -> Result<(), TargetError> {
        for set in [QUERY_SET, INSERT_SET] {
            let table = &objects(set)[0];
            if self.ownership(table).map_err(|e| self.error(e))? == Some(false) {
                return Err(self
                    .identity
                    .foreign(format!("table {table} in {}", self.path.display())));
            }
        }
        Ok(())
    }

    fn create(&mut self, set: &str) -> rusqlite::Result<()> {
        let [table, entity, rtree] = objects(set);
        self.control.execute_batch(&format!(
            "BEGIN;
             CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name TEXT PRIMARY KEY);
             DROP TABLE IF EXISTS {rtree};
             DROP TABLE IF EXISTS {table};
             CREATE TABLE {table} (seq INTEGER PRIMARY KEY, event_id BLOB NOT NULL UNIQUE,
                 entity_id BLOB NOT NULL, ts_ms INTEGER NOT NULL, lat REAL NOT NULL,
                 lon REAL NOT NULL, attrs BLOB NOT NULL);
             CREATE INDEX {entity} ON {table} (entity_id, ts_ms);
             CREATE VIRTUAL TABLE {rtree} USING rtree(id, min_lat, max_lat, min_lon, max_lon);
             INSERT OR IGNORE INTO {MARKER_TABLE} (name) VALUES ('{table}'), ('{rtree}');
             COMMIT;"
        ))
    }

    fn drop_set(&mut self, set: &str) -> rusqlite::Result<()> {
        let [table, _, rtree] = objects(set);
        if self.ownership(&table)? == Some(true) {
            self.control.execute_batch(&format!(
                "BEGIN; DROP TABLE IF EXISTS {rtree}; DROP TABLE {table};
                 DELETE FROM {MARKER_TABLE} WHERE name IN ('{table}', '{rtree}'); COMMIT;"
            ))?;
        }
        Ok(())
    }

    fn index_evidence(&self) -> rusqlite::Result<BTreeMap<String, String>> {
        let mut evidence = BTreeMap::new();
        for set in [QUERY_SET, INSERT_SET] {
            let [table, entity, rtree] = objects(set);
            let rtree_sql: Option<String> = self
                .control
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE name = ?1",
                    [&rtree],
                    |r| r.get(0),
                )
                .optional()?;
            let indexes: Vec<(String, bool)> = self
                .control
                .prepare(&format!("PRAGMA index_list({table})"))?
                .query_map([], |r| Ok((r.get(1)?, r.get::<_, i64>(2)? == 1)))?
                .collect::<rusqlite::Result<_>>()?;
            let spatial = rtree_sql.filter(|sql| sql.to_ascii_lowercase().contains("using rtree"));
            let unique_id = indexes.iter().any(|(_, unique)| *unique);
            let by_entity = indexes.iter().any(|(name, _)| *name == entity);
            if spatial.is_none() || !unique_id || !by_entity {
                return Err(rusqlite::Error::InvalidParameterName(format!(
                    "{table} lacks an index (R*Tree {rtree}: {}, unique event_id: {unique_id}, (entity_id, ts_ms): {by_entity})",
                    if spatial.is_some() {
                        "present"
                    } else {
                        "missing"
                    }
                )));
            }
            let short = set.trim_start_matches("fairbench_geo_");
            evidence.insert(
                format!("{short}.spatial_index"),
                format!("{rtree} (R*Tree virtual table, sqlite_master)"),
            );
            evidence.insert(
                format!("{short}.indexes"),
                "event_id unique, (entity_id, ts_ms)".into(),
            );
        }
        Ok(evidence)
    }
}

common::identified!(SqliteTarget);

impl Target for SqliteTarget {
    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let read = |sql: &str| {
                common::sqlite::read_text(&self.control, sql).map_err(|e| self.error(e))
            };
            let version = read("SELECT sqlite_version()")?;
            let journal_mode = read("PRAGMA journal_mode")?;
            let synchronous = read("PRAGMA synchronous")?;
            let rtree = read("SELECT sqlite_compileoption_used('ENABLE_RTREE')")?;
            let durable = journal_mode.eq_ignore_ascii_case("wal")
                && synchronous.parse::<i64>().unwrap_or(0) >= 2;
            let refusal = (rtree != "1")
                .then(|| "this SQLite was built without R*Tree (ENABLE_RTREE)".to_owned());
            Ok(Description {
                system: Described {
                    kind: "sqlite".into(),
                    version: format!("SQLite {version}"),
                    settings: BTreeMap::from([
                        ("journal_mode".to_owned(), journal_mode.clone()),
                        ("synchronous".to_owned(), synchronous.clone()),
                        ("writers".to_owned(), "one at a time, queued in-process".to_owned()),
                    ]),
                    data_dir: self.path.parent().map(Path::to_path_buf),
                    location: Location::Embedded,
                },
                default_name: "sqlite".into(),
                notes: vec!["SQLite runs inside the client process: no network and no protocol, and its writers queue on an in-process lock (one writer at a time).".into()],
                durable,
                durability: if durable {
                    "durable: WAL, synchronous=FULL (fsync before each commit returns)".into()
                } else {
                    format!("not durable per commit: journal_mode={journal_mode}, synchronous={synchronous}")
                },
                refusal,
                method: vec![
                    "an R*Tree bounding-box probe, then exact filtering in-process: geodesic distance (WGS84) for radius, point in polygon (planar lon/lat) for polygons".into(),
                    "a batch is one transaction (one commit, one fsync)".into(),
                ],
            })
        })
    }

    fn prepare(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            self.check_ours()?;
            for set in [QUERY_SET, INSERT_SET] {
                self.create(set).map_err(|e| self.identity.query_error(e))?;
            }
            Ok(())
        })
    }

    fn load<'a>(&'a mut self, events: &'a [Event]) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            tokio::task::block_in_place(|| {
                for chunk in events.chunks(LOAD_CHUNK) {
                    let tx = self.control.transaction()?;
                    insert_events(&tx, QUERY_SET, chunk)?;
                    tx.commit()?;
                }
                self.control.execute_batch(&format!("ANALYZE {QUERY_SET}"))
            })
            .map_err(|e| self.identity.query_error(e))
        })
    }

    fn verify_indexes(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move { self.index_evidence().map_err(|e| self.error(e)) })
    }

    fn reset_inserts(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            self.control
                .execute_batch(&format!(
                    "BEGIN; DELETE FROM {INSERT_SET}_rtree; DELETE FROM {INSERT_SET}; COMMIT;"
                ))
                .map_err(|e| self.error(e))
        })
    }

    fn count_inserts(&mut self) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let rows: i64 = self
                .control
                .query_row(&format!("SELECT count(*) FROM {INSERT_SET}"), [], |r| {
                    r.get(0)
                })
                .map_err(|e| self.error(e))?;
            let points: i64 = self
                .control
                .query_row(
                    &format!("SELECT count(*) FROM {INSERT_SET}_rtree"),
                    [],
                    |r| r.get(0),
                )
                .map_err(|e| self.error(e))?;
            if rows != points {
                return Err(self.error(format!("{rows} events but {points} R*Tree entries")));
            }
            Ok(rows as u64)
        })
    }

    fn cleanup(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            for set in [QUERY_SET, INSERT_SET] {
                self.drop_set(set)
                    .map_err(|e| self.identity.query_error(e))?;
            }
            Ok(())
        })
    }

    fn open_workers(&self, size: usize) -> BoxFuture<'_, Result<Box<dyn GeoWorkers>, TargetError>> {
        let path = self.path.clone();
        let write_lock = self.write_lock.clone();
        let identity = self.identity.clone();
        let connector: Connector<SqliteSession> = Arc::new(move || {
            let (path, write_lock, identity) = (path.clone(), write_lock.clone(), identity.clone());
            Box::pin(async move {
                let conn = connect(&path).map_err(|e| identity.query_error(e).to_string())?;
                Ok(SqliteSession {
                    conn,
                    write_lock,
                    stop: Arc::new(AtomicBool::new(false)),
                })
            })
        });
        blocking_workers(size, connector)
    }
}

struct SqliteSession {
    conn: Connection,
    write_lock: Arc<Mutex<()>>,
    /// Set with `sqlite3_interrupt` on a call past the ceiling (see [`Self::insert_batch`]).
    stop: Arc<AtomicBool>,
}

impl SqliteSession {
    /// One batch in one transaction. SQLite forgets an interrupt that comes while none of the
    /// connection's statements is running (the next one to start clears it), and a large
    /// batch takes a while to fill before its first statement: such an interrupt is seen
    /// through `stop` once the transaction is open, which then ends at once (rolled back).
    /// One that comes while the rows go in stops the statement running, and SQLite rolls the
    /// transaction back itself. (An error of our own there would leave the interrupt pending
    /// behind the R*Tree's open blob and fail the ROLLBACK too, keeping the write lock.)
    fn insert_batch(&mut self, batch: &[Event]) -> Result<(), OpError> {
        let _writer = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed)?;
        if self.stop.load(Ordering::Relaxed) {
            return Err(failed("interrupted before the first row"));
        }
        insert_events(&tx, INSERT_SET, batch).map_err(failed)?;
        tx.commit().map_err(failed)
    }

    /// The call is over: an interrupt it got (even one that came while its batch was being
    /// filled, before any statement ran) is spent, and the next call starts clear.
    fn stopped_or_done(&self) {
        self.stop.store(false, Ordering::Relaxed);
    }
}

impl BlockingGeoSession for SqliteSession {
    fn insert(&mut self, batch: &[Event]) -> Result<(), OpError> {
        let inserted = self.insert_batch(batch);
        self.stopped_or_done();
        inserted
    }

    fn query(&mut self, query: &Query, ids: &mut Vec<u128>) -> Result<(), OpError> {
        let answered = answer(&self.conn, query, ids).map_err(failed);
        self.stopped_or_done();
        answered
    }

    /// `sqlite3_interrupt`, and the flag a batch insert checks once its transaction is open:
    /// the call stops (its transaction rolled back) and the connection stays usable.
    fn interrupt(&self) -> Option<Interrupt> {
        let handle = self.conn.get_interrupt_handle();
        let stop = self.stop.clone();
        Some(Arc::new(move || {
            stop.store(true, Ordering::Relaxed);
            handle.interrupt();
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ATTRIBUTE_BYTES;

    fn event(n: u128) -> Event {
        Event {
            id: n,
            entity: n,
            ts_ms: 0,
            lat: 48.85,
            lon: 2.35,
            attributes: [0; ATTRIBUTE_BYTES],
        }
    }

    /// The ceiling passed while the batch was being filled, before any statement ran: SQLite
    /// forgets that interrupt when the transaction's first statement starts, so the insert
    /// sees it itself. It ends with nothing written and no transaction left open, and the
    /// session's next insert goes through.
    #[tokio::test(flavor = "multi_thread")]
    async fn an_interrupt_before_the_first_row_stops_the_insert_and_the_session_stays_usable() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TargetSpec::parse("sqlite").unwrap();
        let mut target = SqliteTarget::open(&spec, dir.path()).unwrap();
        target.prepare().await.unwrap();
        let path = dir.path().join("sqlite").join("fairbench-geo.db");
        let mut session = SqliteSession {
            conn: connect(&path).unwrap(),
            write_lock: Arc::new(Mutex::new(())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let batch: Vec<Event> = (1..=10).map(event).collect();
        session.interrupt().unwrap()();
        let stopped = session.insert(&batch);
        assert!(stopped.is_err(), "{stopped:?}");
        assert!(session.conn.is_autocommit(), "a transaction was left open");
        assert_eq!(target.count_inserts().await.unwrap(), 0);
        session.insert(&batch).unwrap();
        assert_eq!(target.count_inserts().await.unwrap(), 10);
    }
}
