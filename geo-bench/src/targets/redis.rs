//! Redis and Valkey over RESP: positions in a geo sorted set (GEOADD, GEOSEARCH), every
//! event's 128-byte record in a hash by event id, and each entity's latest record in a hash by
//! entity id. A batch is three pipelined commands. Radius queries are GEOSEARCH BYRADIUS;
//! polygons are GEOSEARCH BYBOX over the polygon's bounding box, filtered exactly in the
//! client. The durability each runs with is read with CONFIG GET: `?durability=durable`
//! requires `appendonly yes` and `appendfsync always`, `?durability=volatile` requires the
//! AOF off; a server that does not match is refused. `rediss://` (and `valkeys://`) speak
//! RESP over TLS with common's rustls configuration (`cacert=`, verified by default); the
//! password may come from `--password-file` or `FAIRBENCH_PASSWORD_<NAME>`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use geo::{Contains, Point};

use common::tls::{Endpoint, Negotiated};

use super::{
    Described, Description, Identity, Reach, Target, TargetError, TlsState, is_local_host,
    location_of_host, op_error,
};
use crate::events::{EVENT_BYTES, Event, METRES_PER_DEGREE, parse_hex_id, write_hex_id};
use crate::queries::{Query, bounds};
use crate::resp::{Frame, Resp, Stream, Value};
use crate::session::{GeoSession, GeoWorkers, async_workers};

mod address;

use address::{Address, Asked, parse_url};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Marks fairbench's keys as fairbench's.
const OWNER_KEY: &[u8] = b"fairbench:geo:owner";
const MARKER: &[u8] = b"created by fairbench";
/// Events per pipelined batch when loading the query set.
const LOAD_CHUNK: usize = 2_000;

/// The keys of one set of events.
#[derive(Debug, Clone, Copy)]
struct Keys {
    positions: &'static [u8],
    records: &'static [u8],
    latest: &'static [u8],
}

const QUERY_SET: Keys = Keys {
    positions: b"fairbench:geo:q:pos",
    records: b"fairbench:geo:q:ev",
    latest: b"fairbench:geo:q:latest",
};
const INSERT_SET: Keys = Keys {
    positions: b"fairbench:geo:i:pos",
    records: b"fairbench:geo:i:ev",
    latest: b"fairbench:geo:i:latest",
};
/// The single-point adds of the `geoadd` workload.
const POINT_ADDS: &[u8] = b"fairbench:geo:p:pos";

fn all_keys() -> [&'static [u8]; 7] {
    [
        QUERY_SET.positions,
        QUERY_SET.records,
        QUERY_SET.latest,
        INSERT_SET.positions,
        INSERT_SET.records,
        INSERT_SET.latest,
        POINT_ADDS,
    ]
}

/// Renders `value` with 7 decimals (1 cm of a coordinate) into the end of `digits`, without
/// formatting machinery; returns where the text starts.
#[inline]
fn render_fixed(value: f64, digits: &mut [u8; 32]) -> usize {
    let scaled = (value * 1e7).round() as i64;
    let mut n = scaled.unsigned_abs();
    let mut at = digits.len();
    for place in 0.. {
        if place == 7 {
            at -= 1;
            digits[at] = b'.';
        }
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 && place >= 7 {
            break;
        }
    }
    if scaled < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    at
}

/// Appends `value` with 7 decimals as one argument.
#[inline]
fn fixed_arg(resp: &mut Resp, value: f64) {
    let mut digits = [0u8; 32];
    let at = render_fixed(value, &mut digits);
    resp.arg(&digits[at..]);
}

fn hex_arg(resp: &mut Resp, id: u128) {
    resp.arg_with(32, |out| write_hex_id(id, out));
}

/// Queues the three commands that store `batch` in `keys`.
fn write_batch(resp: &mut Resp, keys: Keys, batch: &[Event]) {
    resp.begin(2 + 3 * batch.len());
    resp.arg(b"GEOADD");
    resp.arg(keys.positions);
    for e in batch {
        fixed_arg(resp, e.lon);
        fixed_arg(resp, e.lat);
        hex_arg(resp, e.id);
    }
    for (key, by_entity) in [(keys.records, false), (keys.latest, true)] {
        resp.begin(2 + 2 * batch.len());
        resp.arg(b"HSET");
        resp.arg(key);
        for e in batch {
            hex_arg(resp, if by_entity { e.entity } else { e.id });
            resp.arg_with(EVENT_BYTES, |out| out.extend_from_slice(&e.encode()));
        }
    }
}

fn io_error(e: std::io::Error) -> OpError {
    op_error(true, e)
}

/// Sends `batch` into `keys` and checks the three replies.
async fn insert_batch(resp: &mut Resp, keys: Keys, batch: &[Event]) -> Result<(), OpError> {
    write_batch(resp, keys, batch);
    resp.flush().await.map_err(io_error)?;
    let mut failure = None;
    for _ in 0..3 {
        if let Err(message) = resp.skip().await.map_err(io_error)? {
            failure.get_or_insert(message);
        }
    }
    failure.map_or(Ok(()), |m| Err(OpError::Failed(m)))
}

/// Reads a GEOSEARCH reply of bare members into `ids`.
async fn read_members(resp: &mut Resp, ids: &mut Vec<u128>) -> Result<(), OpError> {
    match resp.frame().await.map_err(io_error)? {
        Frame::Array(Some(n)) => {
            for _ in 0..n {
                match resp.frame().await.map_err(io_error)? {
                    Frame::Bulk(Some(r)) => {
                        ids.push(parse_hex_id(resp.bytes(r)).ok_or_else(|| {
                            OpError::Failed("a member that is not an event id".into())
                        })?)
                    }
                    other => {
                        return Err(OpError::Failed(format!(
                            "unexpected GEOSEARCH element {other:?}"
                        )));
                    }
                }
            }
            Ok(())
        }
        Frame::Error(r) => Err(OpError::Failed(
            String::from_utf8_lossy(resp.bytes(r)).into_owned(),
        )),
        other => Err(OpError::Failed(format!(
            "unexpected GEOSEARCH reply {other:?}"
        ))),
    }
}

fn parse_f64(bytes: &[u8]) -> Option<f64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Reads a GEOSEARCH … WITHCOORD reply and keeps the members inside `ring`.
async fn read_inside(
    resp: &mut Resp,
    ring: &[(f64, f64)],
    ids: &mut Vec<u128>,
) -> Result<(), OpError> {
    let bad = |what: &str| OpError::Failed(format!("unexpected GEOSEARCH WITHCOORD reply: {what}"));
    let polygon = Query::geo_polygon(ring);
    let n = match resp.frame().await.map_err(io_error)? {
        Frame::Array(Some(n)) => n,
        Frame::Error(r) => {
            return Err(OpError::Failed(
                String::from_utf8_lossy(resp.bytes(r)).into_owned(),
            ));
        }
        _ => return Err(bad("not an array")),
    };
    for _ in 0..n {
        // A frame's range is valid only until the next read: use each before reading on.
        let Frame::Array(Some(2)) = resp.frame().await.map_err(io_error)? else {
            return Err(bad("an element is not [member, [lon, lat]]"));
        };
        let Frame::Bulk(Some(member)) = resp.frame().await.map_err(io_error)? else {
            return Err(bad("a member is not a string"));
        };
        let id = parse_hex_id(resp.bytes(member))
            .ok_or_else(|| bad("a member that is not an event id"))?;
        let Frame::Array(Some(2)) = resp.frame().await.map_err(io_error)? else {
            return Err(bad("coordinates are not a pair"));
        };
        let mut coordinates = [0.0f64; 2];
        for value in &mut coordinates {
            let Frame::Bulk(Some(r)) = resp.frame().await.map_err(io_error)? else {
                return Err(bad("a coordinate is not a string"));
            };
            *value = parse_f64(resp.bytes(r)).ok_or_else(|| bad("a coordinate is not a number"))?;
        }
        let [lon, lat] = coordinates;
        if polygon.contains(&Point::new(lon, lat)) {
            ids.push(id);
        }
    }
    Ok(())
}

/// Answers `query` from the query set.
async fn answer(resp: &mut Resp, query: &Query, ids: &mut Vec<u128>) -> Result<(), OpError> {
    ids.clear();
    match query {
        Query::Latest { entity } => {
            resp.begin(3);
            resp.arg(b"HGET");
            resp.arg(QUERY_SET.latest);
            hex_arg(resp, *entity);
            resp.flush().await.map_err(io_error)?;
            match resp.frame().await.map_err(io_error)? {
                Frame::Bulk(Some(r)) => ids.extend(Event::id_of_record(resp.bytes(r))),
                Frame::Bulk(None) => {}
                other => return Err(OpError::Failed(format!("unexpected HGET reply {other:?}"))),
            }
            Ok(())
        }
        Query::Radius { lat, lon, radius_m } => {
            resp.begin(8);
            for a in [&b"GEOSEARCH"[..], QUERY_SET.positions, b"FROMLONLAT"] {
                resp.arg(a);
            }
            fixed_arg(resp, *lon);
            fixed_arg(resp, *lat);
            resp.arg(b"BYRADIUS");
            fixed_arg(resp, *radius_m);
            resp.arg(b"m");
            resp.flush().await.map_err(io_error)?;
            read_members(resp, ids).await
        }
        Query::Polygon { ring, .. } => {
            let (min_lat, max_lat, min_lon, max_lon) = bounds(ring);
            let widest = if min_lat <= 0.0 && max_lat >= 0.0 {
                0.0
            } else {
                min_lat.abs().min(max_lat.abs())
            };
            // A margin so that the box, however the server measures it, holds the polygon.
            let width_m =
                (max_lon - min_lon) * METRES_PER_DEGREE * widest.to_radians().cos() * 1.02 + 100.0;
            let height_m = (max_lat - min_lat) * METRES_PER_DEGREE * 1.02 + 100.0;
            resp.begin(10);
            for a in [&b"GEOSEARCH"[..], QUERY_SET.positions, b"FROMLONLAT"] {
                resp.arg(a);
            }
            fixed_arg(resp, (min_lon + max_lon) / 2.0);
            fixed_arg(resp, (min_lat + max_lat) / 2.0);
            resp.arg(b"BYBOX");
            fixed_arg(resp, width_m);
            fixed_arg(resp, height_m);
            resp.arg(b"m");
            resp.arg(b"WITHCOORD");
            resp.flush().await.map_err(io_error)?;
            read_inside(resp, ring, ids).await
        }
    }
}

/// Opens an authenticated connection on the right database (TLS first for `rediss://`), and
/// says what its TLS negotiated. A PING makes a plaintext client against a TLS port fail here.
async fn connect(
    address: &Address,
    identity: &Identity,
) -> Result<(Resp, Option<Negotiated>), TargetError> {
    let connect_error = |message: String| identity.connect_error(message);
    let target = format!("{}:{}", address.host, address.port);
    let tcp = Resp::tcp(&target, CONNECT_TIMEOUT).await.map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::ConnectionRefused {
            " — is the server running? (scripts/services start)"
        } else {
            ""
        };
        connect_error(format!("{e}{hint}"))
    })?;
    let (stream, negotiated) = match &address.tls {
        None => (Stream::Plain(tcp), None),
        Some(config) => {
            let endpoint = Endpoint {
                host: address.host.clone(),
                port: address.port,
            };
            let timeout = common::tls::HANDSHAKE_TIMEOUT;
            let (tls, negotiated) = common::tls::handshake(tcp, config.clone(), &endpoint, timeout)
                .await
                .map_err(|e| connect_error(e.to_string()))?;
            (Stream::Tls(Box::new(tls)), Some(negotiated))
        }
    };
    let mut resp = Resp::over(stream);
    let failed = |e: std::io::Error| {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
        let closed = matches!(e.kind(), ConnectionReset | UnexpectedEof | BrokenPipe);
        let hint = if closed && address.tls.is_none() {
            " — the server closed the connection at once: is this a TLS port? (use rediss://)"
        } else {
            ""
        };
        connect_error(format!("{e}{hint}"))
    };
    let db = address.db.to_string();
    let mut commands: Vec<Vec<&[u8]>> = Vec::new();
    if let Some(password) = &address.password {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = &address.user {
            args.push(user.as_bytes());
        }
        args.push(password.as_bytes());
        commands.push(args);
    }
    if address.db != 0 {
        commands.push(vec![b"SELECT", db.as_bytes()]);
    }
    commands.push(vec![b"PING"]);
    for args in commands {
        if let Value::Error(e) = resp.call(&args).await.map_err(failed)? {
            return Err(connect_error(e));
        }
    }
    Ok((resp, negotiated))
}

pub struct RedisTarget {
    identity: Identity,
    address: Address,
    control: Resp,
    tls: TlsState,
}

impl RedisTarget {
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let settings = reach.tls(spec)?;
        let url = reach.url(spec);
        let mut address = parse_url(&url).map_err(|message| TargetError::Url {
            url: spec.url_redacted(),
            message,
        })?;
        if settings.uses_tls() {
            address.tls = Some(settings.client_config()?);
        }
        let kind = match spec.scheme() {
            "rediss" => "redis",
            "valkeys" => "valkey",
            plain => plain,
        };
        let identity = Identity::of(spec, kind);
        let (control, negotiated) = connect(&address, &identity).await?;
        Ok(Box::new(RedisTarget {
            identity,
            address,
            control,
            tls: TlsState {
                settings,
                negotiated,
            },
        }))
    }

    fn error(&self, e: impl ToString) -> TargetError {
        self.identity.query_error(e)
    }

    async fn call(&mut self, args: &[&[u8]]) -> Result<Value, TargetError> {
        match self.control.call(args).await {
            Ok(Value::Error(e)) => {
                Err(self.error(format!("{}: {e}", String::from_utf8_lossy(args[0]))))
            }
            Ok(value) => Ok(value),
            Err(e) => Err(self.error(e)),
        }
    }

    async fn int(&mut self, args: &[&[u8]]) -> Result<i64, TargetError> {
        match self.call(args).await? {
            Value::Int(n) => Ok(n),
            other => Err(self.error(format!("expected an integer, got {other:?}"))),
        }
    }

    async fn config(&mut self, name: &str) -> Result<String, TargetError> {
        match self.call(&[b"CONFIG", b"GET", name.as_bytes()]).await? {
            Value::Array(Some(items)) if items.len() == 2 => {
                Ok(items[1].text().unwrap_or_default())
            }
            other => Err(self.error(format!("CONFIG GET {name} answered {other:?}"))),
        }
    }

    async fn delete(&mut self, keys: &[&[u8]]) -> Result<(), TargetError> {
        let mut args: Vec<&[u8]> = vec![b"DEL"];
        args.extend_from_slice(keys);
        self.int(&args).await.map(drop)
    }
}

/// The server's INFO fields.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

common::identified!(RedisTarget);

impl Target for RedisTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
    }

    fn describe(&mut self) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let info = self
                .call(&[b"INFO", b"server"])
                .await?
                .text()
                .unwrap_or_default();
            let (kind, version) = match info_field(&info, "valkey_version") {
                Some(v) => ("valkey", format!("Valkey {v}")),
                None => (
                    "redis",
                    format!(
                        "Redis {}",
                        info_field(&info, "redis_version").unwrap_or("(unknown)")
                    ),
                ),
            };
            let appendonly = self.config("appendonly").await?;
            let appendfsync = self.config("appendfsync").await?;
            let save = self.config("save").await?;
            let dir = self.config("dir").await?;
            let durable = appendonly == "yes" && appendfsync == "always";
            let durability = if durable {
                "durable: appendonly yes, appendfsync always (AOF fsync before replies)".to_owned()
            } else if appendonly == "yes" {
                format!("not durable per write: appendonly yes, appendfsync {appendfsync}")
            } else if save.is_empty() {
                "volatile: no persistence (appendonly no, save '')".to_owned()
            } else {
                format!("volatile: appendonly no, RDB snapshots only (save '{save}')")
            };
            let refusal = match self.address.asked {
                Some(Asked::Durable) if !durable => Some(format!(
                    "asked for durability=durable, but the server runs appendonly {appendonly}, appendfsync {appendfsync} (durable needs appendonly yes and appendfsync always)"
                )),
                Some(Asked::Volatile) if appendonly == "yes" => Some(format!(
                    "asked for durability=volatile, but the server runs appendonly yes (appendfsync {appendfsync})"
                )),
                _ => None,
            };
            // An unnamed system is named after its engine and its durability mode.
            let mode = if durable {
                "durable"
            } else if appendonly == "yes" {
                "aof"
            } else {
                "volatile"
            };
            let settings = BTreeMap::from([
                ("appendonly".to_owned(), appendonly),
                ("appendfsync".to_owned(), appendfsync),
                ("save".to_owned(), save),
                (
                    "io-threads".to_owned(),
                    self.config("io-threads").await.unwrap_or_default(),
                ),
            ]);
            Ok(Description {
                system: Described {
                    kind: kind.into(),
                    version,
                    settings,
                    data_dir: is_local_host(&self.address.host).then(|| PathBuf::from(dir)),
                    location: location_of_host(&self.address.host),
                },
                default_name: format!("{kind}-{mode}"),
                notes: Vec::new(),
                durable,
                durability,
                refusal,
                method: vec![
                    "a batch is three pipelined commands: GEOADD of every position, HSET of every 128-byte record by event id, HSET of the latest record by entity id".into(),
                    "radius: GEOSEARCH BYRADIUS (spherical distance); polygon: GEOSEARCH BYBOX over the polygon's bounding box, then an exact point-in-polygon filter in the client (Redis has no polygon query)".into(),
                ],
            })
        })
    }

    fn prepare(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            let owner = self.call(&[b"GET", OWNER_KEY]).await?;
            let ours = matches!(&owner, Value::Bulk(Some(v)) if v == MARKER);
            if !ours {
                for key in all_keys() {
                    if self.int(&[b"EXISTS", key]).await? > 0 {
                        return Err(self
                            .identity
                            .foreign(format!("key {}", String::from_utf8_lossy(key))));
                    }
                }
            }
            self.delete(&all_keys()).await?;
            self.call(&[b"SET", OWNER_KEY, MARKER]).await.map(drop)
        })
    }

    fn load<'a>(&'a mut self, events: &'a [Event]) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            for chunk in events.chunks(LOAD_CHUNK) {
                insert_batch(&mut self.control, QUERY_SET, chunk)
                    .await
                    .map_err(|e| {
                        self.identity
                            .query_error(format!("loading the query set: {e}"))
                    })?;
            }
            Ok(())
        })
    }

    fn verify_indexes(&mut self) -> BoxFuture<'_, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let kind = self
                .call(&[b"TYPE", QUERY_SET.positions])
                .await?
                .text()
                .unwrap_or_default();
            let hash = self
                .call(&[b"TYPE", QUERY_SET.latest])
                .await?
                .text()
                .unwrap_or_default();
            if kind != "zset" || hash != "hash" {
                return Err(self.error(format!(
                    "the query set's keys are a {kind} and a {hash} (expected zset and hash)"
                )));
            }
            Ok(BTreeMap::from([
                (
                    "query.spatial_index".to_owned(),
                    "geo sorted set (52-bit geohash scores, TYPE zset)".to_owned(),
                ),
                (
                    "query.latest".to_owned(),
                    "hash by entity id (TYPE hash)".to_owned(),
                ),
            ]))
        })
    }

    fn reset_inserts(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            self.delete(&[
                INSERT_SET.positions,
                INSERT_SET.records,
                INSERT_SET.latest,
                POINT_ADDS,
            ])
            .await
        })
    }

    fn count_inserts(&mut self) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            let positions = self.int(&[b"ZCARD", INSERT_SET.positions]).await?;
            let records = self.int(&[b"HLEN", INSERT_SET.records]).await?;
            if positions != records {
                return Err(self.error(format!("{positions} positions but {records} records")));
            }
            let points = self.int(&[b"ZCARD", POINT_ADDS]).await?;
            Ok((positions + points) as u64)
        })
    }

    fn cleanup(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(async move {
            if matches!(self.call(&[b"GET", OWNER_KEY]).await?, Value::Bulk(Some(v)) if v == MARKER)
            {
                self.delete(&all_keys()).await?;
                self.delete(&[OWNER_KEY]).await?;
            }
            Ok(())
        })
    }

    fn open_workers(&self, size: usize) -> BoxFuture<'_, Result<Box<dyn GeoWorkers>, TargetError>> {
        let (address, identity) = (self.address.clone(), self.identity.clone());
        let connector: Connector<RedisSession> = Arc::new(move || {
            let (address, identity) = (address.clone(), identity.clone());
            Box::pin(async move {
                let (resp, _) = connect(&address, &identity)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(RedisSession { resp })
            })
        });
        async_workers(size, connector)
    }

    fn supports_point_adds(&self) -> bool {
        true
    }
}

struct RedisSession {
    resp: Resp,
}

impl GeoSession for RedisSession {
    async fn insert(&mut self, batch: &[Event]) -> Result<(), OpError> {
        insert_batch(&mut self.resp, INSERT_SET, batch).await
    }

    async fn query(&mut self, query: &Query, ids: &mut Vec<u128>) -> Result<(), OpError> {
        answer(&mut self.resp, query, ids).await
    }

    /// `GEOADD key lon lat m:NNNNNNNNNNNNNN` per event, as redis-benchmark sends it.
    async fn add_points(&mut self, events: &[Event], first: u64) -> Result<(), OpError> {
        let resp = &mut self.resp;
        for (k, e) in events.iter().enumerate() {
            resp.begin(5);
            resp.arg(b"GEOADD");
            resp.arg(POINT_ADDS);
            fixed_arg(resp, e.lon);
            fixed_arg(resp, e.lat);
            let member = first + k as u64;
            resp.arg_with(16, |out| {
                out.extend_from_slice(b"m:");
                let mut digits = [b'0'; 14];
                let mut n = member;
                for d in digits.iter_mut().rev() {
                    *d = b'0' + (n % 10) as u8;
                    n /= 10;
                }
                out.extend_from_slice(&digits);
            });
        }
        resp.flush().await.map_err(io_error)?;
        let mut failure = None;
        for _ in 0..events.len() {
            match resp.frame().await.map_err(io_error)? {
                Frame::Int(_) => {}
                Frame::Error(r) => {
                    failure
                        .get_or_insert_with(|| String::from_utf8_lossy(resp.bytes(r)).into_owned());
                }
                other => {
                    failure.get_or_insert_with(|| format!("unexpected GEOADD reply {other:?}"));
                }
            }
        }
        failure.map_or(Ok(()), |m| Err(OpError::Failed(m)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_are_written_with_seven_decimals() {
        for (value, text) in [
            (2.3522, "2.3522000"),
            (-0.1278, "-0.1278000"),
            (-122.4194, "-122.4194000"),
            (0.0, "0.0000000"),
            (1000.5, "1000.5000000"),
        ] {
            let mut digits = [0u8; 32];
            let at = render_fixed(value, &mut digits);
            assert_eq!(std::str::from_utf8(&digits[at..]).unwrap(), text, "{value}");
        }
    }
}
