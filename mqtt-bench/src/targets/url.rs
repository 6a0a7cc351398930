//! A broker's address as `--broker` takes it: `mqtt://[USER[:PASSWORD]@]HOST:PORT`, or
//! `mqtts://…[:PORT]` for TLS (port 8883 unless named; its TLS parameters, `cacert=` and
//! `sslmode=`, are common::tls's and removed before this parse), on any host, with an optional
//! `?monitor=http://HOST:PORT` naming the broker's monitoring or management endpoint (NATS's
//! `/varz`) where its process cannot be found on this machine.

/// A broker address, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerUrl {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub monitor: Option<String>,
    /// `mqtts://`: TLS from the first byte.
    pub tls: bool,
}

/// The port of `mqtts://` when the URL names none (IANA's secure-mqtt).
pub const MQTTS_PORT: u16 = 8883;

impl BrokerUrl {
    pub fn parse(url: &str) -> Result<BrokerUrl, String> {
        let (rest, tls) = match url.strip_prefix("mqtts://") {
            Some(rest) => (rest, true),
            None => (
                url.strip_prefix("mqtt://")
                    .or_else(|| url.strip_prefix("tcp://"))
                    .ok_or_else(|| {
                        "a broker URL looks like mqtt://HOST:PORT, mqtt://USER:PASSWORD@HOST:PORT \
                         or mqtts://HOST[:PORT] for TLS"
                            .to_owned()
                    })?,
                false,
            ),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let monitor = match query {
            None => None,
            Some(query) => Some(monitor(query)?),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '#']) {
            return Err("a broker URL has no path: mqtt://HOST:PORT".into());
        }
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((user, hostport)) => (Some(user), hostport),
            None => (None, rest),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            // Percent-decoded: a password from FAIRBENCH_PASSWORD_<NAME> arrives encoded.
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (Some(decode(user)), Some(decode(password))),
                None => (Some(decode(info)), None),
            },
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (host, port),
            _ if tls => (hostport, ""),
            _ => return Err("the broker URL needs a port: mqtt://HOST:PORT".to_owned()),
        };
        let host = host.trim_matches(['[', ']']);
        if host.is_empty() {
            return Err("the broker URL has no host".into());
        }
        let port: u16 = if port.is_empty() && tls {
            MQTTS_PORT
        } else {
            port.parse()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("`{port}` is not a TCP port (1–65535)"))?
        };
        Ok(BrokerUrl {
            host: host.to_owned(),
            port,
            username,
            password,
            monitor,
            tls,
        })
    }

    /// `host:port`, with brackets around an IPv6 host.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn decode(text: &str) -> String {
    common::urlparts::percent_decode(text)
}

fn monitor(query: &str) -> Result<String, String> {
    let mut found = None;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("monitor", value)) if value.starts_with("http://") => {
                found = Some(value.trim_end_matches('/').to_owned());
            }
            Some(("monitor", value)) => {
                return Err(format!("?monitor={value} must be an http:// URL"));
            }
            _ => {
                return Err(format!(
                    "`{pair}` is not a broker URL option; the only one is ?monitor=http://HOST:PORT"
                ));
            }
        }
    }
    found.ok_or_else(|| "an empty query; the only option is ?monitor=http://HOST:PORT".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_urls_parse_with_and_without_credentials() {
        let url = BrokerUrl::parse("mqtt://u:p@127.0.0.1:1883").unwrap();
        assert_eq!(url.addr(), "127.0.0.1:1883");
        assert_eq!(url.username.as_deref(), Some("u"));
        assert_eq!(url.password.as_deref(), Some("p"));
        let encoded = BrokerUrl::parse("mqtt://u:a%40b%3Ac@h:1").unwrap();
        assert_eq!(encoded.password.as_deref(), Some("a@b:c"));
        let bare = BrokerUrl::parse("tcp://localhost:1883/").unwrap();
        assert_eq!((bare.host.as_str(), bare.port), ("localhost", 1883));
        assert_eq!(
            BrokerUrl::parse("mqtt://[::1]:1883").unwrap().addr(),
            "[::1]:1883"
        );
        let remote = BrokerUrl::parse(
            "mqtt://broker.example.com:1883?monitor=http://broker.example.com:8222/",
        )
        .unwrap();
        assert_eq!(
            remote.monitor.as_deref(),
            Some("http://broker.example.com:8222")
        );
        let tls = BrokerUrl::parse("mqtts://u:p@broker.example.com").unwrap();
        assert!(tls.tls);
        assert_eq!(tls.addr(), "broker.example.com:8883");
        assert_eq!(
            BrokerUrl::parse("mqtts://[::1]").unwrap().addr(),
            "[::1]:8883"
        );
        assert_eq!(
            BrokerUrl::parse("mqtts://127.0.0.1:48883").unwrap().port,
            48883
        );
        assert!(!url.tls);
        for bad in [
            "http://127.0.0.1:1883",
            "mqtt://127.0.0.1",
            "mqtt://127.0.0.1:0",
            "mqtt://127.0.0.1:99999",
            "mqtt://:1883",
            "mqtt://127.0.0.1:1883/topic",
            "mqtt://127.0.0.1:1883?qos=1",
            "mqtt://127.0.0.1:1883?monitor=ftp://x",
            "127.0.0.1:1883",
        ] {
            assert!(BrokerUrl::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
