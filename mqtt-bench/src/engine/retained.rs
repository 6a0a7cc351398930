//! Retained messages: R messages published retained, one per topic, and acknowledged before
//! any clock starts; then a subscriber that connected beforehand subscribes to all of them at
//! once, and the window is its SUBSCRIBE until the last retained message arrives. Afterwards
//! every topic's retained message is cleared (an empty retained payload), so the broker keeps
//! nothing of the run.

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::recorder::Recorder;

use super::lanes::{LaneClock, LaneUsage};
use crate::message::{Delivery, Ledger, Stamp, read_stamp, stamp};
use crate::protocol::codec::{self, Ack, Incoming, PublishTemplate};
use crate::protocol::conn::{Conn, ConnError, ConnectOptions, Endpoint};

/// One retained window.
#[derive(Debug, Clone)]
pub struct RetainedSpec {
    pub endpoint: Endpoint,
    /// One topic per retained message.
    pub topics: Vec<String>,
    /// What the subscriber subscribes to (`…/retained/#`).
    pub filter: String,
    pub qos: u8,
    pub inflight: usize,
    pub payload: Bytes,
    pub window_id: u32,
    pub client_prefix: String,
    pub epoch: Instant,
    /// Longest the publishing, the delivery and the clearing may each take.
    pub ceiling: Duration,
}

/// What a retained window measured.
#[derive(Debug, Clone)]
pub struct RetainedResult {
    pub published: u64,
    pub delivery: Delivery,
    /// From the SUBSCRIBE to each retained message's arrival.
    pub recorder: Recorder,
    /// From the SUBSCRIBE to the last retained message.
    pub elapsed: Duration,
    /// Deliveries that came without the retain flag (a broker must set it).
    pub without_retain_flag: u64,
    pub lanes: LaneUsage,
    pub error: Option<String>,
    /// Whether the retained messages were cleared afterwards.
    pub cleared: bool,
}

impl RetainedResult {
    pub fn delivered_per_s(&self) -> f64 {
        self.delivery.distinct as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Publishes, measures the new subscriber, clears. An `Err` is a window that could not start.
pub async fn run(spec: RetainedSpec) -> Result<RetainedResult, ConnError> {
    let lanes = common::lanes::Lanes::shared();
    let (p_id, s_id) = (
        format!("{}-p0", spec.client_prefix),
        format!("{}-s0", spec.client_prefix),
    );
    let setup = spec.clone();
    let (mut publisher, mut subscriber, inflight) = lanes
        .spawn(0, async move {
            let (mut publisher, handshake) =
                Conn::connect(&setup.endpoint, &ConnectOptions::clean(&p_id, 0)).await?;
            // MQTT 5: never more in flight than the broker's receive maximum (HiveMQ's is 10
            // and it disconnects a client that sends more).
            let inflight = handshake
                .connack
                .receive_max
                .map_or(setup.inflight, |max| setup.inflight.min(usize::from(max)));
            let messages: Vec<(String, Bytes)> = setup
                .topics
                .iter()
                .enumerate()
                .map(|(seq, topic)| {
                    let mut payload = setup.payload.to_vec();
                    stamp(
                        &mut payload,
                        Stamp {
                            seq: seq as u64,
                            sent_ns: 0,
                            window: setup.window_id,
                            publisher: 0,
                        },
                    );
                    (topic.clone(), Bytes::from(payload))
                })
                .collect();
            publish_all(&mut publisher, messages, setup.qos, inflight, setup.ceiling).await?;
            let (subscriber, _) =
                Conn::connect(&setup.endpoint, &ConnectOptions::clean(&s_id, 1)).await?;
            Ok::<(Conn, Conn, usize), ConnError>((publisher, subscriber, inflight))
        })
        .await
        .map_err(|e| task_failed(&e))??;
    let measured = spec.clone();
    let (result, subscriber_back) = lanes
        .spawn(1, async move {
            let clock = LaneClock::start().await;
            let opened = Instant::now();
            let result = receive(&mut subscriber, &measured).await;
            let usage = clock.finish(opened).await;
            (
                result.map(|mut r| {
                    r.lanes = usage;
                    r
                }),
                subscriber,
            )
        })
        .await
        .map_err(|e| task_failed(&e))?;
    subscriber_back.disconnect().await;
    let mut result = result?;
    let empty = spec
        .topics
        .iter()
        .map(|t| (t.clone(), Bytes::new()))
        .collect();
    result.cleared = publish_all(&mut publisher, empty, 1, inflight, spec.ceiling)
        .await
        .is_ok();
    publisher.disconnect().await;
    Ok(result)
}

fn task_failed(e: &tokio::task::JoinError) -> ConnError {
    ConnError::Unexpected {
        addr: "mqtt-bench".into(),
        what: format!("failure: a retained-scenario task failed ({e})"),
    }
}

/// The measured part: SUBSCRIBE, then every retained message until all have come.
async fn receive(conn: &mut Conn, spec: &RetainedSpec) -> Result<RetainedResult, ConnError> {
    let protocol = conn.protocol();
    let want = spec.topics.len() as u64;
    let mut ledger = Ledger::with_capacity(want);
    let mut recorder = Recorder::new(false);
    let mut without_flag = 0;
    let pkid = conn.packet_id();
    codec::encode_subscribe(&mut conn.wbuf, protocol, pkid, &[(&spec.filter, spec.qos)]).map_err(
        |source| ConnError::Codec {
            addr: conn.addr().into(),
            source,
        },
    )?;
    let opened = Instant::now();
    conn.flush().await?;
    let deadline = opened + spec.ceiling;
    let mut last = opened;
    let mut error = None;
    while ledger.distinct < want {
        match tokio::time::timeout_at(deadline.into(), conn.fill()).await {
            Err(_) => {
                error = Some(format!(
                    "{} of {want} retained messages arrived within {:?}",
                    ledger.distinct, spec.ceiling
                ));
                break;
            }
            Ok(filled) => filled?,
        }
        let now = Instant::now();
        while let Some(packet) = conn.next_packet()? {
            match packet {
                Incoming::Publish(p) => {
                    match read_stamp(&p.payload) {
                        Some(s) if s.window == spec.window_id => {
                            if ledger.record(s.seq) {
                                let latency = now - opened;
                                recorder.record_ok(latency, latency);
                                last = now;
                            }
                        }
                        _ => ledger.stray(),
                    }
                    without_flag += u64::from(!p.retain);
                    match p.qos {
                        1 => codec::encode_ack(&mut conn.wbuf, protocol, Ack::PubAck, p.pkid),
                        2 => codec::encode_ack(&mut conn.wbuf, protocol, Ack::PubRec, p.pkid),
                        _ => {}
                    }
                }
                Incoming::PubRel { pkid } => {
                    codec::encode_ack(&mut conn.wbuf, protocol, Ack::PubComp, pkid);
                }
                Incoming::SubAck { codes, .. } => {
                    if let Some(&code) = codes.first().filter(|c| **c >= 0x80) {
                        return Err(ConnError::SubscribeRefused {
                            addr: conn.addr().into(),
                            filter: spec.filter.clone(),
                            code,
                            reason: crate::protocol::reason::describe(code),
                        });
                    }
                }
                Incoming::PingResp => {}
                Incoming::Disconnect { code } => return Err(conn.disconnected(code)),
                other => return Err(conn.unexpected(&format!("{} packet", other.name()))),
            }
        }
        conn.flush().await?;
    }
    Ok(RetainedResult {
        published: want,
        delivery: ledger.settle(want),
        recorder,
        elapsed: last - opened,
        without_retain_flag: without_flag,
        lanes: LaneUsage::default(),
        error,
        cleared: false,
    })
}

/// Publishes every message (retained) and waits until each is acknowledged (QoS 1/2) or, at
/// QoS 0, until a PINGRESP shows the broker has read them all.
pub async fn publish_all(
    conn: &mut Conn,
    messages: Vec<(String, Bytes)>,
    qos: u8,
    inflight: usize,
    ceiling: Duration,
) -> Result<(), ConnError> {
    let protocol = conn.protocol();
    let deadline = Instant::now() + ceiling;
    let mut free: Vec<u16> = (1..=inflight.clamp(1, 65_535) as u16).rev().collect();
    let capacity = free.len();
    let mut messages = messages.into_iter().peekable();
    let mut pinged = false;
    loop {
        while messages.peek().is_some() && (qos == 0 || !free.is_empty()) {
            let (topic, payload) = messages.next().expect("peeked");
            let pkid = if qos == 0 {
                0
            } else {
                free.pop().expect("checked")
            };
            let mut template = PublishTemplate::new(protocol, &topic, qos, true, payload, None);
            if let Err(source) = template.encode(&mut conn.wbuf, pkid) {
                return Err(conn.codec_error(source));
            }
        }
        let done_sending = messages.peek().is_none();
        if done_sending && qos == 0 && !pinged {
            codec::encode_pingreq(&mut conn.wbuf, protocol);
            pinged = true;
        }
        conn.flush().await?;
        if done_sending && qos > 0 && free.len() == capacity {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline.into(), conn.fill()).await {
            Err(_) => {
                return Err(ConnError::Silent {
                    addr: conn.addr().into(),
                    waited: ceiling,
                    what: "acknowledgements of the retained messages",
                });
            }
            Ok(filled) => filled?,
        }
        while let Some(packet) = conn.next_packet()? {
            match packet {
                Incoming::Ack { code, .. } if code >= 0x80 => {
                    return Err(ConnError::Unsupported {
                        addr: conn.addr().into(),
                        what: "retained messages",
                        detail: format!(
                            "it refused one with {}",
                            crate::protocol::reason::describe(code)
                        ),
                    });
                }
                Incoming::Ack {
                    ack: Ack::PubRec,
                    pkid,
                    ..
                } => codec::encode_ack(&mut conn.wbuf, protocol, Ack::PubRel, pkid),
                Incoming::Ack { pkid, .. } => free.push(pkid),
                Incoming::PingResp if pinged => return Ok(()),
                Incoming::PingResp => {}
                Incoming::Disconnect { code } => return Err(conn.disconnected(code)),
                other => return Err(conn.unexpected(&format!("{} packet", other.name()))),
            }
        }
    }
}
