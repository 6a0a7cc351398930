//! What every tool that speaks to PostgreSQL shares (feature `postgres`): how fairbench reaches
//! one server ([`Link`]: the client's settings and the TLS its URL asks for, libpq's
//! `sslmode`/`sslrootcert`, which tokio-postgres does not read itself), connecting within a
//! bounded time with the failure in the words every tool uses, the server's own words for an
//! error, the settings it runs with, and where it runs.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::{CancelToken, Client, Config};

use crate::driver::OpError;
use crate::options::TargetSpec;
use crate::reach::{Reach, TlsState};
use crate::results::Location;
use crate::target::{Identity, TargetError, is_local_host};
use crate::tls::postgres::{MakeTls, refuses_plaintext};
use crate::tls::{TlsSettings, strip_params};

/// Longest one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How fairbench connects to one PostgreSQL server: the client's settings and the TLS its URL
/// asks for.
#[derive(Clone, Debug)]
pub struct Link {
    pub config: Config,
    pub tls: MakeTls,
    pub settings: TlsSettings,
}

impl Link {
    /// The connection settings of `spec`'s URL, with `postgresql://` and each `ALIAS://` of
    /// `aliases` (a tool's own names for the engine, `pgvector`, `postgis`) read as
    /// `postgres://` (so they get libpq's default, `prefer`, too): the password from its file
    /// or variable when the URL has none, the TLS settings read and removed from the URL before
    /// tokio-postgres parses it, fairbench's application name and the connect timeout.
    pub fn of(spec: &TargetSpec, reach: &Reach, aliases: &[&str]) -> Result<Link, TargetError> {
        let as_postgres = |url: &str| {
            let mut url = url.replacen("postgresql://", "postgres://", 1);
            for alias in aliases {
                url = url.replacen(&format!("{alias}://"), "postgres://", 1);
            }
            url
        };
        let settings = TlsSettings::from_url(&as_postgres(&spec.url), reach.insecure_skip_verify)?;
        let url = strip_params(&as_postgres(&reach.url(spec)));
        let mut config: Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| TargetError::Url {
                    url: spec.url_redacted(),
                    message: e.to_string(),
                })?;
        config.application_name("fairbench");
        config.connect_timeout(CONNECT_TIMEOUT);
        let tls = MakeTls::new(&settings)?;
        Ok(Link {
            config,
            tls,
            settings,
        })
    }

    /// What this link's connections use for TLS: the settings and the last negotiation.
    pub fn tls_state(&self) -> TlsState {
        TlsState {
            settings: self.settings.clone(),
            negotiated: self.tls.negotiated(),
        }
    }

    /// Where the server runs: on this machine unless the URL names a host elsewhere.
    pub fn location(&self) -> Location {
        location(&self.config)
    }
}

/// Connects and drives the connection's socket on a task of its own, on the runtime (lane) that
/// called (a client lives on the runtime it was made on); dropping the client ends both.
pub async fn connect(link: &Link, identity: &Identity) -> Result<Client, TargetError> {
    let connecting = crate::tls::postgres::connect(&link.config, &link.tls);
    let (client, connection) = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => return Err(connect_error(identity, link, &e)),
        Err(_) => {
            return Err(
                identity.connect_error(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()))
            );
        }
    };
    tokio::spawn(async move {
        // A connection error surfaces on the client's next call.
        let _ = connection.await;
    });
    Ok(client)
}

/// Asks the server to stop the statement running on `token`'s connection (PostgreSQL's cancel
/// request, on a connection of its own over the same TLS); the connection stays usable.
pub async fn cancel<T>(token: &CancelToken, tls: T) -> Result<(), String>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Error: std::fmt::Display,
{
    token
        .cancel_query(tls)
        .await
        .map_err(|e| format!("cancel request failed: {}", message(&e)))
}

/// How another task stops the statement a client is running: PostgreSQL's cancel request for
/// that client's connection, sent on a connection of its own over the link's TLS. The client's
/// connection stays usable; the cancelled statement answers with an error.
#[derive(Clone)]
pub struct Canceller {
    token: CancelToken,
    tls: MakeTls,
}

impl Canceller {
    pub fn of(client: &Client, link: &Link) -> Canceller {
        Canceller {
            token: client.cancel_token(),
            tls: link.tls.clone(),
        }
    }

    /// [`Operation::cancel`](crate::driver::Operation::cancel)'s answer: a request that could
    /// not be sent leaves the session untrusted.
    pub async fn cancel(&self) -> Result<(), OpError> {
        cancel(&self.token, self.tls.clone())
            .await
            .map_err(OpError::Fatal)
    }
}

/// Cancels, on the server, what `client` is running if dropped before [`disarm`](Self::disarm):
/// a phase stopped at its bound drops its future, and without this the statement (a `CREATE
/// INDEX`, a `COPY`) would go on taking the server's CPU while the next system is measured.
pub struct CancelOnDrop {
    armed: Option<Canceller>,
}

impl CancelOnDrop {
    pub fn arm(client: &Client, link: &Link) -> CancelOnDrop {
        CancelOnDrop {
            armed: Some(Canceller::of(client, link)),
        }
    }

    /// The statements finished: nothing to cancel.
    pub fn disarm(mut self) {
        self.armed = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(canceller) = self.armed.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = canceller.cancel().await;
            });
        }
    }
}

/// A failed connection in one line: what TLS refused, the server's own words, or the error and
/// each of its causes (the cause, `Connection refused` say, is in the source), with advice when
/// nothing listens or the server wants TLS.
fn connect_error(identity: &Identity, link: &Link, e: &tokio_postgres::Error) -> TargetError {
    if let Some(tls) = crate::tls::explain(e, &link.settings.host) {
        return identity.connect_error(tls);
    }
    let mut text = message(e);
    if e.as_db_error().is_none() {
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
    }
    if text.contains("refused") {
        text.push_str(" — is the server running? (scripts/services start)");
    } else if refuses_plaintext(e) {
        text.push_str(
            " — the server accepts only TLS (use sslmode=require, verify-ca or verify-full)",
        );
    }
    identity.connect_error(text)
}

/// The server's own words for an error when it sent any (`ERROR: relation … does not exist`),
/// else the client's.
pub fn message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

/// The settings `names` as the server runs with them (`pg_settings`): name → value, for each
/// it has.
pub async fn read_settings(
    client: &Client,
    names: &[&str],
) -> Result<BTreeMap<String, String>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT name, setting FROM pg_settings WHERE name = ANY($1)",
            &[&names],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Where the server runs: on this machine unless the URL names a host elsewhere (a Unix
/// socket is always here).
pub fn location(config: &Config) -> Location {
    let remote = config
        .get_hosts()
        .iter()
        .any(|host| matches!(host, Host::Tcp(name) if !is_local_host(name)));
    if remote {
        Location::Remote
    } else {
        Location::Local
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_of(url: &str) -> Config {
        let reach = Reach::local(std::path::Path::new("."));
        Link::of(&TargetSpec::parse(url).unwrap(), &reach, &["pgvector"])
            .unwrap()
            .config
    }

    #[test]
    fn aliases_read_as_postgres_and_the_host_tells_the_location() {
        let local = config_of("pg=pgvector://u:secret@127.0.0.1:5432/db");
        assert_eq!(local.get_application_name(), Some("fairbench"));
        assert_eq!(local.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(location(&local), Location::Local);
        assert_eq!(
            location(&config_of("postgresql://u@db.example.com/db")),
            Location::Remote
        );
        assert_eq!(
            location(&config_of("postgres://u@%2Frun%2Fpostgresql/db")),
            Location::Local
        );
        let bad = Link::of(
            &TargetSpec::parse("postgres://u@h:notaport/db").unwrap(),
            &Reach::local(std::path::Path::new(".")),
            &[],
        );
        let error = bad.unwrap_err().to_string();
        assert!(
            error.starts_with("`postgres://u@h:notaport/db` is not a usable target"),
            "{error}"
        );
    }
}
