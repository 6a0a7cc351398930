//! MQTT packets through rumqttc's `mqttbytes` (v4 = MQTT 3.1.1, and v5): what mqtt-bench sends,
//! encoded into a connection's write buffer, and what it receives, decoded into one
//! [`Incoming`] whichever the protocol, with the defects of rumqttc 0.25.1's v5 decoder worked
//! around (see [`read`]).

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::{self as m4, v4};
use rumqttc::v5::mqttbytes::{self as m5, v5};
use serde::{Deserialize, Serialize};

use super::reason;

/// The largest remaining length the protocol can express (four length bytes).
pub const MAX_REMAINING_LEN: usize = 268_435_455;

/// The MQTT protocol version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Protocol {
    #[serde(rename = "3.1.1")]
    V311,
    #[serde(rename = "5")]
    V5,
}

impl Protocol {
    pub fn parse(text: &str) -> Result<Protocol, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "3.1.1" | "311" | "4" | "v4" => Ok(Protocol::V311),
            "5" | "5.0" | "v5" => Ok(Protocol::V5),
            // emqtt-bench's `-V 3` is protocol level 3, MQTT 3.1 ("MQIsdp"), not 3.1.1.
            "3" | "3.1" | "v3" => {
                Err("MQTT 3.1 (protocol level 3) is not spoken; choose 3.1.1 (level 4) or 5".into())
            }
            other => Err(format!(
                "`{other}` is not an MQTT protocol version; choose 3.1.1 or 5"
            )),
        }
    }

    /// `3.1.1` or `5`, as options and reports write it.
    pub fn word(self) -> &'static str {
        match self {
            Protocol::V311 => "3.1.1",
            Protocol::V5 => "5",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MQTT {}", self.word())
    }
}

/// Why bytes from (or for) a broker could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("the broker sent a packet of {0} bytes, more than this client accepts ({1})")]
    TooLarge(usize, usize),
    #[error("the broker sent a malformed packet ({0})")]
    Malformed(String),
    #[error("a packet could not be encoded ({0})")]
    Encode(String),
}

/// What a CONNECT says about the client.
#[derive(Debug, Clone)]
pub struct ConnectFields<'a> {
    pub client_id: &'a str,
    pub username: Option<&'a str>,
    pub password: Option<&'a str>,
    pub keep_alive_s: u16,
    /// 3.1.1 clean session; 5 clean start.
    pub clean: bool,
    /// MQTT 5: how long the broker keeps the session after the connection closes.
    pub session_expiry_s: Option<u32>,
    /// MQTT 5: the largest packet this client accepts (announced to the broker).
    pub max_packet_bytes: u32,
}

fn qos4(qos: u8) -> m4::QoS {
    match qos {
        0 => m4::QoS::AtMostOnce,
        1 => m4::QoS::AtLeastOnce,
        _ => m4::QoS::ExactlyOnce,
    }
}

fn qos5(qos: u8) -> m5::QoS {
    match qos {
        0 => m5::QoS::AtMostOnce,
        1 => m5::QoS::AtLeastOnce,
        _ => m5::QoS::ExactlyOnce,
    }
}

fn encode_error(e: impl std::fmt::Display) -> CodecError {
    CodecError::Encode(e.to_string())
}

/// Appends a CONNECT. rumqttc patches the connect flags at an absolute index of the buffer,
/// so the packet is built in a buffer of its own and then appended.
pub fn encode_connect(
    out: &mut BytesMut,
    protocol: Protocol,
    fields: &ConnectFields<'_>,
) -> Result<(), CodecError> {
    let mut packet = BytesMut::new();
    let user = fields.username.unwrap_or("");
    let password = fields.password.unwrap_or("");
    match protocol {
        Protocol::V311 => {
            let mut connect = v4::Connect::new(fields.client_id);
            connect.keep_alive = fields.keep_alive_s;
            connect.clean_session = fields.clean;
            if fields.username.is_some() || fields.password.is_some() {
                connect.set_login(user, password);
            }
            connect.write(&mut packet).map_err(encode_error)?;
        }
        Protocol::V5 => {
            let mut properties = v5::ConnectProperties::new();
            properties.session_expiry_interval = fields.session_expiry_s;
            properties.max_packet_size = Some(fields.max_packet_bytes);
            let connect = v5::Connect {
                keep_alive: fields.keep_alive_s,
                client_id: fields.client_id.to_owned(),
                clean_start: fields.clean,
                properties: Some(properties),
            };
            let login = (fields.username.is_some() || fields.password.is_some())
                .then(|| v5::Login::new(user, password));
            connect
                .write(&None, &login, &mut packet)
                .map_err(encode_error)?;
        }
    }
    out.extend_from_slice(&packet);
    Ok(())
}

/// Appends a SUBSCRIBE of `filters` (each with its QoS) under packet id `pkid`.
pub fn encode_subscribe(
    out: &mut BytesMut,
    protocol: Protocol,
    pkid: u16,
    filters: &[(&str, u8)],
) -> Result<(), CodecError> {
    match protocol {
        Protocol::V311 => {
            let mut subscribe = v4::Subscribe::new_many(
                filters
                    .iter()
                    .map(|(path, qos)| v4::SubscribeFilter::new((*path).to_owned(), qos4(*qos))),
            );
            subscribe.pkid = pkid;
            subscribe.write(out).map_err(encode_error)?;
        }
        Protocol::V5 => {
            let mut subscribe = v5::Subscribe::new_many(
                filters
                    .iter()
                    .map(|(path, qos)| v5::Filter::new(*path, qos5(*qos))),
                None,
            );
            subscribe.pkid = pkid;
            subscribe.write(out).map_err(encode_error)?;
        }
    }
    Ok(())
}

/// Appends an UNSUBSCRIBE of `filter`.
pub fn encode_unsubscribe(
    out: &mut BytesMut,
    protocol: Protocol,
    pkid: u16,
    filter: &str,
) -> Result<(), CodecError> {
    match protocol {
        Protocol::V311 => {
            let mut unsubscribe = v4::Unsubscribe::new(filter);
            unsubscribe.pkid = pkid;
            unsubscribe.write(out).map_err(encode_error)?;
        }
        Protocol::V5 => {
            let mut unsubscribe = v5::Unsubscribe::new(filter, None);
            unsubscribe.pkid = pkid;
            unsubscribe.write(out).map_err(encode_error)?;
        }
    }
    Ok(())
}

/// The four acknowledgements of a QoS 1/2 flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    PubAck,
    PubRec,
    PubRel,
    PubComp,
}

/// Appends an acknowledgement of packet id `pkid` (success; no properties). Fixed-size
/// packets cannot fail to encode, so rumqttc's `Ok(len)` is not looked at.
#[inline]
pub fn encode_ack(out: &mut BytesMut, protocol: Protocol, ack: Ack, pkid: u16) {
    match (protocol, ack) {
        (Protocol::V311, Ack::PubAck) => drop(v4::PubAck::new(pkid).write(out)),
        (Protocol::V311, Ack::PubRec) => drop(v4::PubRec::new(pkid).write(out)),
        (Protocol::V311, Ack::PubRel) => drop(v4::PubRel::new(pkid).write(out)),
        (Protocol::V311, Ack::PubComp) => drop(v4::PubComp::new(pkid).write(out)),
        (Protocol::V5, Ack::PubAck) => drop(v5::PubAck::new(pkid, None).write(out)),
        (Protocol::V5, Ack::PubRec) => drop(v5::PubRec::new(pkid, None).write(out)),
        (Protocol::V5, Ack::PubRel) => drop(v5::PubRel::new(pkid, None).write(out)),
        (Protocol::V5, Ack::PubComp) => drop(v5::PubComp::new(pkid, None).write(out)),
    }
}

pub fn encode_pingreq(out: &mut BytesMut, protocol: Protocol) {
    match protocol {
        Protocol::V311 => drop(v4::PingReq.write(out)),
        Protocol::V5 => drop(v5::PingReq::write(out)),
    }
}

/// A normal DISCONNECT (`e0 00` in both versions: rumqttc 0.25.1 mis-encodes any other v5
/// reason code, so none is ever sent).
pub fn encode_disconnect(out: &mut BytesMut, protocol: Protocol) {
    match protocol {
        Protocol::V311 => drop(v4::Disconnect.write(out)),
        Protocol::V5 => {
            drop(v5::Disconnect::new(v5::DisconnectReasonCode::NormalDisconnection).write(out))
        }
    }
}

/// A PUBLISH whose topic and payload are fixed and whose packet id and stamp change per
/// message: rumqttc encodes it, then the stamp is written into the payload's bytes inside the
/// write buffer, so sending allocates nothing.
pub struct PublishTemplate {
    packet: Template,
    payload_len: usize,
    /// MQTT 5 topic alias: the first message carries the topic and the alias, every later one
    /// the alias alone (an empty topic).
    alias: Option<u16>,
    alias_sent: bool,
    topic: Bytes,
}

enum Template {
    V4(v4::Publish),
    V5(v5::Publish),
}

impl PublishTemplate {
    pub fn new(
        protocol: Protocol,
        topic: &str,
        qos: u8,
        retain: bool,
        payload: Bytes,
        alias: Option<u16>,
    ) -> PublishTemplate {
        let payload_len = payload.len();
        let packet = match protocol {
            Protocol::V311 => {
                let mut p = v4::Publish::from_bytes(topic, qos4(qos), payload);
                p.retain = retain;
                Template::V4(p)
            }
            Protocol::V5 => {
                let mut p = v5::Publish::new(topic, qos5(qos), payload, None);
                p.retain = retain;
                Template::V5(p)
            }
        };
        PublishTemplate {
            packet,
            payload_len,
            alias: alias.filter(|_| protocol == Protocol::V5),
            alias_sent: false,
            topic: Bytes::copy_from_slice(topic.as_bytes()),
        }
    }

    /// Whether messages after the first travel under a topic alias.
    pub fn uses_alias(&self) -> bool {
        self.alias.is_some()
    }

    /// Appends one PUBLISH with packet id `pkid` (0 at QoS 0) and returns its payload as it
    /// lies in `out`, to be stamped. On an encoding error nothing is left in `out`.
    #[inline]
    pub fn encode<'b>(
        &mut self,
        out: &'b mut BytesMut,
        pkid: u16,
    ) -> Result<&'b mut [u8], CodecError> {
        let before = out.len();
        let written = match &mut self.packet {
            Template::V4(p) => {
                p.pkid = pkid;
                p.write(out).map_err(encode_error)
            }
            Template::V5(p) => {
                p.pkid = pkid;
                if let Some(alias) = self.alias {
                    if !self.alias_sent {
                        p.properties = Some(v5::PublishProperties {
                            topic_alias: Some(alias),
                            ..Default::default()
                        });
                    } else if !p.topic.is_empty() {
                        p.topic = Bytes::new();
                    }
                }
                p.write(out).map_err(encode_error)
            }
        };
        if let Err(e) = written {
            // rumqttc writes part of a packet before it finds a packet id of 0.
            out.truncate(before);
            return Err(e);
        }
        self.alias_sent = true;
        let end = out.len();
        Ok(&mut out[end - self.payload_len..])
    }

    /// The topic the template publishes on.
    pub fn topic(&self) -> &[u8] {
        &self.topic
    }
}

/// What a CONNACK said, in either protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnAckInfo {
    pub session_present: bool,
    /// The return code (3.1.1: 0–5) or reason code (5: 0 or ≥ 0x80).
    pub code: u8,
    /// A broker asked for MQTT 5 answered with a 3.1.1 CONNACK (it does not speak 5).
    pub answered_311: bool,
    pub receive_max: Option<u16>,
    pub topic_alias_max: Option<u16>,
    pub max_qos: Option<u8>,
    pub retain_available: Option<bool>,
    pub shared_subscription_available: Option<bool>,
    pub wildcard_subscription_available: Option<bool>,
    pub max_packet_size: Option<u32>,
    pub server_keep_alive: Option<u16>,
    pub reason_string: Option<String>,
}

impl ConnAckInfo {
    pub fn accepted(&self) -> bool {
        self.code == 0 && !self.answered_311
    }

    /// Why the CONNECT was refused, as a sentence fragment.
    pub fn refusal(&self, protocol: Protocol) -> String {
        if self.answered_311 {
            return format!(
                "it answered an MQTT 5 CONNECT with an MQTT 3.1.1 CONNACK, return code {} ({}): it does not speak MQTT 5",
                self.code,
                reason::connack_311(self.code)
            );
        }
        let name = match protocol {
            Protocol::V311 => reason::connack_311(self.code),
            Protocol::V5 => reason::name(self.code),
        };
        let detail = self
            .reason_string
            .as_deref()
            .map_or(String::new(), |r| format!(": {r}"));
        format!("{name} (reason code 0x{:02x}){detail}", self.code)
    }
}

/// A delivered PUBLISH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub qos: u8,
    pub pkid: u16,
    pub retain: bool,
    pub dup: bool,
    pub topic: Bytes,
    pub payload: Bytes,
}

/// One packet from the broker, whichever the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    ConnAck(Box<ConnAckInfo>),
    Publish(Delivered),
    /// PUBACK, PUBREC or PUBCOMP with its reason code (0 in 3.1.1).
    Ack {
        ack: Ack,
        pkid: u16,
        code: u8,
    },
    PubRel {
        pkid: u16,
    },
    SubAck {
        pkid: u16,
        codes: Vec<u8>,
    },
    UnsubAck {
        pkid: u16,
    },
    PingResp,
    /// A DISCONNECT from the broker (MQTT 5) with its reason code.
    Disconnect {
        code: u8,
    },
    /// A packet a client never expects (CONNECT, SUBSCRIBE, PINGREQ, AUTH …), by type.
    Unexpected {
        kind: u8,
    },
}

impl Incoming {
    /// The packet's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Incoming::ConnAck(_) => "CONNACK",
            Incoming::Publish(_) => "PUBLISH",
            Incoming::Ack {
                ack: Ack::PubAck, ..
            } => "PUBACK",
            Incoming::Ack {
                ack: Ack::PubRec, ..
            } => "PUBREC",
            Incoming::Ack {
                ack: Ack::PubComp, ..
            } => "PUBCOMP",
            Incoming::Ack {
                ack: Ack::PubRel, ..
            }
            | Incoming::PubRel { .. } => "PUBREL",
            Incoming::SubAck { .. } => "SUBACK",
            Incoming::UnsubAck { .. } => "UNSUBACK",
            Incoming::PingResp => "PINGRESP",
            Incoming::Disconnect { .. } => "DISCONNECT",
            Incoming::Unexpected { .. } => "unexpected",
        }
    }
}

/// Takes the next whole packet off the front of `buf`: `Ok(None)` (nothing consumed) until it
/// has arrived in full. `needed` is set to how many more bytes are missing.
///
/// rumqttc 0.25.1's v5 decoder misreads three packets brokers do send, each after consuming
/// the frame: the bare DISCONNECT `e0 00` (`PayloadRequired`, upstream PR bytebeamio/rumqtt#1068),
/// a DISCONNECT with a reason and no properties (`e0 01 8e`, Mosquitto's "session taken over")
/// and the 3.1.1 CONNACK a 3.1.1-only broker answers an MQTT 5 CONNECT with (`20 02 00 01`),
/// both as `InsufficientBytes`, which a reader would take for "wait for more" and hang. Whole
/// frames are checked first, those three are decoded here, and an `InsufficientBytes` on a
/// whole frame is a malformed packet.
#[inline]
pub fn read(
    buf: &mut BytesMut,
    protocol: Protocol,
    max_packet_bytes: usize,
    needed: &mut usize,
) -> Result<Option<Incoming>, CodecError> {
    match protocol {
        Protocol::V311 => read_v4(buf, max_packet_bytes, needed),
        Protocol::V5 => read_v5(buf, max_packet_bytes, needed),
    }
}

fn read_v4(
    buf: &mut BytesMut,
    max: usize,
    needed: &mut usize,
) -> Result<Option<Incoming>, CodecError> {
    match m4::check(buf.iter(), max) {
        Ok(_) => {}
        Err(m4::Error::InsufficientBytes(n)) => {
            *needed = n;
            return Ok(None);
        }
        Err(m4::Error::PayloadSizeLimitExceeded(len)) => {
            return Err(CodecError::TooLarge(len, max));
        }
        Err(e) => return Err(CodecError::Malformed(e.to_string())),
    }
    *needed = 0;
    let packet = v4::Packet::read(buf, max).map_err(|e| CodecError::Malformed(e.to_string()))?;
    Ok(Some(match packet {
        v4::Packet::Publish(p) => Incoming::Publish(Delivered {
            qos: p.qos as u8,
            pkid: p.pkid,
            retain: p.retain,
            dup: p.dup,
            topic: Bytes::from(p.topic),
            payload: p.payload,
        }),
        v4::Packet::PubAck(a) => ack(Ack::PubAck, a.pkid, 0),
        v4::Packet::PubRec(a) => ack(Ack::PubRec, a.pkid, 0),
        v4::Packet::PubComp(a) => ack(Ack::PubComp, a.pkid, 0),
        v4::Packet::PubRel(a) => Incoming::PubRel { pkid: a.pkid },
        v4::Packet::ConnAck(c) => Incoming::ConnAck(Box::new(ConnAckInfo {
            session_present: c.session_present,
            code: connack_code_v4(c.code),
            ..ConnAckInfo::default()
        })),
        v4::Packet::SubAck(s) => Incoming::SubAck {
            pkid: s.pkid,
            codes: s
                .return_codes
                .iter()
                .map(|c| match c {
                    v4::SubscribeReasonCode::Success(q) => *q as u8,
                    v4::SubscribeReasonCode::Failure => 0x80,
                })
                .collect(),
        },
        v4::Packet::UnsubAck(u) => Incoming::UnsubAck { pkid: u.pkid },
        v4::Packet::PingResp => Incoming::PingResp,
        v4::Packet::Disconnect => Incoming::Disconnect { code: 0 },
        v4::Packet::Connect(_) => Incoming::Unexpected { kind: 1 },
        v4::Packet::Subscribe(_) => Incoming::Unexpected { kind: 8 },
        v4::Packet::Unsubscribe(_) => Incoming::Unexpected { kind: 10 },
        v4::Packet::PingReq => Incoming::Unexpected { kind: 12 },
    }))
}

#[inline]
fn ack(ack: Ack, pkid: u16, code: u8) -> Incoming {
    Incoming::Ack { ack, pkid, code }
}

fn read_v5(
    buf: &mut BytesMut,
    max: usize,
    needed: &mut usize,
) -> Result<Option<Incoming>, CodecError> {
    let limit = u32::try_from(max).unwrap_or(u32::MAX);
    let header = match v5::check(buf.iter(), Some(limit)) {
        Ok(header) => header,
        Err(m5::Error::InsufficientBytes(n)) => {
            *needed = n;
            return Ok(None);
        }
        Err(m5::Error::PayloadSizeLimitExceeded { pkt_size, .. }) => {
            return Err(CodecError::TooLarge(pkt_size, max));
        }
        Err(e) => return Err(CodecError::Malformed(e.to_string())),
    };
    *needed = 0;
    match (buf[0], header.frame_length()) {
        (0xe0, 2) => {
            let _ = buf.split_to(2);
            return Ok(Some(Incoming::Disconnect { code: 0 }));
        }
        (0xe0, 3) => {
            let frame = buf.split_to(3);
            return Ok(Some(Incoming::Disconnect { code: frame[2] }));
        }
        (0x20, 4) => {
            let frame = buf.split_to(4);
            return Ok(Some(Incoming::ConnAck(Box::new(ConnAckInfo {
                session_present: frame[2] & 1 == 1,
                code: frame[3],
                answered_311: true,
                ..ConnAckInfo::default()
            }))));
        }
        _ => {}
    }
    let packet = match v5::Packet::read(buf, Some(limit)) {
        Ok(packet) => packet,
        Err(m5::Error::InsufficientBytes(_)) => {
            return Err(CodecError::Malformed(
                "a packet shorter than its fields".into(),
            ));
        }
        Err(e) => return Err(CodecError::Malformed(e.to_string())),
    };
    Ok(Some(from_v5(packet)))
}

fn from_v5(packet: v5::Packet) -> Incoming {
    match packet {
        v5::Packet::Publish(p) => Incoming::Publish(Delivered {
            qos: p.qos as u8,
            pkid: p.pkid,
            retain: p.retain,
            dup: p.dup,
            topic: p.topic,
            payload: p.payload,
        }),
        v5::Packet::PubAck(a) => ack(Ack::PubAck, a.pkid, reason::puback(a.reason)),
        v5::Packet::PubRec(a) => ack(Ack::PubRec, a.pkid, reason::pubrec(a.reason)),
        v5::Packet::PubComp(a) => ack(Ack::PubComp, a.pkid, reason::pubcomp(a.reason)),
        v5::Packet::PubRel(a) => Incoming::PubRel { pkid: a.pkid },
        v5::Packet::ConnAck(c) => Incoming::ConnAck(Box::new(connack_v5(c))),
        v5::Packet::SubAck(s) => Incoming::SubAck {
            pkid: s.pkid,
            codes: s.return_codes.iter().map(|c| reason::suback(*c)).collect(),
        },
        v5::Packet::UnsubAck(u) => Incoming::UnsubAck { pkid: u.pkid },
        v5::Packet::PingResp(_) => Incoming::PingResp,
        v5::Packet::Disconnect(d) => Incoming::Disconnect {
            code: d.reason_code as u8,
        },
        v5::Packet::Connect(..) => Incoming::Unexpected { kind: 1 },
        v5::Packet::Subscribe(_) => Incoming::Unexpected { kind: 8 },
        v5::Packet::Unsubscribe(_) => Incoming::Unexpected { kind: 10 },
        v5::Packet::PingReq(_) => Incoming::Unexpected { kind: 12 },
        v5::Packet::Auth(_) => Incoming::Unexpected { kind: 15 },
    }
}

fn connack_v5(c: v5::ConnAck) -> ConnAckInfo {
    let flag = |v: Option<u8>| v.map(|v| v != 0);
    let p = c.properties.unwrap_or_else(|| v5::ConnAckProperties {
        session_expiry_interval: None,
        receive_max: None,
        max_qos: None,
        retain_available: None,
        max_packet_size: None,
        assigned_client_identifier: None,
        topic_alias_max: None,
        reason_string: None,
        user_properties: Vec::new(),
        wildcard_subscription_available: None,
        subscription_identifiers_available: None,
        shared_subscription_available: None,
        server_keep_alive: None,
        response_information: None,
        server_reference: None,
        authentication_method: None,
        authentication_data: None,
    });
    ConnAckInfo {
        session_present: c.session_present,
        code: reason::connack_v5(c.code),
        answered_311: false,
        receive_max: p.receive_max,
        topic_alias_max: p.topic_alias_max,
        max_qos: p.max_qos,
        retain_available: flag(p.retain_available),
        shared_subscription_available: flag(p.shared_subscription_available),
        wildcard_subscription_available: flag(p.wildcard_subscription_available),
        max_packet_size: p.max_packet_size,
        server_keep_alive: p.server_keep_alive,
        reason_string: p.reason_string,
    }
}

fn connack_code_v4(code: v4::ConnectReturnCode) -> u8 {
    use v4::ConnectReturnCode as C;
    match code {
        C::Success => 0,
        C::RefusedProtocolVersion => 1,
        C::BadClientId => 2,
        C::ServiceUnavailable => 3,
        C::BadUserNamePassword => 4,
        C::NotAuthorized => 5,
    }
}

#[cfg(test)]
mod tests;
