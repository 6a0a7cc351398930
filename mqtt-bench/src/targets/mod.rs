//! The brokers mqtt-bench measures, one file each: the embedded broker it starts itself, and
//! any broker reachable at `mqtt://` (with what a Mosquitto process tells about its settings).
//! A target knows how to reach, describe and observe its broker; it never knows which scenario
//! runs against it. Adding a broker family is adding a file here and one line in [`identify`].

pub mod embedded;
pub mod mosquitto;
pub mod remote;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::options::TargetSpec;
use common::results::SystemInfo;

use crate::message::{read_stamp, stamp};
use crate::options::BrokerPid;
use crate::protocol::codec::{self, kind};
use crate::protocol::conn::{Conn, ConnError, Endpoint};
use crate::resources::Probe;

/// How long connecting, subscribing and the verification round trip may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest packet mqtt-bench accepts from a broker.
pub const MAX_PACKET_BYTES: usize = codec::MAX_REMAINING_LEN;
/// Keep-alive announced in every CONNECT; quiet clients ping at half of it.
pub const KEEP_ALIVE_S: u16 = 60;
/// How long to wait for a retained `$SYS/broker/version`.
const SYS_WAIT: Duration = Duration::from_millis(1500);

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("`{url}` is not a broker mqtt-bench can reach: {message}")]
    Url { url: String, message: String },
    #[error("the embedded broker did not start: {0}")]
    Embedded(String),
    #[error(transparent)]
    Conn(#[from] ConnError),
    #[error("{0}")]
    Other(String),
}

/// One broker as the run sees it: how to reach it, what it said about itself, and how to
/// observe its CPU and memory.
pub struct Broker {
    pub endpoint: Endpoint,
    pub info: SystemInfo,
    pub probe: Option<Probe>,
    /// Whether the broker runs inside this process (its CPU then comes out of the client's).
    pub embedded: bool,
    /// Keeps an embedded broker running for as long as the run needs it.
    pub _guard: Option<embedded::EmbeddedBroker>,
}

/// Starts (embedded) or reaches (`mqtt://`) the broker `spec` names.
pub async fn open(spec: &TargetSpec, pid: Option<&BrokerPid>) -> Result<Broker, TargetError> {
    match spec.scheme() {
        "embedded" => embedded::open(spec).await,
        "mqtt" | "tcp" => remote::open(spec, pid).await,
        other => Err(TargetError::Url {
            url: spec.url_redacted(),
            message: format!(
                "unknown scheme `{other}`; use mqtt://HOST:PORT (or `embedded` for the in-process broker)"
            ),
        }),
    }
}

/// The broker family a version string names, and the file that knows more about it.
pub fn identify(version: &str) -> &'static str {
    let lower = version.to_ascii_lowercase();
    if mosquitto::is_mosquitto(&lower) {
        "mosquitto"
    } else if lower.contains("mochi") {
        "mochi-mqtt"
    } else if lower.contains("rabbitmq") {
        "rabbitmq"
    } else {
        "mqtt"
    }
}

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

/// Settings as `name → value`, from pairs.
pub fn settings<const N: usize>(pairs: [(&str, String); N]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings_name_their_family() {
        assert_eq!(identify("mosquitto version 2.0.11"), "mosquitto");
        assert_eq!(identify("mochi-mqtt v2.7.9"), "mochi-mqtt");
        assert_eq!(identify("something else 1.0"), "mqtt");
    }

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("redis://127.0.0.1:6379").unwrap();
        let error = open(&spec, None).await.err().unwrap().to_string();
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("mqtt://"), "{error}");
    }
}
