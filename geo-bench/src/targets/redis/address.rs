//! A Redis or Valkey URL read: `redis://[user:password@]host:port[/db][?durability=…]` (and
//! `rediss://`, `valkey://`, `valkeys://`), credentials percent-decoded, fairbench's TLS
//! parameters left to common.

use std::sync::Arc;

use common::tls::rustls::ClientConfig;

/// What `?durability=` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Durable,
    Volatile,
}

/// Where and how to connect, from `redis://[user:password@]host:port[/db][?durability=…]`.
#[derive(Debug, Clone)]
pub struct Address {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
    pub db: u32,
    pub asked: Option<Asked>,
    /// The TLS configuration of `rediss://`; `None` = plaintext.
    pub tls: Option<Arc<ClientConfig>>,
}

/// `url` read as an address (fairbench's TLS parameters, read by common, are left out).
pub fn parse_url(url: &str) -> Result<Address, String> {
    let url = common::tls::strip_params(url);
    let rest = url
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or("a URL needs a scheme, like redis://127.0.0.1:6379")?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (userinfo, hostpart) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    let (hostport, db) = hostpart.split_once('/').unwrap_or((hostpart, ""));
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
    let port = port
        .parse()
        .map_err(|_| format!("`{port}` is not a port"))?;
    let db = if db.is_empty() {
        0
    } else {
        db.parse()
            .map_err(|_| format!("`{db}` is not a database number"))?
    };
    let (user, password) = match userinfo {
        None => (None, None),
        Some(u) => match u.split_once(':') {
            Some((user, pw)) => (
                (!user.is_empty()).then(|| common::urlparts::percent_decode(user)),
                Some(common::urlparts::percent_decode(pw)),
            ),
            None => (None, Some(common::urlparts::percent_decode(u))),
        },
    };
    let mut asked = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("durability", "durable")) => asked = Some(Asked::Durable),
            Some(("durability", "volatile")) => asked = Some(Asked::Volatile),
            _ => {
                return Err(format!(
                    "unknown parameter `{pair}`; the one parameter is durability=durable|volatile"
                ));
            }
        }
    }
    if host.is_empty() {
        return Err("the URL names no host".into());
    }
    Ok(Address {
        host: host.trim_matches(['[', ']']).to_owned(),
        port,
        user,
        password,
        db,
        asked,
        tls: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_carry_host_credentials_database_and_the_durability_asked_for() {
        let a = parse_url("redis://:s3cret@127.0.0.1:6380/2?durability=durable").unwrap();
        assert_eq!((a.host.as_str(), a.port, a.db), ("127.0.0.1", 6380, 2));
        assert_eq!((a.user, a.password.as_deref()), (None, Some("s3cret")));
        assert_eq!(a.asked, Some(Asked::Durable));
        let b = parse_url("valkey://127.0.0.1").unwrap();
        assert_eq!((b.port, b.asked), (6379, None));
        assert!(
            parse_url("redis://127.0.0.1:6379?durability=maybe")
                .unwrap_err()
                .contains("durability=durable|volatile")
        );
        assert!(parse_url("redis://127.0.0.1:port").is_err());
        let c = parse_url("rediss://u%40x:p%26w@127.0.0.1:6390?cacert=/ca.pem").unwrap();
        assert_eq!(
            (c.user.as_deref(), c.password.as_deref()),
            (Some("u@x"), Some("p&w"))
        );
        assert_eq!(c.port, 6390);
    }
}
