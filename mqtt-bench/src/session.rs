//! How the run talks to a broker, below both targets and workloads: the endpoint every client
//! connects with, what a window needs of a broker ([`Link`]), one measured window with the
//! broker's CPU and memory sampled around it, and the control exchanges made before any clock
//! starts (reading the broker's `$SYS` topics, and a round trip of the run's payload).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::procstat::{Probe, Sampler, Usage};
use common::tls::Negotiated;

use crate::engine::{WindowResult, WindowSpec, run_window};
use crate::gate::Gate;
use crate::message::{Stamp, read_stamp, stamp};
use crate::protocol::codec::{self, Ack, ConnAckInfo, Incoming, Protocol, PublishTemplate};
use crate::protocol::conn::{Conn, ConnError, ConnectOptions, Endpoint};
use crate::protocol::transport::TlsLink;

/// How long connecting, subscribing and the verification round trip may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest packet mqtt-bench accepts from a broker.
pub const MAX_PACKET_BYTES: usize = codec::MAX_REMAINING_LEN;
/// How long to wait for the retained `$SYS` topics.
const SYS_WAIT: Duration = Duration::from_millis(1500);
/// The `$SYS` topics brokers publish their version on: Mosquitto's (and mochi-mqtt's), and
/// EMQX's per node.
pub const SYS_TOPICS: [&str; 2] = ["$SYS/broker/version", "$SYS/brokers/+/version"];

/// What an endpoint is made from.
#[derive(Debug, Clone)]
pub struct Client {
    pub username: Option<String>,
    pub password: Option<String>,
    pub protocol: Protocol,
    pub keep_alive_s: u16,
    pub source_addrs: Arc<[IpAddr]>,
    /// `mqtts://`: the TLS every connection starts with.
    pub tls: Option<TlsLink>,
    /// The run's tag (with several workers: the run id and the worker's index), in the client
    /// id of the connection that reads the broker's description, as in every other.
    pub tag: Arc<str>,
}

/// Where every client of the run connects, as whom, with the run's client limits; the
/// broker's address is resolved once, here.
pub fn endpoint(addr: String, client: &Client) -> Result<Endpoint, ConnError> {
    let socket_addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|source| ConnError::Unreachable {
            addr: addr.as_str().into(),
            source,
        })?
        .collect();
    Ok(Endpoint {
        addr: addr.into(),
        socket_addrs: socket_addrs.into(),
        username: client.username.clone(),
        password: client.password.clone(),
        protocol: client.protocol,
        handshake_timeout: HANDSHAKE_TIMEOUT,
        max_packet_bytes: MAX_PACKET_BYTES,
        keep_alive_s: client.keep_alive_s,
        source_addrs: client.source_addrs.clone(),
        tls: client.tls.clone(),
    })
}

/// What a measured window needs of a broker: where its clients connect and how its CPU and
/// memory are observed.
#[derive(Debug, Clone)]
pub struct Link {
    pub endpoint: Endpoint,
    pub probe: Option<Probe>,
    /// Whether the broker runs inside this process (its memory is then the client's too).
    pub in_process: bool,
    /// What the broker announced in its CONNACK when it was verified (MQTT 5 limits).
    pub connack: ConnAckInfo,
}

/// A window with what it cost.
pub struct Measured {
    pub result: WindowResult,
    pub usage: Usage,
    /// The client's own CPU: its lanes' threads.
    pub client_cpu_ns: u64,
}

/// Runs one window on `link` with the broker's CPU and memory sampled through it, opened at
/// the start barrier (`gate`).
pub async fn measure(
    link: &Link,
    spec: WindowSpec,
    gate: &mut Gate,
) -> Result<Measured, ConnError> {
    let sampler = link.probe.clone().map(Sampler::start);
    let result = run_window(spec, gate).await;
    let usage = sampler.map(Sampler::finish).unwrap_or_default();
    let result = result?;
    Ok(Measured {
        client_cpu_ns: result.lanes.cpu_ns,
        result,
        usage,
    })
}

/// What a broker says about itself over MQTT before any clock starts: the retained `$SYS`
/// topics it publishes ([`SYS_TOPICS`], by topic), what its CONNACK announced and what the
/// connection's TLS negotiated (`mqtts://`). A broker
/// that refuses the connection is an error; one that refuses or drops the `$SYS`
/// subscription publishes nothing.
pub async fn describe(
    endpoint: &Endpoint,
    client_id: &str,
) -> Result<(BTreeMap<String, String>, ConnAckInfo, Option<Negotiated>), ConnError> {
    let (mut conn, handshake) =
        Conn::connect(endpoint, &ConnectOptions::clean(client_id, 0)).await?;
    let topics = read_sys(&mut conn, endpoint).await.unwrap_or_default();
    conn.disconnect().await;
    Ok((topics, *handshake.connack, handshake.tls))
}

async fn read_sys(
    conn: &mut Conn,
    endpoint: &Endpoint,
) -> Result<BTreeMap<String, String>, ConnError> {
    // A broker may refuse one filter (a wildcard under $SYS) and accept the other: ask one at a
    // time, and read what the first brought before asking for the next (its retained message
    // would otherwise arrive where the next SUBACK is awaited).
    let mut found = BTreeMap::new();
    for filter in SYS_TOPICS {
        if conn
            .subscribe(&[(filter, 0)], endpoint.handshake_timeout)
            .await
            .is_err()
        {
            break;
        }
        let deadline = Instant::now() + SYS_WAIT;
        loop {
            while let Some(packet) = conn.next_packet()? {
                if let Incoming::Publish(p) = packet {
                    let topic = String::from_utf8_lossy(&p.topic).into_owned();
                    let text = String::from_utf8_lossy(&p.payload).trim().to_owned();
                    found.insert(topic, text);
                }
            }
            if !found.is_empty() {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline.into(), conn.fill()).await {
                Ok(filled) => filled?,
                Err(_) => break,
            }
        }
    }
    Ok(found)
}

/// Sends one message of the run's payload size at QoS 1 through the broker and checks it comes
/// back intact: proof that the broker routes, acknowledges and accepts payloads this large,
/// before any clock starts. Returns what the publisher's CONNACK announced.
pub async fn verify_round_trip(
    endpoint: &Endpoint,
    topic: &str,
    payload_bytes: usize,
    client_prefix: &str,
) -> Result<ConnAckInfo, ConnError> {
    let too_large = |e: ConnError| match e {
        ConnError::Closed { addr, context } => ConnError::Closed {
            addr,
            context: format!(
                "{context} after being sent a {payload_bytes}-byte message; does the broker accept payloads this large? (Mosquitto: max_packet_size / message_size_limit)"
            ),
        },
        e => e,
    };
    let (mut sub, _) = Conn::connect(
        endpoint,
        &ConnectOptions::clean(&format!("{client_prefix}-verify-s"), 1),
    )
    .await?;
    sub.subscribe(&[(topic, 1)], endpoint.handshake_timeout)
        .await?;
    let (mut publisher, handshake) = Conn::connect(
        endpoint,
        &ConnectOptions::clean(&format!("{client_prefix}-verify-p"), 0),
    )
    .await?;
    if let Some(max) = handshake.connack.max_packet_size
        && payload_bytes + topic.len() + 16 > max as usize
    {
        return Err(ConnError::TooLarge {
            addr: endpoint.addr.clone(),
            what: "payloads this large",
            detail: format!(
                "its CONNACK announces a maximum packet size of {max} bytes, less than a {payload_bytes}-byte message needs"
            ),
        });
    }
    let mut payload = vec![0x5a; payload_bytes];
    let mark = Stamp {
        seq: 0,
        sent_ns: 0,
        window: u32::MAX,
        publisher: 0,
    };
    stamp(&mut payload, mark);
    let payload = Bytes::from(payload);
    let mut template =
        PublishTemplate::new(endpoint.protocol, topic, 1, false, payload.clone(), None);
    template
        .encode(&mut publisher.wbuf, 1)
        .map_err(|source| ConnError::Codec {
            addr: endpoint.addr.clone(),
            source,
        })?;
    publisher.flush().await.map_err(too_large)?;
    match wait_for(&mut publisher, |p| matches!(p, Incoming::Ack { .. }))
        .await
        .map_err(too_large)?
    {
        None => {
            return Err(ConnError::Silent {
                addr: endpoint.addr.clone(),
                waited: HANDSHAKE_TIMEOUT,
                what: "a PUBACK for a QoS 1 test message",
            });
        }
        Some(Incoming::Ack { code, .. }) if code >= 0x80 => {
            return Err(ConnError::Unsupported {
                addr: endpoint.addr.clone(),
                what: "the test message",
                detail: format!(
                    "it refused it with {}",
                    crate::protocol::reason::describe(code)
                ),
            });
        }
        Some(_) => {}
    }
    let delivered = wait_for(&mut sub, |p| matches!(p, Incoming::Publish(_)))
        .await
        .map_err(too_large)?;
    let intact = matches!(&delivered, Some(Incoming::Publish(p))
        if p.payload == payload && read_stamp(&p.payload) == Some(mark));
    publisher.disconnect().await;
    sub.disconnect().await;
    if !intact {
        return Err(ConnError::Unexpected {
            addr: endpoint.addr.clone(),
            what: format!(
                "delivery: a {payload_bytes}-byte QoS 1 test message did not reach its subscriber intact"
            ),
        });
    }
    Ok(*handshake.connack)
}

/// Waits for a packet `wanted` accepts (answering a QoS 1 delivery with its PUBACK) and
/// returns it; `None` after the handshake timeout.
async fn wait_for(
    conn: &mut Conn,
    wanted: impl Fn(&Incoming) -> bool,
) -> Result<Option<Incoming>, ConnError> {
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let protocol = conn.protocol();
    loop {
        while let Some(packet) = conn.next_packet()? {
            if let Incoming::Publish(p) = &packet
                && p.qos == 1
            {
                codec::encode_ack(&mut conn.wbuf, protocol, Ack::PubAck, p.pkid);
                conn.flush().await?;
            }
            if let Incoming::Disconnect { code } = packet {
                return Err(conn.disconnected(code));
            }
            if wanted(&packet) {
                return Ok(Some(packet));
            }
        }
        match tokio::time::timeout_at(deadline.into(), conn.fill()).await {
            Ok(filled) => filled?,
            Err(_) => return Ok(None),
        }
    }
}

/// Clears a persistent session the run made: a clean connect with its client identifier,
/// then a disconnect, so the broker keeps nothing of the run.
pub async fn clear_session(endpoint: &Endpoint, client_id: &str) -> Result<(), ConnError> {
    let (conn, _) = Conn::connect(endpoint, &ConnectOptions::clean(client_id, 0)).await?;
    conn.disconnect().await;
    Ok(())
}
