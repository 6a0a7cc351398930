//! MQTT reason codes: rumqttc's v5 enums mapped to the bytes on the wire (its own maps are
//! private, and several of its enums number their variants 0, 1, 2 … instead), and the names
//! the MQTT 5 specification gives them, so a refusal is recorded as the broker said it.

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{
    ConnectReturnCode, PubAckReason, PubCompReason, PubRecReason, SubscribeReasonCode,
};

/// A 3.1.1 CONNACK return code (1–5).
pub fn connack_311(code: u8) -> &'static str {
    match code {
        0 => "accepted",
        1 => "unacceptable protocol version",
        2 => "identifier rejected",
        3 => "server unavailable",
        4 => "bad user name or password",
        5 => "not authorized",
        _ => "an unknown return code",
    }
}

/// The MQTT 5 name of a reason code of 0x80 or more (and of the few success codes below).
pub fn name(code: u8) -> &'static str {
    match code {
        0x00 => "success",
        0x10 => "no matching subscribers",
        0x80 => "unspecified error",
        0x81 => "malformed packet",
        0x82 => "protocol error",
        0x83 => "implementation specific error",
        0x84 => "unsupported protocol version",
        0x85 => "client identifier not valid",
        0x86 => "bad user name or password",
        0x87 => "not authorized",
        0x88 => "server unavailable",
        0x89 => "server busy",
        0x8a => "banned",
        0x8b => "server shutting down",
        0x8c => "bad authentication method",
        0x8d => "keep alive timeout",
        0x8e => "session taken over",
        0x8f => "topic filter invalid",
        0x90 => "topic name invalid",
        0x91 => "packet identifier in use",
        0x92 => "packet identifier not found",
        0x93 => "receive maximum exceeded",
        0x94 => "topic alias invalid",
        0x95 => "packet too large",
        0x96 => "message rate too high",
        0x97 => "quota exceeded",
        0x98 => "administrative action",
        0x99 => "payload format invalid",
        0x9a => "retain not supported",
        0x9b => "QoS not supported",
        0x9c => "use another server",
        0x9d => "server moved",
        0x9e => "shared subscriptions not supported",
        0x9f => "connection rate exceeded",
        0xa0 => "maximum connect time",
        0xa1 => "subscription identifiers not supported",
        0xa2 => "wildcard subscriptions not supported",
        _ => "an unknown reason code",
    }
}

/// `name (0xNN)`, the way every message shows a reason code.
pub fn describe(code: u8) -> String {
    format!("{} (0x{code:02x})", name(code))
}

pub fn connack_v5(code: ConnectReturnCode) -> u8 {
    use ConnectReturnCode as C;
    match code {
        C::Success => 0x00,
        // rumqttc's v5 enum also holds the 3.1.1 return codes; a v5 CONNACK never carries them.
        C::RefusedProtocolVersion => 0x84,
        C::BadClientId => 0x85,
        C::ServiceUnavailable => 0x88,
        C::UnspecifiedError => 0x80,
        C::MalformedPacket => 0x81,
        C::ProtocolError => 0x82,
        C::ImplementationSpecificError => 0x83,
        C::UnsupportedProtocolVersion => 0x84,
        C::ClientIdentifierNotValid => 0x85,
        C::BadUserNamePassword => 0x86,
        C::NotAuthorized => 0x87,
        C::ServerUnavailable => 0x88,
        C::ServerBusy => 0x89,
        C::Banned => 0x8a,
        C::BadAuthenticationMethod => 0x8c,
        C::TopicNameInvalid => 0x90,
        C::PacketTooLarge => 0x95,
        C::QuotaExceeded => 0x97,
        C::PayloadFormatInvalid => 0x99,
        C::RetainNotSupported => 0x9a,
        C::QoSNotSupported => 0x9b,
        C::UseAnotherServer => 0x9c,
        C::ServerMoved => 0x9d,
        C::ConnectionRateExceeded => 0x9f,
    }
}

/// PUBACK and PUBREC share their reason codes; rumqttc has one enum for each.
macro_rules! publish_ack_code {
    ($reason:expr, $enum:ident) => {
        match $reason {
            $enum::Success => 0x00,
            $enum::NoMatchingSubscribers => 0x10,
            $enum::UnspecifiedError => 0x80,
            $enum::ImplementationSpecificError => 0x83,
            $enum::NotAuthorized => 0x87,
            $enum::TopicNameInvalid => 0x90,
            $enum::PacketIdentifierInUse => 0x91,
            $enum::QuotaExceeded => 0x97,
            $enum::PayloadFormatInvalid => 0x99,
        }
    };
}

pub fn puback(reason: PubAckReason) -> u8 {
    publish_ack_code!(reason, PubAckReason)
}

pub fn pubrec(reason: PubRecReason) -> u8 {
    publish_ack_code!(reason, PubRecReason)
}

pub fn pubcomp(reason: PubCompReason) -> u8 {
    match reason {
        PubCompReason::Success => 0x00,
        PubCompReason::PacketIdentifierNotFound => 0x92,
    }
}

pub fn suback(code: SubscribeReasonCode) -> u8 {
    use SubscribeReasonCode as S;
    match code {
        S::Success(QoS::AtMostOnce) => 0,
        S::Success(QoS::AtLeastOnce) => 1,
        S::Success(QoS::ExactlyOnce) => 2,
        S::Failure | S::Unspecified => 0x80,
        S::ImplementationSpecific => 0x83,
        S::NotAuthorized => 0x87,
        S::TopicFilterInvalid => 0x8f,
        S::PkidInUse => 0x91,
        S::QuotaExceeded => 0x97,
        S::SharedSubscriptionsNotSupported => 0x9e,
        S::SubscriptionIdNotSupported => 0xa1,
        S::WildcardSubscriptionsNotSupported => 0xa2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_codes_map_to_their_wire_bytes_and_names() {
        assert_eq!(puback(PubAckReason::QuotaExceeded), 0x97);
        assert_eq!(puback(PubAckReason::NoMatchingSubscribers), 0x10);
        assert_eq!(pubrec(PubRecReason::Success), 0);
        assert_eq!(pubcomp(PubCompReason::PacketIdentifierNotFound), 0x92);
        assert_eq!(
            suback(SubscribeReasonCode::SharedSubscriptionsNotSupported),
            0x9e
        );
        assert_eq!(connack_v5(ConnectReturnCode::NotAuthorized), 0x87);
        assert_eq!(describe(0x9e), "shared subscriptions not supported (0x9e)");
        assert_eq!(connack_311(1), "unacceptable protocol version");
    }
}
