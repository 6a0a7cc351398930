//! The codec against rumqttc's own encoders for what brokers send, fed back one byte at a
//! time, in both protocols, with the three v5 packets rumqttc misreads.

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::v4;
use rumqttc::v5::mqttbytes::v5;

use super::*;

/// Decodes `bytes` fed one byte at a time; every prefix of a packet is incomplete.
fn decode_trickled(bytes: &[u8], protocol: Protocol) -> Vec<Incoming> {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut needed = 0;
    for b in bytes {
        buf.extend_from_slice(&[*b]);
        while let Some(packet) = read(&mut buf, protocol, 1 << 20, &mut needed).unwrap() {
            out.push(packet);
        }
    }
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    out
}

#[test]
fn what_a_311_broker_sends_decodes_byte_by_byte() {
    let mut wire = BytesMut::new();
    v4::ConnAck::new(v4::ConnectReturnCode::Success, true)
        .write(&mut wire)
        .unwrap();
    let mut suback = v4::SubAck::new(
        7,
        vec![v4::SubscribeReasonCode::Success(
            rumqttc::mqttbytes::QoS::AtLeastOnce,
        )],
    );
    suback.pkid = 7;
    suback.write(&mut wire).unwrap();
    let mut publish = v4::Publish::new(
        "a/b",
        rumqttc::mqttbytes::QoS::AtLeastOnce,
        b"data".to_vec(),
    );
    publish.pkid = 513;
    publish.write(&mut wire).unwrap();
    v4::PubAck::new(9).write(&mut wire).unwrap();
    v4::PubRec::new(10).write(&mut wire).unwrap();
    v4::PubRel::new(11).write(&mut wire).unwrap();
    v4::PubComp::new(12).write(&mut wire).unwrap();
    v4::PingResp.write(&mut wire).unwrap();
    let got = decode_trickled(&wire, Protocol::V311);
    assert_eq!(got.len(), 8);
    let Incoming::ConnAck(c) = &got[0] else {
        panic!("{got:?}")
    };
    assert!(c.accepted() && c.session_present);
    assert_eq!(
        got[1],
        Incoming::SubAck {
            pkid: 7,
            codes: vec![1]
        }
    );
    let Incoming::Publish(p) = &got[2] else {
        panic!()
    };
    assert_eq!(
        (p.qos, p.pkid, &p.topic[..], &p.payload[..]),
        (1, 513, &b"a/b"[..], &b"data"[..])
    );
    assert_eq!(
        got[3],
        Incoming::Ack {
            ack: Ack::PubAck,
            pkid: 9,
            code: 0
        }
    );
    assert_eq!(
        got[4],
        Incoming::Ack {
            ack: Ack::PubRec,
            pkid: 10,
            code: 0
        }
    );
    assert_eq!(got[5], Incoming::PubRel { pkid: 11 });
    assert_eq!(
        got[6],
        Incoming::Ack {
            ack: Ack::PubComp,
            pkid: 12,
            code: 0
        }
    );
    assert_eq!(got[7], Incoming::PingResp);
}

#[test]
fn what_a_v5_broker_sends_decodes_including_what_rumqttc_misreads() {
    let mut wire = BytesMut::new();
    let mut publish = v5::Publish::new(
        "t",
        rumqttc::v5::mqttbytes::QoS::ExactlyOnce,
        Bytes::from_static(b"xy"),
        None,
    );
    publish.pkid = 3;
    publish.write(&mut wire).unwrap();
    let mut refused = v5::PubAck::new(4, None);
    refused.reason = v5::PubAckReason::QuotaExceeded;
    refused.write(&mut wire).unwrap();
    // The three packets rumqttc 0.25.1 cannot read: a bare DISCONNECT, one with a reason and
    // no properties (Mosquitto's "session taken over"), a 3.1.1 refusal of an MQTT 5 CONNECT.
    wire.extend_from_slice(&[0xe0, 0x00, 0xe0, 0x01, 0x8e, 0x20, 0x02, 0x00, 0x01]);
    let got = decode_trickled(&wire, Protocol::V5);
    assert_eq!(got.len(), 5, "{got:?}");
    let Incoming::Publish(p) = &got[0] else {
        panic!()
    };
    assert_eq!((p.qos, p.pkid), (2, 3));
    assert_eq!(
        got[1],
        Incoming::Ack {
            ack: Ack::PubAck,
            pkid: 4,
            code: 0x97
        }
    );
    assert_eq!(got[2], Incoming::Disconnect { code: 0 });
    assert_eq!(got[3], Incoming::Disconnect { code: 0x8e });
    let Incoming::ConnAck(c) = &got[4] else {
        panic!()
    };
    assert!(c.answered_311 && !c.accepted());
    assert!(c.refusal(Protocol::V5).contains("does not speak MQTT 5"));
}

#[test]
fn a_whole_frame_too_short_for_its_fields_is_malformed_not_incomplete() {
    // A v5 SUBACK whose properties claim 5 bytes the frame does not have.
    let mut buf = BytesMut::from(&[0x90u8, 0x03, 0x00, 0x01, 0x05][..]);
    let mut needed = 0;
    let result = read(&mut buf, Protocol::V5, 1 << 20, &mut needed);
    assert!(
        matches!(result, Err(CodecError::Malformed(_))),
        "{result:?}"
    );
    // And one larger than the client accepts is refused from its fixed header alone.
    let mut big = BytesMut::from(&[0x30u8, 0x80, 0x80, 0x01][..]);
    assert!(matches!(
        read(&mut big, Protocol::V311, 1000, &mut needed),
        Err(CodecError::TooLarge(16_384, 1000))
    ));
}

#[test]
fn the_publish_template_stamps_in_place_and_aliases_after_the_first() {
    for protocol in [Protocol::V311, Protocol::V5] {
        let payload = Bytes::from(vec![0u8; 24]);
        let mut template = PublishTemplate::new(protocol, "a/b", 1, false, payload, Some(1));
        let mut out = BytesMut::new();
        template
            .encode(&mut out, 5)
            .unwrap()
            .copy_from_slice(&[7u8; 24]);
        let first = out.len();
        template.encode(&mut out, 6).unwrap()[0] = 9;
        let second = out.len() - first;
        // Packet id 0 at QoS 1 is refused and leaves nothing behind.
        assert!(template.encode(&mut out, 0).is_err());
        assert_eq!(out.len(), first + second);
        let mut needed = 0;
        let mut packets = Vec::new();
        while let Some(p) = read(&mut out, protocol, 1 << 20, &mut needed).unwrap() {
            packets.push(p);
        }
        let (Incoming::Publish(a), Incoming::Publish(b)) = (&packets[0], &packets[1]) else {
            panic!("{packets:?}")
        };
        assert_eq!((a.pkid, a.payload[0], b.pkid, b.payload[0]), (5, 7, 6, 9));
        assert_eq!(&a.topic[..], b"a/b");
        match protocol {
            // 3.1.1 has no aliases: every message names its topic.
            Protocol::V311 => assert!(!template.uses_alias() && &b.topic[..] == b"a/b"),
            // 5: the second goes under the alias alone, an empty topic.
            Protocol::V5 => assert!(template.uses_alias() && b.topic.is_empty() && second < first),
        }
    }
}

#[test]
fn connect_and_subscribe_carry_what_was_asked() {
    let fields = ConnectFields {
        client_id: "ab",
        username: Some("u"),
        password: Some("pw"),
        keep_alive_s: 60,
        clean: false,
        session_expiry_s: Some(300),
        max_packet_bytes: 1 << 20,
    };
    let mut out = BytesMut::from(&b"xx"[..]);
    encode_connect(&mut out, Protocol::V311, &fields).unwrap();
    // Appended whole after what was there: connect flags user, password, no clean session.
    assert_eq!(&out[..2], b"xx");
    assert_eq!(out[2 + 9], 0b1100_0000);
    let mut v5_out = BytesMut::new();
    encode_connect(&mut v5_out, Protocol::V5, &fields).unwrap();
    let mut frame = v5_out.clone();
    let (connect, _, login) = match v5::Packet::read(&mut frame, None).unwrap() {
        v5::Packet::Connect(c, w, l) => (c, w, l),
        other => panic!("{other:?}"),
    };
    assert!(!connect.clean_start);
    assert_eq!(
        connect.properties.unwrap().session_expiry_interval,
        Some(300)
    );
    assert_eq!(login.unwrap().username, "u");
    let mut sub = BytesMut::new();
    encode_subscribe(&mut sub, Protocol::V5, 9, &[("$share/g/t", 1)]).unwrap();
    match v5::Packet::read(&mut sub, None).unwrap() {
        v5::Packet::Subscribe(s) => {
            assert_eq!((s.pkid, s.filters[0].path.as_str()), (9, "$share/g/t"));
        }
        other => panic!("{other:?}"),
    }
    let mut acks = BytesMut::new();
    encode_ack(&mut acks, Protocol::V311, Ack::PubRel, 7);
    encode_pingreq(&mut acks, Protocol::V5);
    encode_disconnect(&mut acks, Protocol::V5);
    assert_eq!(&acks[..], &[0x62, 2, 0, 7, 0xc0, 0, 0xe0, 0]);
}
