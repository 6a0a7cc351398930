//! MQTT 3.1.1 wire format: the packets mqtt-bench sends, encoded straight into a write buffer,
//! and a frame splitter that finds whole packets in a read buffer without copying them.

use std::ops::Range;

/// Control packet types (the high nibble of the first byte).
pub mod kind {
    pub const CONNECT: u8 = 1;
    pub const CONNACK: u8 = 2;
    pub const PUBLISH: u8 = 3;
    pub const PUBACK: u8 = 4;
    pub const PUBREC: u8 = 5;
    pub const PUBREL: u8 = 6;
    pub const PUBCOMP: u8 = 7;
    pub const SUBSCRIBE: u8 = 8;
    pub const SUBACK: u8 = 9;
    pub const UNSUBSCRIBE: u8 = 10;
    pub const UNSUBACK: u8 = 11;
    pub const PINGREQ: u8 = 12;
    pub const PINGRESP: u8 = 13;
    pub const DISCONNECT: u8 = 14;
}

/// The largest remaining length the protocol can express (four length bytes).
pub const MAX_REMAINING_LEN: usize = 268_435_455;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("the broker sent a malformed remaining length")]
    BadLength,
    #[error("the broker sent a packet of {0} bytes, more than this client accepts ({1})")]
    TooLarge(usize, usize),
    #[error("the broker sent a malformed {0} packet")]
    Malformed(&'static str),
}

/// One whole packet found in a read buffer: its type, flags and where its body lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    /// The bytes after the fixed header, as a range of the buffer that was split.
    pub body: Range<usize>,
}

impl Frame {
    /// The QoS of a PUBLISH (bits 2–1 of its flags).
    pub fn qos(&self) -> u8 {
        (self.flags >> 1) & 0b11
    }

    /// Total bytes of the packet, fixed header included.
    pub fn end(&self) -> usize {
        self.body.end
    }
}

/// Finds the packet that starts at `buf[0]`. `Ok(None)` when more bytes are needed.
#[inline]
pub fn split_frame(buf: &[u8], max_packet_bytes: usize) -> Result<Option<Frame>, CodecError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let mut len: usize = 0;
    let mut shift = 0;
    let mut at = 1;
    loop {
        let Some(&byte) = buf.get(at) else {
            return Ok(None);
        };
        len |= usize::from(byte & 0x7f) << shift;
        at += 1;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 21 {
            return Err(CodecError::BadLength);
        }
    }
    if len > max_packet_bytes {
        return Err(CodecError::TooLarge(len, max_packet_bytes));
    }
    if buf.len() < at + len {
        return Ok(None);
    }
    Ok(Some(Frame {
        kind: buf[0] >> 4,
        flags: buf[0] & 0x0f,
        body: at..at + len,
    }))
}

/// Appends the variable-length remaining-length field.
#[inline]
fn put_len(out: &mut Vec<u8>, mut len: usize) {
    loop {
        let mut byte = (len % 128) as u8;
        len /= 128;
        if len > 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if len == 0 {
            break;
        }
    }
}

#[inline]
fn put_str(out: &mut Vec<u8>, text: &[u8]) {
    out.extend_from_slice(&(text.len() as u16).to_be_bytes());
    out.extend_from_slice(text);
}

/// What a CONNECT says about the client.
#[derive(Debug, Clone)]
pub struct ConnectOptions<'a> {
    pub client_id: &'a str,
    pub username: Option<&'a str>,
    pub password: Option<&'a str>,
    pub keep_alive_s: u16,
    pub clean_session: bool,
}

pub fn encode_connect(out: &mut Vec<u8>, options: &ConnectOptions<'_>) {
    let mut flags = 0u8;
    if options.clean_session {
        flags |= 0b0000_0010;
    }
    let mut remaining = 10 + 2 + options.client_id.len();
    if let Some(user) = options.username {
        flags |= 0b1000_0000;
        remaining += 2 + user.len();
    }
    if let Some(password) = options.password {
        flags |= 0b0100_0000;
        remaining += 2 + password.len();
    }
    out.push(kind::CONNECT << 4);
    put_len(out, remaining);
    put_str(out, b"MQTT");
    out.push(4); // protocol level 3.1.1
    out.push(flags);
    out.extend_from_slice(&options.keep_alive_s.to_be_bytes());
    put_str(out, options.client_id.as_bytes());
    if let Some(user) = options.username {
        put_str(out, user.as_bytes());
    }
    if let Some(password) = options.password {
        put_str(out, password.as_bytes());
    }
}

/// The bytes a PUBLISH adds before its payload and after its first byte, for sizing checks.
pub fn publish_overhead(topic_len: usize, qos: u8) -> usize {
    2 + topic_len + if qos > 0 { 2 } else { 0 }
}

/// Appends a PUBLISH header (everything up to the payload); the caller appends the payload.
#[inline]
pub fn encode_publish_header(
    out: &mut Vec<u8>,
    topic: &[u8],
    qos: u8,
    packet_id: u16,
    payload_len: usize,
) {
    out.push((kind::PUBLISH << 4) | (qos << 1));
    put_len(out, publish_overhead(topic.len(), qos) + payload_len);
    put_str(out, topic);
    if qos > 0 {
        out.extend_from_slice(&packet_id.to_be_bytes());
    }
}

/// PUBACK, PUBREC, PUBREL or PUBCOMP: the four two-byte acknowledgements.
#[inline]
pub fn encode_ack(out: &mut Vec<u8>, ack_kind: u8, packet_id: u16) {
    // PUBREL is the one acknowledgement whose reserved flags must be 0b0010.
    let flags = if ack_kind == kind::PUBREL { 0b0010 } else { 0 };
    out.push((ack_kind << 4) | flags);
    out.push(2);
    out.extend_from_slice(&packet_id.to_be_bytes());
}

pub fn encode_subscribe(out: &mut Vec<u8>, packet_id: u16, filter: &str, qos: u8) {
    out.push((kind::SUBSCRIBE << 4) | 0b0010);
    put_len(out, 2 + 2 + filter.len() + 1);
    out.extend_from_slice(&packet_id.to_be_bytes());
    put_str(out, filter.as_bytes());
    out.push(qos);
}

pub fn encode_unsubscribe(out: &mut Vec<u8>, packet_id: u16, filter: &str) {
    out.push((kind::UNSUBSCRIBE << 4) | 0b0010);
    put_len(out, 2 + 2 + filter.len());
    out.extend_from_slice(&packet_id.to_be_bytes());
    put_str(out, filter.as_bytes());
}

pub fn encode_pingreq(out: &mut Vec<u8>) {
    out.extend_from_slice(&[kind::PINGREQ << 4, 0]);
}

pub fn encode_disconnect(out: &mut Vec<u8>) {
    out.extend_from_slice(&[kind::DISCONNECT << 4, 0]);
}

/// The packet identifier at the start of an acknowledgement's or SUBACK's body.
#[inline]
pub fn packet_id(body: &[u8], what: &'static str) -> Result<u16, CodecError> {
    match body {
        [hi, lo, ..] => Ok(u16::from_be_bytes([*hi, *lo])),
        _ => Err(CodecError::Malformed(what)),
    }
}

/// A received PUBLISH's topic, packet identifier (0 at QoS 0) and payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Publish<'a> {
    pub topic: &'a [u8],
    pub packet_id: u16,
    pub payload: &'a [u8],
}

#[inline]
pub fn decode_publish(body: &[u8], qos: u8) -> Result<Publish<'_>, CodecError> {
    let bad = CodecError::Malformed("PUBLISH");
    if body.len() < 2 {
        return Err(bad);
    }
    let topic_len = usize::from(u16::from_be_bytes([body[0], body[1]]));
    let mut at = 2 + topic_len;
    let topic = body.get(2..at).ok_or(bad.clone())?;
    let mut packet_id = 0;
    if qos > 0 {
        let id = body.get(at..at + 2).ok_or(bad.clone())?;
        packet_id = u16::from_be_bytes([id[0], id[1]]);
        at += 2;
    }
    if qos > 2 {
        return Err(bad);
    }
    Ok(Publish {
        topic,
        packet_id,
        payload: &body[at..],
    })
}

/// Why a broker refused a CONNECT (CONNACK return codes 1–5).
pub fn connack_reason(code: u8) -> &'static str {
    match code {
        1 => "it does not accept MQTT 3.1.1 (unacceptable protocol version)",
        2 => "it rejected the client identifier",
        3 => "the server is unavailable",
        4 => "bad user name or password",
        5 => "not authorized",
        _ => "an unknown CONNACK return code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_lengths_round_trip_at_every_width() {
        for len in [0, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152] {
            let mut out = vec![0x30];
            put_len(&mut out, len);
            out.resize(out.len() + len, 0);
            let frame = split_frame(&out, MAX_REMAINING_LEN).unwrap().unwrap();
            assert_eq!(frame.body.len(), len);
            assert_eq!(frame.end(), out.len());
            // Any prefix is incomplete, never an error.
            assert_eq!(
                split_frame(&out[..out.len() - 1], MAX_REMAINING_LEN),
                Ok(None)
            );
        }
        assert_eq!(
            split_frame(&[0x30, 0xff, 0xff, 0xff, 0xff, 0x01], MAX_REMAINING_LEN),
            Err(CodecError::BadLength)
        );
        assert_eq!(
            split_frame(&[0x30, 0x80, 0x01], 100),
            Err(CodecError::TooLarge(128, 100))
        );
    }

    #[test]
    fn connect_matches_the_specification_example() {
        let mut out = Vec::new();
        encode_connect(
            &mut out,
            &ConnectOptions {
                client_id: "ab",
                username: Some("u"),
                password: Some("pw"),
                keep_alive_s: 60,
                clean_session: true,
            },
        );
        let expected = [
            0x10,
            21,
            0,
            4,
            b'M',
            b'Q',
            b'T',
            b'T',
            4,
            0b1100_0010,
            0,
            60,
            0,
            2,
            b'a',
            b'b',
            0,
            1,
            b'u',
            0,
            2,
            b'p',
            b'w',
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn publishes_decode_what_was_encoded_at_every_qos() {
        for qos in 0..=2u8 {
            let mut out = Vec::new();
            encode_publish_header(&mut out, b"a/b", qos, 513, 4);
            out.extend_from_slice(b"data");
            let frame = split_frame(&out, 1 << 20).unwrap().unwrap();
            assert_eq!((frame.kind, frame.qos()), (kind::PUBLISH, qos));
            let publish = decode_publish(&out[frame.body.clone()], qos).unwrap();
            assert_eq!(publish.topic, b"a/b");
            assert_eq!(publish.payload, b"data");
            assert_eq!(publish.packet_id, if qos > 0 { 513 } else { 0 });
        }
        assert!(decode_publish(&[0, 9, b'x'], 0).is_err());
        assert!(decode_publish(&[0, 1, b'x', 0], 1).is_err());
    }

    #[test]
    fn acknowledgements_and_control_packets_have_their_fixed_bytes() {
        let mut out = Vec::new();
        encode_ack(&mut out, kind::PUBACK, 0x0102);
        encode_ack(&mut out, kind::PUBREL, 7);
        encode_pingreq(&mut out);
        encode_disconnect(&mut out);
        assert_eq!(out, [0x40, 2, 1, 2, 0x62, 2, 0, 7, 0xc0, 0, 0xe0, 0]);
        let mut sub = Vec::new();
        encode_subscribe(&mut sub, 1, "t", 1);
        assert_eq!(sub, [0x82, 6, 0, 1, 0, 1, b't', 1]);
        let mut unsub = Vec::new();
        encode_unsubscribe(&mut unsub, 2, "t");
        assert_eq!(unsub, [0xa2, 5, 0, 2, 0, 1, b't']);
        assert_eq!(packet_id(&[0, 9], "PUBACK"), Ok(9));
        assert!(packet_id(&[0], "PUBACK").is_err());
    }
}
