//! The embedded broker: rumqttd, started inside this process on free loopback ports (one for
//! MQTT 3.1.1, one for MQTT 5) when no broker is named (or for `--broker embedded`). It shares
//! the machine and the process with the client, so every report labels it embedded and
//! colocated, and its CPU is read from its own threads.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::options::TargetSpec;
use common::pool::BoxFuture;
use common::procstat::Probe;
use common::results::{Location, SystemInfo};
use rumqttd::{Config, ConnectionSettings, RouterConfig, ServerSettings};

use super::{Broker, BrokerKind, Description, Reached, TargetError, settings};
use crate::protocol::codec::ConnAckInfo;
use crate::session::{Client, Link, endpoint};

/// The crate version the embedded broker was built from, as Cargo resolved it (build.rs).
pub const RUMQTTD_VERSION: &str = env!("FAIRBENCH_RUMQTTD_VERSION");
/// Thread names of the embedded broker: its listener thread, and rumqttd's router thread.
const THREAD_PREFIXES: [&str; 2] = ["fb-broker", "router-"];
/// Largest payload the embedded broker accepts.
const MAX_PAYLOAD_BYTES: usize = 256 * 1024 * 1024;
/// Its per-connection in-flight limit, as Mosquitto is configured in seed 000.
const MAX_INFLIGHT: usize = 64;
/// Per-topic commit log: segments of this size, this many kept. rumqttd keeps every message
/// in its log until a segment is dropped, and every window has a topic of its own, so these
/// bound its memory. 3 MiB holds far more than a closed-loop publisher's backlog of messages.
const SEGMENT_BYTES: usize = 1024 * 1024;
const SEGMENTS: usize = 3;
/// How long the broker may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Keeps the embedded broker alive; it runs until the process exits (rumqttd has no shutdown).
#[derive(Debug)]
pub struct EmbeddedBroker {
    pub addr: SocketAddr,
    pub v5_addr: SocketAddr,
}

pub const LABELS: [&str; 2] = ["embedded", "colocated"];

/// rumqttd as this process runs it: its version from the build, its settings from the
/// configuration it was started with.
#[derive(Debug, Clone, Copy)]
pub struct Rumqttd;

impl BrokerKind for Rumqttd {
    fn kind(&self) -> &'static str {
        "rumqttd"
    }

    fn describe<'a>(
        &'a self,
        _broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move { Ok(Some(description())) })
    }
}

/// The version it was built from and the settings it was started with. Not its address: a
/// port of the kernel's choice every run (the URL says it) would make two runs incomparable.
fn description() -> Description {
    Description {
        version: format!("rumqttd {RUMQTTD_VERSION} (embedded, in-process)"),
        verified: settings([
            ("max_inflight_count", MAX_INFLIGHT.to_string()),
            ("max_payload_size", MAX_PAYLOAD_BYTES.to_string()),
            ("segment_bytes", SEGMENT_BYTES.to_string()),
            ("segments_per_topic", SEGMENTS.to_string()),
        ]),
    }
}

pub async fn open(spec: &TargetSpec, client: &Client) -> Result<Broker, TargetError> {
    let guard = tokio::task::spawn_blocking(start)
        .await
        .map_err(|e| did_not_start(e.to_string()))??;
    let listen = guard.addr.to_string();
    let description = description();
    let info = SystemInfo {
        name: spec.name.clone().unwrap_or_else(|| "embedded".to_owned()),
        kind: Rumqttd.kind().into(),
        url_redacted: format!("mqtt://{}", guard.addr),
        version: description.version,
        verified: description.verified,
        labels: LABELS.iter().map(|l| (*l).to_owned()).collect(),
        location: Location::Embedded,
        ..SystemInfo::default()
    };
    Ok(Broker {
        link: Link {
            endpoint: endpoint(listen, client)?,
            probe: Some(Probe::Threads(
                THREAD_PREFIXES.iter().map(|p| (*p).to_owned()).collect(),
            )),
            in_process: true,
            connack: ConnAckInfo::default(),
        },
        info,
        v5_addr: Some(guard.v5_addr.to_string()),
        guard: Some(Arc::new(guard)),
        dropped: None,
    })
}

fn did_not_start(message: impl std::fmt::Display) -> TargetError {
    TargetError::Other(format!("the embedded broker did not start: {message}"))
}

/// One listener's settings.
fn listener(name: &str, listen: SocketAddr) -> HashMap<String, ServerSettings> {
    let mut servers = HashMap::new();
    servers.insert(
        "1".to_owned(),
        ServerSettings {
            name: format!("{}-{name}", THREAD_PREFIXES[0]),
            listen,
            tls: None,
            next_connection_delay_ms: 0,
            connections: ConnectionSettings {
                connection_timeout_ms: 10_000,
                max_payload_size: MAX_PAYLOAD_BYTES,
                max_inflight_count: MAX_INFLIGHT,
                auth: None,
                external_auth: None,
                dynamic_filters: true,
            },
        },
    );
    servers
}

/// Starts rumqttd on free ports of 127.0.0.1 and waits until both accept connections.
fn start() -> Result<EmbeddedBroker, TargetError> {
    let addr = free_loopback_port()?;
    let v5_addr = free_loopback_port()?;
    let config = Config {
        id: 0,
        router: RouterConfig {
            max_connections: 10_010,
            max_outgoing_packet_count: 2_000,
            max_segment_size: SEGMENT_BYTES,
            max_segment_count: SEGMENTS,
            ..RouterConfig::default()
        },
        v4: Some(listener("v4", addr)),
        v5: Some(listener("v5", v5_addr)),
        ..Config::default()
    };
    std::thread::Builder::new()
        .name(format!("{}-main", THREAD_PREFIXES[0]))
        .spawn(move || {
            let mut broker = rumqttd::Broker::new(config);
            if let Err(e) = broker.start() {
                eprintln!("the embedded broker stopped: {e}");
            }
        })
        .map_err(did_not_start)?;
    let deadline = Instant::now() + START_TIMEOUT;
    for listen in [addr, v5_addr] {
        while TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_err() {
            if Instant::now() >= deadline {
                return Err(did_not_start(format!(
                    "it did not accept connections on {listen} within {START_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(EmbeddedBroker { addr, v5_addr })
}

/// A port of 127.0.0.1 nothing listens on (the kernel's choice).
fn free_loopback_port() -> Result<SocketAddr, TargetError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| did_not_start(format!("no free loopback port: {e}")))?;
    listener.local_addr().map_err(did_not_start)
}
