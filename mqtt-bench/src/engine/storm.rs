//! Connection storms (connect, idle): N clients started at a paced rate, one small task per
//! connection spread over the lanes, each CONNACK timed from the connection's intended start
//! with a TLS broker's handshake taken out and recorded on its own;
//! the connections are then held (keep-alive only) while the broker's memory and CPU are read,
//! checked alive with a PINGREQ, and closed so that the broker closes first.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::lanes::Lanes;
use common::procstat::{Probe, Sampler, Usage, own_rss};
use common::recorder::Recorder;
use hdrhistogram::Histogram;
use tokio::sync::watch;

use super::lanes::{LaneClock, LaneUsage};
use crate::protocol::codec::Incoming;
use crate::protocol::conn::{Conn, ConnError, ConnectOptions, Endpoint, IDLE_READ_BYTES, Session};

/// How long before the first connection the storm is set up.
const START_LEAD: Duration = Duration::from_millis(20);
/// How long a held connection may take to answer the final PINGREQ.
const PING_CHECK: Duration = Duration::from_secs(5);
/// How long a closing client waits for the broker to close first.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// One storm.
#[derive(Debug, Clone)]
pub struct StormSpec {
    pub endpoint: Endpoint,
    pub clients: u64,
    pub rate_per_s: f64,
    /// How long every connection is held once all have connected (idle); zero for connect.
    pub hold: Duration,
    /// Keep-alive pings while held.
    pub ping_every: Duration,
    pub client_prefix: String,
    pub ceiling: Duration,
    /// The broker's process, when known: its memory is read when all have connected, its CPU
    /// over the hold.
    pub probe: Option<Probe>,
}

/// What a storm measured.
#[derive(Debug, Clone)]
pub struct StormResult {
    pub attempted: u64,
    pub connected: u64,
    /// CONNACK with a refusal, or the TCP connection refused.
    pub refused: u64,
    pub refused_reason: Option<String>,
    /// No CONNACK within the handshake timeout.
    pub timed_out: u64,
    /// Anything else (reset, closed before the CONNACK).
    pub failed: u64,
    pub first_error: Option<String>,
    /// CONNACK latency from each connection's intended start (service time from its actual
    /// start, schedule lag apart), less the TLS handshake: TCP, CONNECT and CONNACK.
    pub connack: Recorder,
    /// The TLS handshake alone (after the TCP connect, before CONNECT) of each connection to a
    /// TLS broker; empty in plaintext. Never inside `connack`.
    pub tls_handshake: Histogram<u64>,
    /// The TCP connect alone.
    pub tcp: Histogram<u64>,
    /// From the storm's start to the last CONNACK.
    pub storm_elapsed: Duration,
    pub missed_ticks: u64,
    /// Connections made from each local address.
    pub per_source: BTreeMap<String, u64>,
    /// Connections the broker closed while they were held.
    pub dropped: u64,
    pub dropped_reason: Option<String>,
    pub pings: u64,
    /// Keep-alive PINGREQ → PINGRESP while held.
    pub ping_rtt: Histogram<u64>,
    /// Connections that answered the final PINGREQ.
    pub alive: u64,
    /// Connections the broker closed first when they disconnected.
    pub closed_by_broker: u64,
    pub broker_rss_before: Option<u64>,
    pub broker_rss_connected: Option<u64>,
    pub client_rss_before: Option<u64>,
    pub client_rss_connected: Option<u64>,
    /// The broker from the first connection until all had connected.
    pub storm_usage: Usage,
    /// The broker over the hold (idle).
    pub hold_usage: Usage,
    /// The client's lanes during the storm, and during the hold.
    pub lanes: LaneUsage,
    pub hold_lanes: LaneUsage,
}

impl StormResult {
    pub fn connects_per_s(&self) -> f64 {
        self.connected as f64 / self.storm_elapsed.as_secs_f64().max(1e-9)
    }
}

/// How one client fared.
#[derive(Debug, Default)]
struct Outcome {
    connack_ns: Option<(u64, u64)>,
    /// When the CONNACK came, from the storm's start.
    done_ns: u64,
    tcp_ns: u64,
    /// The TLS handshake (0: plaintext).
    tls_ns: u64,
    lag_ns: u64,
    missed: bool,
    source: Option<std::net::IpAddr>,
    error: Option<(Failure, String)>,
    dropped: Option<String>,
    pings: u64,
    ping_rtt_ns: Vec<u64>,
    alive: bool,
    closed_by_broker: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Refused,
    TimedOut,
    Failed,
}

/// What every client of a storm shares.
struct Ctx {
    spec: StormSpec,
    start: Instant,
    settled: AtomicU64,
    connected: AtomicU64,
    release: watch::Receiver<bool>,
}

/// Runs one storm; never fails as a whole: every client's fate is counted.
pub async fn run(spec: StormSpec) -> StormResult {
    let lanes = Lanes::shared();
    let broker_rss_before = spec.probe.as_ref().and_then(Probe::rss_bytes);
    let client_rss_before = own_rss().map(|r| r.current_bytes);
    let (release_tx, release) = watch::channel(false);
    let storm_sampler = spec.probe.clone().map(Sampler::start);
    let clock = LaneClock::start().await;
    let start = Instant::now() + START_LEAD;
    let ctx = Arc::new(Ctx {
        spec: spec.clone(),
        start,
        settled: AtomicU64::new(0),
        connected: AtomicU64::new(0),
        release,
    });
    let spawners: Vec<_> = (0..lanes.len())
        .map(|lane| {
            let ctx = ctx.clone();
            lanes.spawn(lane, spawn_lane(ctx, lane, lanes.len()))
        })
        .collect();
    let storm_deadline = start
        + Duration::from_secs_f64(spec.clients as f64 / spec.rate_per_s)
        + spec.endpoint.handshake_timeout * 2
        + Duration::from_secs(1);
    while ctx.settled.load(Ordering::Acquire) < spec.clients && Instant::now() < storm_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let lanes_used = clock.finish(start).await;
    let storm_usage = storm_sampler.map(Sampler::finish).unwrap_or_default();
    let broker_rss_connected = spec.probe.as_ref().and_then(Probe::rss_bytes);
    let client_rss_connected = own_rss().map(|r| r.current_bytes);
    let hold_clock = LaneClock::start().await;
    let held_from = Instant::now();
    let hold_sampler = spec
        .probe
        .clone()
        .filter(|_| !spec.hold.is_zero())
        .map(Sampler::start);
    tokio::time::sleep(spec.hold).await;
    let hold_usage = hold_sampler.map(Sampler::finish).unwrap_or_default();
    let hold_lanes = hold_clock.finish(held_from).await;
    let _ = release_tx.send(true);
    let give_up = Instant::now() + PING_CHECK + CLOSE_WAIT * 2 + spec.ceiling;
    let mut result = StormResult::empty(spec.clients);
    for handle in spawners {
        match tokio::time::timeout_at(give_up.into(), handle).await {
            Ok(Ok(outcomes)) => outcomes.into_iter().for_each(|o| result.absorb(o)),
            Ok(Err(e)) => {
                result.note_failure(Failure::Failed, format!("a lane's task failed: {e}"))
            }
            Err(_) => result.note_failure(
                Failure::TimedOut,
                "clients were still busy at the ceiling".into(),
            ),
        }
    }
    result.storm_elapsed = result.storm_elapsed.max(Duration::from_nanos(1));
    result.broker_rss_before = broker_rss_before;
    result.broker_rss_connected = broker_rss_connected;
    result.client_rss_before = client_rss_before;
    result.client_rss_connected = client_rss_connected;
    result.storm_usage = storm_usage;
    result.hold_usage = hold_usage;
    result.lanes = lanes_used;
    result.hold_lanes = hold_lanes;
    result
}

/// One lane's share of the storm: client `i` (i ≡ lane mod lanes) starts at `start + i/rate`
/// in a task of its own; returns their outcomes once all are done.
async fn spawn_lane(ctx: Arc<Ctx>, lane: usize, lanes: usize) -> Vec<Outcome> {
    let interval = Duration::from_secs_f64(1.0 / ctx.spec.rate_per_s);
    let mut tasks = Vec::new();
    let mut index = lane as u64;
    while index < ctx.spec.clients {
        let intended = ctx.start + interval.mul_f64(index as f64);
        tokio::time::sleep_until(intended.into()).await;
        let late = Instant::now().saturating_duration_since(intended);
        let missed = late > interval * lanes as u32;
        tasks.push(tokio::spawn(client(ctx.clone(), index, intended, missed)));
        index += lanes as u64;
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await.unwrap_or_else(|e| Outcome {
            error: Some((Failure::Failed, format!("a client's task failed: {e}"))),
            ..Outcome::default()
        }));
    }
    outcomes
}

async fn client(ctx: Arc<Ctx>, index: u64, intended: Instant, missed: bool) -> Outcome {
    let started = Instant::now();
    let mut outcome = Outcome {
        lag_ns: started.saturating_duration_since(intended).as_nanos() as u64,
        missed,
        ..Outcome::default()
    };
    let id = format!("{}-c{index}", ctx.spec.client_prefix);
    let options = ConnectOptions {
        client_id: &id,
        session: Session::CLEAN,
        read_chunk: IDLE_READ_BYTES,
        client_index: index as usize,
    };
    let connected = Conn::connect(&ctx.spec.endpoint, &options).await;
    let done = Instant::now();
    ctx.settled.fetch_add(1, Ordering::Release);
    let (mut conn, handshake) = match connected {
        Ok(ok) => ok,
        Err(e) => {
            outcome.error = Some((classify(&e), e.to_string()));
            return outcome;
        }
    };
    ctx.connected.fetch_add(1, Ordering::Relaxed);
    outcome.done_ns = done.saturating_duration_since(ctx.start).as_nanos() as u64;
    outcome.tls_ns = handshake.tls.as_ref().map_or(0, |tls| tls.handshake_ns);
    outcome.connack_ns = Some(connack_ns(intended, started, done, outcome.tls_ns));
    outcome.tcp_ns = handshake.tcp.as_nanos() as u64;
    outcome.source = conn.local_ip();
    conn.set_ping_every(ctx.spec.ping_every);
    let mut release = ctx.release.clone();
    if let Err(e) = hold(&mut conn, &mut release, &mut outcome).await {
        outcome.dropped = Some(e.to_string());
        return outcome;
    }
    outcome.alive = ping_check(&mut conn).await;
    outcome.closed_by_broker = conn.close_gracefully(CLOSE_WAIT).await;
    outcome
}

/// The CONNACK's latency (from the intended start) and service time (from the actual one), each
/// with the TLS handshake taken out: a TLS broker's handshake is recorded on its own, never
/// inside the CONNACK figures.
fn connack_ns(intended: Instant, started: Instant, done: Instant, tls_ns: u64) -> (u64, u64) {
    let since = |from: Instant| done.saturating_duration_since(from).as_nanos() as u64;
    (
        since(intended).saturating_sub(tls_ns),
        since(started).saturating_sub(tls_ns),
    )
}

/// Keeps the connection (answering nothing but its own keep-alive) until the storm releases it.
async fn hold(
    conn: &mut Conn,
    release: &mut watch::Receiver<bool>,
    outcome: &mut Outcome,
) -> Result<(), ConnError> {
    let mut ping_sent: Option<Instant> = None;
    while !*release.borrow() {
        let next_ping = conn.next_ping();
        tokio::select! {
            changed = release.changed() => { if changed.is_err() { return Ok(()); } }
            io = conn.io(false) => {
                io?;
                while let Some(packet) = conn.next_packet()? {
                    match packet {
                        Incoming::PingResp => {
                            if let Some(sent) = ping_sent.take() {
                                outcome.ping_rtt_ns.push(sent.elapsed().as_nanos() as u64);
                            }
                        }
                        Incoming::Disconnect { code } => return Err(conn.disconnected(code)),
                        other => return Err(conn.unexpected(&format!("{} packet (to an idle client)", other.name()))),
                    }
                }
            }
            () = sleep_until_or_never(next_ping) => {
                let now = Instant::now();
                if conn.keep_alive_due(now) {
                    ping_sent = Some(now);
                    outcome.pings += 1;
                    conn.flush().await?;
                }
            }
        }
    }
    Ok(())
}

async fn sleep_until_or_never(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Sends a PINGREQ and waits for its PINGRESP: the connection is still served.
async fn ping_check(conn: &mut Conn) -> bool {
    let protocol = conn.protocol();
    crate::protocol::codec::encode_pingreq(&mut conn.wbuf, protocol);
    tokio::time::timeout(PING_CHECK, async {
        conn.flush().await?;
        loop {
            conn.fill().await?;
            while let Some(packet) = conn.next_packet()? {
                if packet == Incoming::PingResp {
                    return Ok::<bool, ConnError>(true);
                }
            }
        }
    })
    .await
    .is_ok_and(|r| r.unwrap_or(false))
}

fn classify(error: &ConnError) -> Failure {
    match error {
        ConnError::Refused { .. } => Failure::Refused,
        ConnError::Unreachable { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            Failure::Refused
        }
        ConnError::Silent { .. } => Failure::TimedOut,
        _ => Failure::Failed,
    }
}

impl StormResult {
    fn empty(clients: u64) -> StormResult {
        let histogram = || Histogram::new(3).expect("3 significant figures is valid");
        StormResult {
            attempted: clients,
            connected: 0,
            refused: 0,
            refused_reason: None,
            timed_out: 0,
            failed: 0,
            first_error: None,
            connack: Recorder::new(true),
            tls_handshake: histogram(),
            tcp: histogram(),
            storm_elapsed: Duration::ZERO,
            missed_ticks: 0,
            per_source: BTreeMap::new(),
            dropped: 0,
            dropped_reason: None,
            pings: 0,
            ping_rtt: histogram(),
            alive: 0,
            closed_by_broker: 0,
            broker_rss_before: None,
            broker_rss_connected: None,
            client_rss_before: None,
            client_rss_connected: None,
            storm_usage: Usage::default(),
            hold_usage: Usage::default(),
            lanes: LaneUsage::default(),
            hold_lanes: LaneUsage::default(),
        }
    }

    fn note_failure(&mut self, failure: Failure, message: String) {
        match failure {
            Failure::Refused => {
                self.refused += 1;
                self.refused_reason.get_or_insert(message);
            }
            Failure::TimedOut => {
                self.timed_out += 1;
                self.first_error.get_or_insert(message);
            }
            Failure::Failed => {
                self.failed += 1;
                self.first_error.get_or_insert(message);
            }
        }
    }

    fn absorb(&mut self, o: Outcome) {
        self.connack
            .record_lag(Duration::from_nanos(o.lag_ns), o.missed);
        self.missed_ticks = self.connack.missed_ticks;
        if let Some((failure, message)) = o.error {
            self.note_failure(failure, message);
            return;
        }
        let Some((latency_ns, service_ns)) = o.connack_ns else {
            return;
        };
        self.connected += 1;
        self.connack.record_ok(
            Duration::from_nanos(latency_ns),
            Duration::from_nanos(service_ns),
        );
        let _ = self.tcp.record(o.tcp_ns.max(1));
        if o.tls_ns > 0 {
            let _ = self.tls_handshake.record(o.tls_ns);
        }
        self.storm_elapsed = self.storm_elapsed.max(Duration::from_nanos(o.done_ns));
        let source = o.source.map_or("unknown".to_owned(), |ip| ip.to_string());
        *self.per_source.entry(source).or_default() += 1;
        if let Some(reason) = o.dropped {
            self.dropped += 1;
            self.dropped_reason.get_or_insert(reason);
        }
        self.pings += o.pings;
        for rtt in o.ping_rtt_ns {
            let _ = self.ping_rtt.record(rtt.max(1));
        }
        self.alive += u64::from(o.alive);
        self.closed_by_broker += u64::from(o.closed_by_broker);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::connack_ns;

    #[test]
    fn the_tls_handshake_is_taken_out_of_both_connack_figures() {
        let intended = Instant::now();
        let started = intended + Duration::from_millis(1);
        // TCP 1 ms, TLS 5 ms, CONNECT → CONNACK 2 ms.
        let done = started + Duration::from_millis(8);
        let tls = Duration::from_millis(5).as_nanos() as u64;
        assert_eq!(
            connack_ns(intended, started, done, tls),
            (4_000_000, 3_000_000)
        );
        assert_eq!(
            connack_ns(intended, started, done, 0),
            (9_000_000, 8_000_000),
            "plaintext: nothing taken out"
        );
    }
}
