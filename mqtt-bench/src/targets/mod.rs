//! The brokers mqtt-bench measures, and the registry of their kinds. Each kind is one file
//! implementing [`BrokerKind`]: how a broker of that kind is recognised (by what it publishes on
//! `$SYS`, or by its process) and how its version and settings are read (Mosquitto from `$SYS`
//! and its configuration file, NATS from its monitoring endpoint, aedes from its package, EMQX
//! from `$SYS/brokers/<node>/version`, HiveMQ from fairbench's launcher's monitor, the embedded
//! rumqttd from its own build, any other MQTT broker from what it publishes), and where the
//! broker's own count of dropped messages is read, when it keeps one. A target knows how to reach, describe and observe its
//! broker; it never knows which scenario runs against it. Adding a kind is adding a file here
//! and one line in [`KINDS`].

pub mod aedes;
pub mod embedded;
pub mod emqx;
pub mod generic;
pub mod hivemq;
pub mod mochi;
pub mod mosquitto;
pub mod nats;
pub mod rabbitmq;
pub mod url;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::options::TargetSpec;
use common::pool::BoxFuture;
use common::procstat::{Probe, ServerPid};
pub use common::reach::Reach;
use common::results::{Location, SystemInfo};
use common::servercpu::ServerProcess;
pub use common::target::TargetError;
use common::target::{FromAfar, location_of_host};
use common::tls::Negotiated;

use crate::protocol::codec::{ConnAckInfo, Protocol};
use crate::protocol::conn::{ConnError, Endpoint};
use crate::protocol::transport::TlsLink;
use crate::session::{self, Client, SYS_TOPICS};
pub use url::BrokerUrl;

/// The kinds a broker reached at `mqtt://` is asked to be, in this order: the first that
/// recognises it describes it. The generic MQTT broker, last, is any broker.
pub const KINDS: [&dyn BrokerKind; 8] = [
    &mosquitto::Mosquitto,
    &mochi::Mochi,
    &emqx::Emqx,
    &rabbitmq::RabbitMq,
    &hivemq::HiveMq,
    &nats::Nats,
    &aedes::Aedes,
    &generic::Mqtt,
];

/// The broker measured when none is named: rumqttd, started in this process.
pub const DEFAULT_TARGET: &str = "embedded";

/// The schemes `--broker` takes, for the error that names another.
const SCHEMES: &str =
    "mqtt://HOST:PORT, mqtts://HOST[:PORT] for TLS (or `embedded` for the in-process broker)";

/// A broker's version and the settings read back from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Description {
    pub version: String,
    pub verified: BTreeMap<String, String>,
}

/// A broker the run can talk to, before its kind is known: where it is, its process when the
/// user gave it, and what it said about itself when it was reached.
#[derive(Debug, Clone)]
pub struct Reached {
    pub endpoint: Endpoint,
    pub pid: Option<u32>,
    /// Its process's command line, when its PID is known.
    pub cmdline: Vec<String>,
    /// The retained `$SYS` topics it published ([`SYS_TOPICS`]), by topic.
    pub sys: BTreeMap<String, String>,
    /// What its CONNACK announced.
    pub connack: ConnAckInfo,
    /// A monitoring or management HTTP endpoint the URL named (`?monitor=http://…`).
    pub monitor: Option<String>,
}

impl Reached {
    /// What it published as `$SYS/broker/version`.
    pub fn sys_version(&self) -> Option<&str> {
        self.sys.get(SYS_TOPICS[0]).map(String::as_str)
    }

    /// Whether its command line mentions `word` (its executable or script).
    pub fn runs(&self, word: &str) -> bool {
        self.cmdline.iter().take(3).any(|a| a.contains(word))
    }

    /// The argument after `flag` on its command line (`-c FILE`).
    pub fn arg_after(&self, flags: &[&str]) -> Option<&str> {
        let at = self
            .cmdline
            .iter()
            .position(|a| flags.contains(&a.as_str()))?;
        self.cmdline.get(at + 1).map(String::as_str)
    }
}

/// One kind of broker: how it is recognised, and how its version and settings are read.
pub trait BrokerKind: Sync {
    /// `SystemInfo.kind`, and the name of a broker of this kind the user did not name.
    fn kind(&self) -> &'static str;

    /// Whether a `$SYS/broker/version` (lower-cased) names this kind.
    fn names(&self, sys_version_lowercase: &str) -> bool {
        let _ = sys_version_lowercase;
        false
    }

    /// Whether `broker` is of this kind: by its `$SYS/broker/version` unless the kind tells
    /// itself apart another way (its process, another `$SYS` topic).
    fn recognises(&self, broker: &Reached) -> bool {
        broker
            .sys_version()
            .is_some_and(|v| self.names(&v.to_ascii_lowercase()))
    }

    /// Settings read from a broker of this kind beyond its version (its configuration file,
    /// when its process is known).
    fn settings(&self, broker: &Reached) -> BTreeMap<String, String> {
        let _ = broker;
        BTreeMap::new()
    }

    /// Where the broker's own count of the messages it dropped is read, before and after every
    /// window, when it keeps one that can be read at any moment.
    fn drop_counter(&self, broker: &Reached) -> Option<DropCounter> {
        let _ = broker;
        None
    }

    /// The broker's version and settings, or `None` when `broker` is not of this kind.
    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> BoxFuture<'a, Result<Option<Description>, TargetError>> {
        Box::pin(async move {
            if !self.recognises(broker) {
                return Ok(None);
            }
            let version = broker.sys_version().map_or_else(
                || format!("{} (version not published)", self.kind()),
                str::to_owned,
            );
            Ok(Some(Description {
                version,
                verified: self.settings(broker),
            }))
        })
    }
}

/// A broker's own count of the messages it dropped (a subscriber's queue full, a QoS 0 limit),
/// read before and after each window so its report can show it beside mqtt-bench's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropCounter {
    /// HiveMQ's `com.hivemq.messages.dropped.count`, from fairbench's launcher's monitor.
    HiveMq { monitor: String },
}

impl DropCounter {
    /// The counter's name, as the broker calls it.
    pub fn name(&self) -> &'static str {
        match self {
            DropCounter::HiveMq { .. } => hivemq::DROPPED_METRIC,
        }
    }

    /// Its value now, or `None` when it could not be read.
    pub async fn read(&self) -> Option<u64> {
        match self {
            DropCounter::HiveMq { monitor } => {
                let monitor = monitor.clone();
                let document = tokio::task::spawn_blocking(move || hivemq::document(&monitor))
                    .await
                    .ok()??;
                document["metrics"][hivemq::DROPPED_METRIC].as_u64()
            }
        }
    }
}

/// One broker as the run holds it: how a window reaches and observes it, and what it said
/// about itself.
pub struct Broker {
    pub link: session::Link,
    pub info: SystemInfo,
    /// Where its MQTT 5 clients connect, when not at the same address (the embedded broker
    /// listens for each protocol on a port of its own).
    pub v5_addr: Option<String>,
    /// Keeps an embedded broker running for as long as the run needs it.
    pub guard: Option<Arc<embedded::EmbeddedBroker>>,
    /// The broker's own count of dropped messages, when it keeps one mqtt-bench can read.
    pub dropped: Option<DropCounter>,
}

impl Broker {
    /// Where the broker runs, for its CPU beside the client's: the process sampled in every
    /// window (`--broker-pid`, or the one listening on its port), in process, or remote.
    pub fn server_process(&self) -> ServerProcess {
        match &self.link.probe {
            Some(Probe::Process(pid)) => ServerProcess::Local(*pid),
            _ => ServerProcess::locate(&self.info, None),
        }
    }
}

impl From<ConnError> for TargetError {
    fn from(error: ConnError) -> TargetError {
        // Its messages are complete sentences already ("cannot connect to …").
        TargetError::Other(error.to_string())
    }
}

/// Starts (embedded) or reaches (`mqtt://`, `mqtts://`) the broker `spec` names.
pub async fn open(
    spec: &TargetSpec,
    pid: Option<&ServerPid>,
    client: &Client,
    access: &Reach,
) -> Result<Broker, TargetError> {
    match spec.scheme() {
        "embedded" => embedded::open(spec, client).await,
        "mqtt" | "mqtts" | "tcp" => reach(spec, pid, client, access).await,
        _ => Err(TargetError::unknown_scheme(spec, SCHEMES)),
    }
}

/// A broker at `mqtt[s]://[USER:PASSWORD@]HOST:PORT`, on this machine or another: reached
/// with mqtt-bench's own client (over TLS for `mqtts://`, the password from the URL or the
/// run's secrets), described by the first kind that recognises it, observed through /proc when
/// it is local and its PID is given.
async fn reach(
    spec: &TargetSpec,
    pid: Option<&ServerPid>,
    client: &Client,
    access: &Reach,
) -> Result<Broker, TargetError> {
    let tls_settings = access.tls(spec)?;
    let with_password = access.url(spec);
    let url = BrokerUrl::parse(&common::tls::strip_params(&with_password)).map_err(|message| {
        TargetError::Url {
            url: spec.url_redacted(),
            message,
        }
    })?;
    let tls = match url.tls {
        false => None,
        true => Some(TlsLink {
            config: tls_settings.client_config()?,
            server: common::tls::Endpoint {
                host: url.host.clone(),
                port: url.port,
            },
        }),
    };
    let location = location_of_host(&url.host);
    if let (Location::Remote, Some(pid)) = (location, pid) {
        return Err(TargetError::Other(format!(
            "--broker-pid {}: {} is on another host; only a broker on this machine can be observed through /proc",
            pid.pid, url.host
        )));
    }
    let client = Client {
        username: url.username.clone(),
        password: url.password.clone(),
        tls,
        ..client.clone()
    };
    let (endpoint, sys, connack, negotiated) = describe_over_mqtt(&url, &client).await?;
    // Without --broker-pid a broker on this machine is found by the port it listens on.
    let found = (location == Location::Local)
        .then(|| common::procstat::listening_pid(url.port))
        .flatten();
    let probe = pid.map(|p| p.pid).or(found).map(Probe::Process);
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
        cmdline: pid.map(|p| cmdline(p.pid)).unwrap_or_default(),
        sys,
        connack,
        monitor: url.monitor.clone(),
    };
    let (kind, description) = describe(&reached).await?;
    let dropped = KINDS
        .iter()
        .find(|k| k.kind() == kind)
        .and_then(|k| k.drop_counter(&reached));
    let mut info = system_info(spec, &url, kind, &reached, description, location);
    common::tls::record(&mut info, &tls_settings, negotiated.as_ref());
    Ok(Broker {
        link: session::Link {
            endpoint: reached.endpoint.clone(),
            probe,
            in_process: false,
            connack: reached.connack.clone(),
        },
        info,
        v5_addr: None,
        guard: None,
        dropped,
    })
}

/// Where a broker was reached, what its `$SYS` topics and CONNACK said, what its TLS negotiated.
type Described = (
    Endpoint,
    BTreeMap<String, String>,
    ConnAckInfo,
    Option<Negotiated>,
);

/// Connects once to read the `$SYS` topics: in MQTT 3.1.1, or in 5 for a broker that only
/// speaks 5.
async fn describe_over_mqtt(url: &BrokerUrl, client: &Client) -> Result<Described, TargetError> {
    let id = format!("fairbench-describe-{}", client.tag);
    let mut last = None;
    for protocol in [Protocol::V311, Protocol::V5] {
        let client = Client {
            protocol,
            ..client.clone()
        };
        let endpoint = session::endpoint(url.addr(), &client)?;
        match session::describe(&endpoint, &id).await {
            Ok((sys, connack, negotiated)) => {
                let endpoint = session::endpoint(
                    url.addr(),
                    &Client {
                        protocol: Protocol::V311,
                        ..client
                    },
                )?;
                return Ok((endpoint, sys, connack, negotiated));
            }
            Err(ConnError::Refused { connack, .. })
                if connack.code == 1 && protocol == Protocol::V311 =>
            {
                last = Some(ConnError::Refused {
                    addr: endpoint.addr.clone(),
                    protocol,
                    reason: connack.refusal(protocol),
                    connack,
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(
        || TargetError::Other("the broker refused every protocol".into()),
        Into::into,
    ))
}

fn system_info(
    spec: &TargetSpec,
    url: &BrokerUrl,
    kind: &str,
    reached: &Reached,
    description: Description,
    location: Location,
) -> SystemInfo {
    let published = reached.sys_version().unwrap_or("not published");
    let mut verified = settings([("$SYS/broker/version", published.to_owned())]);
    for (topic, value) in &reached.sys {
        verified
            .entry(topic.clone())
            .or_insert_with(|| value.clone());
    }
    if let Some(pid) = reached.pid {
        verified.insert("pid".into(), pid.to_string());
    }
    verified.extend(description.verified);
    let mut not_measured = Vec::new();
    if location != Location::Remote && reached.pid.is_none() {
        not_measured.push(
            "CPU time and resident memory of the broker: no --broker-pid was given".to_owned(),
        );
    }
    if let Some(monitor) = &url.monitor {
        verified.insert("monitor".into(), common::redact::redact_url(monitor));
    }
    let mut info = SystemInfo {
        name: spec.name.clone().unwrap_or_else(|| kind.to_owned()),
        kind: kind.to_owned(),
        url_redacted: spec.url_redacted(),
        version: description.version,
        verified,
        location,
        not_measured,
        labels: if location == Location::Remote {
            vec!["remote".to_owned()]
        } else {
            Vec::new()
        },
        ..SystemInfo::default()
    };
    // From afar neither the process (/proc) nor its configuration file (read through the PID,
    // as Mosquitto's is) can be read.
    common::target::note_remote(&mut info, &[FromAfar::ServerUsage, FromAfar::ConfigFile]);
    info
}

/// A process's command line, argument by argument.
fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
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

#[cfg(test)]
mod tests;
