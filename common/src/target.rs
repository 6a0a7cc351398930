//! What every tool's targets share: why a target failed, how a target is known in reports,
//! whether its host is this machine (and what a report cannot say of a server elsewhere), and
//! how a session error reaches a worker. A target on another host is never refused for it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::driver::OpError;
use crate::options::TargetSpec;
use crate::redact::redact_text;
use crate::results::{Location, SystemInfo};

/// Why a target could not do what was asked; every message is one complete sentence.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot connect to {system} at {url}: {message}")]
    Connect {
        system: String,
        url: String,
        message: String,
    },
    #[error("{system}: {message}")]
    Query { system: String, message: String },
    #[error(
        "{system}: {object} exists but was not created by fairbench; refusing to touch it \
         (fairbench only writes objects it created: use another database or namespace, or move that object)"
    )]
    Foreign { system: String, object: String },
    #[error("`{url}` is not a usable target: {message}")]
    Url { url: String, message: String },
    /// A message that is already a complete sentence.
    #[error("{0}")]
    Other(String),
}

impl TargetError {
    /// An unknown URL scheme, with the schemes the tool takes.
    pub fn unknown_scheme(spec: &TargetSpec, choices: &str) -> TargetError {
        TargetError::Url {
            url: spec.url_redacted(),
            message: format!("unknown scheme `{}`; use {choices}", spec.scheme()),
        }
    }
}

/// What every target reads back from its system alike: the kind and version it reports, its
/// settings, where it keeps its data (when this machine can see it) and where it runs. A tool's
/// own description adds what only its targets report.
#[derive(Debug, Clone, Default)]
pub struct Described {
    /// Engine family as the system reported it (`postgres`, `valkey`, `opensearch`).
    pub kind: String,
    pub version: String,
    /// Settings read back from the system: name → value.
    pub settings: BTreeMap<String, String>,
    /// Where the system keeps its data, when this machine can see it: the run measures the
    /// durable-write floor there.
    pub data_dir: Option<PathBuf>,
    /// Where the system runs, as seen from the client.
    pub location: Location,
}

impl Described {
    /// What a report first says of the system: `name`, its redacted URL, and what it reported
    /// of itself (its settings as the verified ones). The tool adds its labels and notes.
    pub fn system_info(&self, name: String, url_redacted: &str) -> SystemInfo {
        SystemInfo {
            name,
            kind: self.kind.clone(),
            url_redacted: url_redacted.to_owned(),
            version: self.version.clone(),
            data_dir: self.data_dir.as_ref().map(|d| d.display().to_string()),
            location: self.location,
            verified: self.settings.clone(),
            ..SystemInfo::default()
        }
    }
}

/// How a target is known in reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    /// Engine family as far as the URL tells (`postgres`, `sqlite`, `redis`); refined by what
    /// the server reports once it has answered.
    pub kind: String,
    pub url_redacted: String,
}

impl Identity {
    /// A target named after its kind until the run settles names.
    pub fn of(spec: &TargetSpec, kind: &str) -> Identity {
        Identity {
            name: spec.name.clone().unwrap_or_else(|| kind.to_owned()),
            kind: kind.to_owned(),
            url_redacted: spec.url_redacted(),
        }
    }

    /// A failure to connect, in the words every tool uses (credentials in the client's
    /// message redacted: drivers echo URLs).
    pub fn connect_error(&self, message: impl ToString) -> TargetError {
        TargetError::Connect {
            system: self.name.clone(),
            url: self.url_redacted.clone(),
            message: redact_text(&message.to_string()),
        }
    }

    /// A failed statement or request (credentials in the message redacted).
    pub fn query_error(&self, message: impl ToString) -> TargetError {
        TargetError::Query {
            system: self.name.clone(),
            message: redact_text(&message.to_string()),
        }
    }

    /// An object in the way that fairbench did not create.
    pub fn foreign(&self, object: impl Into<String>) -> TargetError {
        TargetError::Foreign {
            system: self.name.clone(),
            object: object.into(),
        }
    }
}

/// A target known by an [`Identity`]: every tool's target trait builds on it, so the registry
/// can name systems and rename them once names are settled.
pub trait Identified {
    fn identity(&self) -> &Identity;

    fn identity_mut(&mut self) -> &mut Identity;
}

/// Implements [`Identified`] for targets that keep their [`Identity`] in a field `identity`.
#[macro_export]
macro_rules! identified {
    ($($target:ty),+ $(,)?) => {
        $(
            impl $crate::target::Identified for $target {
                fn identity(&self) -> &$crate::target::Identity {
                    &self.identity
                }

                fn identity_mut(&mut self) -> &mut $crate::target::Identity {
                    &mut self.identity
                }
            }
        )+
    };
}

/// Whether `host` is this machine (loopback, `localhost`, a Unix socket path or no host), so
/// its data directory and process can be measured here.
pub fn is_local_host(host: &str) -> bool {
    host.is_empty()
        || host == "localhost"
        || host.starts_with('/')
        || host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Where a server reached at `host` runs.
pub fn location_of_host(host: &str) -> Location {
    if is_local_host(host) {
        Location::Local
    } else {
        Location::Remote
    }
}

/// The host of a URL or of a `HOST[:PORT]` (`postgres://u:p@HOST:port/db`, `[::1]:9042` →
/// `::1`, `http://HOST:6334/path`).
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    }
}

/// Where the server a URL (or a `HOST[:PORT]`) names runs: this machine when its host is.
pub fn location_of_url(url: &str) -> Location {
    location_of_host(host_of(url))
}

/// What a report cannot say of a server on another host, besides the durable-write floor of
/// its disk (which [`crate::run::Lifecycle::begin`] notes by itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromAfar {
    /// The CPU time and resident memory of the server process (read from /proc when local).
    ServerUsage,
    /// The server's configuration file (what it reports over its protocol is still read).
    ConfigFile,
}

impl FromAfar {
    /// The line `SystemInfo.not_measured` carries, in the lifecycle's words.
    pub fn line(self) -> &'static str {
        match self {
            FromAfar::ServerUsage => {
                "CPU time and resident memory of the server process: the server is on another \
                 host (only the client's own are measured)"
            }
            FromAfar::ConfigFile => {
                "its configuration file: the server is on another host (the settings recorded \
                 are what it reports over its protocol)"
            }
        }
    }
}

/// Says in `system.not_measured` what `afar` lists could not be measured, when the system
/// runs on another host; nothing for a local or embedded one. Each line once. A tool calls it
/// for what it would read on this machine (CPU/RSS from /proc, a configuration file).
pub fn note_remote(system: &mut SystemInfo, afar: &[FromAfar]) {
    if system.location != Location::Remote {
        return;
    }
    for what in afar {
        let line = what.line();
        if !system.not_measured.iter().any(|l| l == line) {
            system.not_measured.push(line.to_owned());
        }
    }
}

/// Maps a session-level error to the worker's view: a dead connection stops the worker,
/// anything else fails one operation.
pub fn op_error(fatal: bool, message: impl ToString) -> OpError {
    if fatal {
        OpError::Fatal(message.to_string())
    } else {
        OpError::Failed(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_a_url_is_found_in_every_form() {
        assert_eq!(host_of("postgres://u:p@127.0.0.1:5432/db"), "127.0.0.1");
        assert_eq!(host_of("mysql://u@[::1]:3306"), "::1");
        assert_eq!(host_of("postgres://db.example.com/x"), "db.example.com");
        assert_eq!(host_of("127.0.0.1:9042"), "127.0.0.1");
        assert_eq!(host_of("[::1]:6334"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
        assert_eq!(host_of("http://localhost:5984"), "localhost");
        assert_eq!(host_of("http://127.0.0.1:6334/collections"), "127.0.0.1");
        assert_eq!(location_of_url("cql://127.0.0.1:9042"), Location::Local);
        assert_eq!(location_of_url("[::1]:8000"), Location::Local);
        assert_eq!(
            location_of_url("couchdb://u:***@db.example.com:5984"),
            Location::Remote
        );
    }

    #[test]
    fn loopback_hosts_and_sockets_are_local() {
        for host in [
            "127.0.0.1",
            "127.3.4.5",
            "localhost",
            "[::1]",
            "",
            "/run/pg",
        ] {
            assert!(is_local_host(host), "{host}");
        }
        for host in ["10.1.2.3", "db.example.com", "[2001:db8::1]"] {
            assert!(!is_local_host(host), "{host}");
        }
    }

    #[test]
    fn a_remote_system_says_what_could_not_be_measured() {
        let mut far = SystemInfo {
            location: location_of_host("db.example.com"),
            ..SystemInfo::default()
        };
        note_remote(&mut far, &[FromAfar::ServerUsage, FromAfar::ConfigFile]);
        note_remote(&mut far, &[FromAfar::ServerUsage]);
        assert_eq!(far.not_measured.len(), 2);
        assert!(far.not_measured[0].starts_with("CPU time and resident memory"));
        assert!(far.not_measured[1].contains("configuration file: the server is on another host"));
        let mut near = SystemInfo {
            location: location_of_host("127.0.0.1"),
            ..SystemInfo::default()
        };
        note_remote(&mut near, &[FromAfar::ServerUsage]);
        assert!(near.not_measured.is_empty());
    }

    #[test]
    fn messages_from_clients_lose_their_credentials() {
        let spec = TargetSpec::parse("es=https://elastic:pw@10.0.0.5:9200").unwrap();
        let id = Identity::of(&spec, "elasticsearch");
        let e = id.connect_error(
            "error sending request for url (https://elastic:hunter2@10.0.0.5:9200/)",
        );
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let q = id.query_error("Authorization: ApiKey c2VjcmV0 rejected");
        assert_eq!(q.to_string(), "es: Authorization: ApiKey *** rejected");
    }

    #[test]
    fn errors_read_as_sentences() {
        let spec = TargetSpec::parse("pg=postgres://u:secret@127.0.0.1/db").unwrap();
        let id = Identity::of(&spec, "postgres");
        assert_eq!(id.name, "pg");
        let connect = id.connect_error("connection refused").to_string();
        assert_eq!(
            connect,
            "cannot connect to pg at postgres://u:***@127.0.0.1/db: connection refused"
        );
        let scheme = TargetError::unknown_scheme(&spec, "sqlite or postgres://…").to_string();
        assert!(
            scheme.contains("unknown scheme `postgres`; use sqlite"),
            "{scheme}"
        );
        assert_eq!(op_error(true, "gone"), OpError::Fatal("gone".into()));
        assert_eq!(op_error(false, "dup"), OpError::Failed("dup".into()));
    }
}
