//! The brokers mqtt-bench measures, and the registry of their kinds. Each kind is one file
//! implementing [`BrokerKind`]: how a broker of that kind is recognised and how its version and
//! settings are read (Mosquitto from `$SYS/broker/version` and its configuration file, the
//! embedded rumqttd from its own build, any other MQTT 3.1.1 broker from what it publishes). A
//! target knows how to reach, describe and observe its broker; it never knows which scenario
//! runs against it. Adding a kind is adding a file here and one line in [`KINDS`].

pub mod embedded;
pub mod generic;
pub mod mochi;
pub mod mosquitto;
pub mod rabbitmq;

use std::collections::BTreeMap;

use common::options::TargetSpec;
use common::pool::BoxFuture;
use common::procstat::{Probe, ServerPid};
use common::results::SystemInfo;
pub use common::target::TargetError;
use common::target::{is_local_host, location_of_host};

use crate::protocol::conn::{ConnError, Endpoint};
use crate::session::{self, Link};

/// The kinds a broker reached at `mqtt://` is asked to be, in this order: the first that
/// recognises it describes it. The generic MQTT 3.1.1 broker, last, is any broker.
pub const KINDS: [&dyn BrokerKind; 4] = [
    &mosquitto::Mosquitto,
    &mochi::Mochi,
    &rabbitmq::RabbitMq,
    &generic::Mqtt311,
];

/// The broker measured when none is named: rumqttd, started in this process.
pub const DEFAULT_TARGET: &str = "embedded";

/// The schemes `--broker` takes, for the error that names another.
const SCHEMES: &str = "mqtt://HOST:PORT (or `embedded` for the in-process broker)";

/// A broker's version and the settings read back from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Description {
    pub version: String,
    pub verified: BTreeMap<String, String>,
}

/// A broker the run can talk to, before its kind is known: where it is, its process when the
/// user gave it, and what it published as `$SYS/broker/version` (read once, as it was reached).
#[derive(Debug, Clone)]
pub struct Reached {
    pub endpoint: Endpoint,
    pub pid: Option<u32>,
    pub sys_version: Option<String>,
}

/// One kind of broker: how it is recognised, and how its version and settings are read.
pub trait BrokerKind: Sync {
    /// `SystemInfo.kind`, and the name of a broker of this kind the user did not name.
    fn kind(&self) -> &'static str;

    /// Whether a `$SYS/broker/version` (lower-cased) names this kind. A kind that tells itself
    /// apart some other way overrides [`BrokerKind::describe`] instead.
    fn names(&self, sys_version_lowercase: &str) -> bool {
        let _ = sys_version_lowercase;
        false
    }

    /// Settings read from a broker of this kind beyond its version (its configuration file,
    /// when its process is known).
    fn settings(&self, broker: &Reached) -> BTreeMap<String, String> {
        let _ = broker;
        BTreeMap::new()
    }

    /// The broker's version and settings, or `None` when `broker` is not of this kind.
    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            let Some(version) = &broker.sys_version else {
                return Ok(None);
            };
            if !self.names(&version.to_ascii_lowercase()) {
                return Ok(None);
            }
            Ok(Some(Description {
                version: version.clone(),
                verified: self.settings(broker),
            }))
        })
    }
}

/// One broker as the run holds it: how a window reaches and observes it, and what it said
/// about itself.
pub struct Broker {
    pub link: Link,
    pub info: SystemInfo,
    /// Keeps an embedded broker running for as long as the run needs it.
    pub _guard: Option<embedded::EmbeddedBroker>,
}

impl From<ConnError> for TargetError {
    fn from(error: ConnError) -> TargetError {
        // Its messages are complete sentences already ("cannot connect to …").
        TargetError::Other(error.to_string())
    }
}

/// Starts (embedded) or reaches (`mqtt://`) the broker `spec` names.
pub async fn open(spec: &TargetSpec, pid: Option<&ServerPid>) -> Result<Broker, TargetError> {
    match spec.scheme() {
        "embedded" => embedded::open(spec).await,
        "mqtt" | "tcp" => reach(spec, pid).await,
        _ => Err(TargetError::unknown_scheme(spec, SCHEMES)),
    }
}

/// A broker at `mqtt://[USER:PASSWORD@]HOST:PORT`: reached with mqtt-bench's own client,
/// described by the first kind that recognises it, observed through /proc when its PID is
/// given.
async fn reach(spec: &TargetSpec, pid: Option<&ServerPid>) -> Result<Broker, TargetError> {
    let url = BrokerUrl::parse(&spec.url).map_err(|message| TargetError::Url {
        url: spec.url_redacted(),
        message,
    })?;
    if !is_local_host(&url.host) {
        return Err(TargetError::Url {
            url: spec.url_redacted(),
            message: "mqtt-bench only sends load to this machine (127.0.0.1, localhost or ::1)"
                .into(),
        });
    }
    let endpoint = session::endpoint(url.addr(), url.username.clone(), url.password.clone());
    let client_id = format!("fairbench-describe-{}", std::process::id());
    let sys_version = session::sys_version(&endpoint, &client_id).await?;
    let probe = pid.map(|p| Probe::Process(p.pid));
    if let (Some(probe), Some(pid)) = (&probe, pid)
        && !probe.alive()
    {
        return Err(TargetError::Other(format!(
            "--broker-pid {}: no process {} is running on this machine",
            pid.pid, pid.pid
        )));
    }
    let reached = Reached {
        endpoint,
        pid: pid.map(|p| p.pid),
        sys_version,
    };
    let (kind, description) = describe(&reached).await?;
    let published = reached.sys_version.as_deref().unwrap_or("not published");
    let mut verified = settings([("$SYS/broker/version", published.to_owned())]);
    if let Some(pid) = reached.pid {
        verified.insert("pid".into(), pid.to_string());
    }
    verified.extend(description.verified);
    let info = SystemInfo {
        name: spec.name.clone().unwrap_or_else(|| kind.to_owned()),
        kind: kind.to_owned(),
        url_redacted: spec.url_redacted(),
        version: description.version,
        verified,
        location: location_of_host(&url.host),
        ..SystemInfo::default()
    };
    Ok(Broker {
        link: Link {
            endpoint: reached.endpoint,
            probe,
            in_process: false,
        },
        info,
        _guard: None,
    })
}

/// The kind of `broker` (the first of [`KINDS`] that recognises it) and what it says.
async fn describe(broker: &Reached) -> Result<(&'static str, Description), TargetError> {
    for kind in KINDS {
        if let Some(description) = kind.describe(broker).await? {
            return Ok((kind.kind(), description));
        }
    }
    Err(TargetError::Other(format!(
        "{}: no broker kind recognises it",
        broker.endpoint.addr
    )))
}

/// Settings as `name → value`, from pairs.
pub fn settings<const N: usize>(pairs: [(&str, String); N]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A broker address from `mqtt://[USER[:PASSWORD]@]HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerUrl {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl BrokerUrl {
    pub fn parse(url: &str) -> Result<BrokerUrl, String> {
        let rest = url
            .strip_prefix("mqtt://")
            .or_else(|| url.strip_prefix("tcp://"))
            .ok_or_else(|| {
                "a broker URL looks like mqtt://HOST:PORT or mqtt://USER:PASSWORD@HOST:PORT"
                    .to_owned()
            })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err("a broker URL has no path or query: mqtt://HOST:PORT".into());
        }
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((user, hostport)) => (Some(user), hostport),
            None => (None, rest),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (Some(user.to_owned()), Some(password.to_owned())),
                None => (Some(info.to_owned()), None),
            },
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| "the broker URL needs a port: mqtt://HOST:PORT".to_owned())?;
        let host = host.trim_matches(['[', ']']);
        if host.is_empty() {
            return Err("the broker URL has no host".into());
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("`{port}` is not a TCP port (1–65535)"))?;
        Ok(BrokerUrl {
            host: host.to_owned(),
            port,
            username,
            password,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reached(sys_version: Option<&str>) -> Reached {
        Reached {
            endpoint: session::endpoint("127.0.0.1:1".into(), None, None),
            pid: None,
            sys_version: sys_version.map(str::to_owned),
        }
    }

    #[tokio::test]
    async fn version_strings_name_their_kind() {
        for (version, kind) in [
            (Some("mosquitto version 2.0.11"), "mosquitto"),
            (Some("mochi-mqtt v2.7.9"), "mochi-mqtt"),
            (Some("RabbitMQ 4.0"), "rabbitmq"),
            (Some("something else 1.0"), "mqtt"),
            (None, "mqtt"),
        ] {
            let (found, description) = describe(&reached(version)).await.unwrap();
            assert_eq!(found, kind, "{version:?}");
            let shown = version.unwrap_or("unknown (the broker publishes no $SYS/broker/version)");
            assert_eq!(description.version, shown);
        }
    }

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("redis://127.0.0.1:6379").unwrap();
        let error = open(&spec, None).await.err().unwrap().to_string();
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("mqtt://"), "{error}");
    }

    #[tokio::test]
    async fn remote_hosts_are_refused_before_any_connection() {
        let spec = TargetSpec::parse("mqtt://10.1.2.3:1883").unwrap();
        let error = open(&spec, None).await.err().unwrap().to_string();
        assert!(error.contains("only sends load to this machine"), "{error}");
    }

    #[test]
    fn broker_urls_parse_with_and_without_credentials() {
        let url = BrokerUrl::parse("mqtt://u:p@127.0.0.1:1883").unwrap();
        assert_eq!(url.addr(), "127.0.0.1:1883");
        assert_eq!(url.username.as_deref(), Some("u"));
        assert_eq!(url.password.as_deref(), Some("p"));
        let bare = BrokerUrl::parse("tcp://localhost:1883/").unwrap();
        assert_eq!((bare.host.as_str(), bare.port), ("localhost", 1883));
        assert_eq!(
            BrokerUrl::parse("mqtt://[::1]:1883").unwrap().addr(),
            "[::1]:1883"
        );
        for bad in [
            "http://127.0.0.1:1883",
            "mqtt://127.0.0.1",
            "mqtt://127.0.0.1:0",
            "mqtt://127.0.0.1:99999",
            "mqtt://:1883",
            "mqtt://127.0.0.1:1883/topic",
            "127.0.0.1:1883",
        ] {
            assert!(BrokerUrl::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
