//! What every tool that speaks to PostgreSQL shares (feature `postgres`): the connection
//! settings of a target's URL as fairbench connects, connecting within a bounded time with the
//! failure in the words every tool uses, the server's own words for an error, and where the
//! server runs.

use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};

use crate::options::TargetSpec;
use crate::results::Location;
use crate::target::{Identity, TargetError, is_local_host};

/// Longest one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings of `spec`'s URL, with `postgresql://` and each `ALIAS://` of `aliases` (a
/// tool's own names for the engine, `pgvector`, `postgis`) read as `postgres://`, fairbench's
/// application name and the connect timeout.
pub fn config(spec: &TargetSpec, aliases: &[&str]) -> Result<Config, TargetError> {
    let mut url = spec.url.replacen("postgresql://", "postgres://", 1);
    for alias in aliases {
        url = url.replacen(&format!("{alias}://"), "postgres://", 1);
    }
    let mut config: Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| TargetError::Url {
            url: spec.url_redacted(),
            message: e.to_string(),
        })?;
    config.application_name("fairbench");
    config.connect_timeout(CONNECT_TIMEOUT);
    Ok(config)
}

/// Connects and drives the connection on a task of its own, on the runtime that called (a
/// client lives on the runtime it was made on).
pub async fn connect(config: &Config, identity: &Identity) -> Result<Client, TargetError> {
    let (client, connection) =
        match tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls)).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(identity.connect_error(connect_failure(&e))),
            Err(_) => {
                return Err(identity
                    .connect_error(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs())));
            }
        };
    tokio::spawn(async move {
        // A connection error surfaces on the client's next call.
        let _ = connection.await;
    });
    Ok(client)
}

/// A failed connection in full (the error and each cause), with advice when nothing listens.
fn connect_failure(e: &tokio_postgres::Error) -> String {
    let mut text = message(e);
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    if text.contains("refused") {
        text.push_str(" — is the server running? (scripts/services start)");
    }
    text
}

/// The server's own words for an error when it sent any (`ERROR: relation … does not exist`),
/// else the client's.
pub fn message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
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
        config(&TargetSpec::parse(url).unwrap(), &["pgvector"]).unwrap()
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
        let bad = config(
            &TargetSpec::parse("postgres://u@h:notaport/db").unwrap(),
            &[],
        );
        let error = bad.unwrap_err().to_string();
        assert!(
            error.starts_with("`postgres://u@h:notaport/db` is not a usable target"),
            "{error}"
        );
    }
}
