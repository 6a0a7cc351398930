//! How the run talks to a broker, below both targets and workloads: the endpoint every client
//! connects with, what a window needs of a broker ([`Link`]), one measured window with the
//! broker's CPU and memory sampled around it, and the two control exchanges made before any
//! clock starts (reading `$SYS/broker/version`, and a round trip of the run's payload).

use std::time::{Duration, Instant};

use common::procstat::{Probe, Sampler, Usage};

use crate::engine::{WindowResult, WindowSpec, run_window};
use crate::message::{read_stamp, stamp};
use crate::protocol::codec::{self, kind};
use crate::protocol::conn::{Conn, ConnError, Endpoint};

/// How long connecting, subscribing and the verification round trip may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest packet mqtt-bench accepts from a broker.
pub const MAX_PACKET_BYTES: usize = codec::MAX_REMAINING_LEN;
/// Keep-alive announced in every CONNECT; quiet clients ping at half of it.
pub const KEEP_ALIVE_S: u16 = 60;
/// How long to wait for a retained `$SYS/broker/version`.
const SYS_WAIT: Duration = Duration::from_millis(1500);

/// Where every client of the run connects, as whom, with the run's client limits.
pub fn endpoint(addr: String, username: Option<String>, password: Option<String>) -> Endpoint {
    Endpoint {
        addr,
        username,
        password,
        handshake_timeout: HANDSHAKE_TIMEOUT,
        max_packet_bytes: MAX_PACKET_BYTES,
        keep_alive_s: KEEP_ALIVE_S,
    }
}

/// What a measured window needs of a broker: where its clients connect and how its CPU and
/// memory are observed.
#[derive(Debug, Clone)]
pub struct Link {
    pub endpoint: Endpoint,
    pub probe: Option<Probe>,
    /// Whether the broker runs inside this process (its CPU then comes out of the client's).
    pub in_process: bool,
}

/// A window with what it cost.
pub struct Measured {
    pub result: WindowResult,
    pub usage: Usage,
    pub client_cpu_ns: u64,
}

/// Runs one window on `link` with the broker's CPU and memory sampled through it.
pub async fn measure(link: &Link, spec: WindowSpec) -> Result<Measured, String> {
    let sampler = link.probe.clone().map(Sampler::start);
    let result = run_window(spec).await;
    let usage = sampler.map(Sampler::finish).unwrap_or_default();
    let result = result?;
    // An in-process broker's CPU is inside this process's: the client's is what remains.
    let client_cpu_ns = match (link.in_process, usage.cpu_ns) {
        (true, Some(broker)) => result.process_cpu_ns.saturating_sub(broker),
        _ => result.process_cpu_ns,
    };
    Ok(Measured {
        result,
        usage,
        client_cpu_ns,
    })
}

/// What a broker says about itself over MQTT: the retained `$SYS/broker/version`, when it
/// publishes one (Mosquitto and mochi-mqtt do; RabbitMQ does not). A broker that refuses the
/// connection is an error; one that refuses or drops the `$SYS` subscription publishes none.
pub async fn sys_version(
    endpoint: &Endpoint,
    client_id: &str,
) -> Result<Option<String>, ConnError> {
    let mut conn = Conn::connect(endpoint, client_id).await?;
    let version = read_sys_version(&mut conn, endpoint).await.unwrap_or(None);
    conn.disconnect().await;
    Ok(version)
}

async fn read_sys_version(
    conn: &mut Conn,
    endpoint: &Endpoint,
) -> Result<Option<String>, ConnError> {
    conn.subscribe("$SYS/broker/version", 0, endpoint.handshake_timeout)
        .await?;
    let deadline = Instant::now() + SYS_WAIT;
    while let Ok(filled) = tokio::time::timeout_at(deadline.into(), conn.fill()).await {
        filled?;
        while let Some(frame) = conn.next_frame()? {
            if frame.kind != kind::PUBLISH {
                continue;
            }
            if let Ok(publish) = codec::decode_publish(conn.body(&frame), frame.qos())
                && publish.topic == b"$SYS/broker/version"
            {
                return Ok(Some(
                    String::from_utf8_lossy(publish.payload).trim().to_owned(),
                ));
            }
        }
    }
    Ok(None)
}

/// Sends one message of the run's payload size at QoS 1 through the broker and checks it comes
/// back intact: proof that the broker routes, acknowledges and accepts payloads this large,
/// before any clock starts.
pub async fn verify_round_trip(
    endpoint: &Endpoint,
    topic: &str,
    payload_bytes: usize,
    client_prefix: &str,
) -> Result<(), String> {
    let too_large = |e: ConnError| {
        format!(
            "{e} after being sent a {payload_bytes}-byte message; does the broker accept payloads this large? (Mosquitto: max_packet_size / message_size_limit)"
        )
    };
    let mut sub = Conn::connect(endpoint, &format!("{client_prefix}-verify-s"))
        .await
        .map_err(|e| e.to_string())?;
    sub.subscribe(topic, 1, endpoint.handshake_timeout)
        .await
        .map_err(|e| e.to_string())?;
    let mut publisher = Conn::connect(endpoint, &format!("{client_prefix}-verify-p"))
        .await
        .map_err(|e| e.to_string())?;
    let mut payload = vec![0x5a; payload_bytes];
    stamp(&mut payload, 0, 0, u32::MAX);
    codec::encode_publish_header(&mut publisher.wbuf, topic.as_bytes(), 1, 1, payload.len());
    publisher.wbuf.extend_from_slice(&payload);
    publisher.flush().await.map_err(too_large)?;
    let ack = wait_for(&mut publisher, kind::PUBACK)
        .await
        .map_err(too_large)?;
    if ack.is_none() {
        return Err(format!(
            "{} did not acknowledge a QoS 1 message within {HANDSHAKE_TIMEOUT:?}",
            endpoint.addr
        ));
    }
    let delivered = wait_for(&mut sub, kind::PUBLISH).await.map_err(too_large)?;
    let intact = delivered.is_some_and(|body| {
        codec::decode_publish(&body, 1).is_ok_and(|p| {
            p.payload == payload.as_slice() && read_stamp(p.payload) == Some((0, 0, u32::MAX))
        })
    });
    publisher.disconnect().await;
    sub.disconnect().await;
    if !intact {
        return Err(format!(
            "{} did not deliver a {payload_bytes}-byte QoS 1 test message intact to its subscriber",
            endpoint.addr
        ));
    }
    Ok(())
}

/// Waits for a packet of `wanted` kind (answering a QoS 1 delivery with its PUBACK) and
/// returns its body.
async fn wait_for(conn: &mut Conn, wanted: u8) -> Result<Option<Vec<u8>>, ConnError> {
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        while let Some(frame) = conn.next_frame()? {
            if frame.kind == kind::PUBLISH && frame.qos() == 1 {
                let id = codec::decode_publish(conn.body(&frame), 1).map_or(0, |p| p.packet_id);
                codec::encode_ack(&mut conn.wbuf, kind::PUBACK, id);
                conn.flush().await?;
            }
            if frame.kind == wanted {
                return Ok(Some(conn.body(&frame).to_vec()));
            }
        }
        match tokio::time::timeout_at(deadline.into(), conn.fill()).await {
            Ok(filled) => filled?,
            Err(_) => return Ok(None),
        }
    }
}
