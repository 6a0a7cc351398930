//! TLS for MariaDB/MySQL: `ssl-mode` (DISABLED, PREFERRED, REQUIRED, VERIFY_CA,
//! VERIFY_IDENTITY) and `ssl-ca` read by common's [`TlsSettings`], removed from the URL
//! (mysql_async refuses parameters it does not know), and turned into mysql_async's `SslOpts`.
//! A probe handshake in the connect phase (same verification, MySQL's SSL request first) fails
//! fast with one line, records the version, cipher and handshake time mysql_async hides, and
//! pins a name the verified certificate carries for VERIFY_CA: mysql_async 0.37.1's
//! skip-domain-validation flag does not work with rustls 0.23 (blackbeam/mysql_async#404).

use common::tls::{Endpoint, Negotiated, Prelude, TlsError, TlsSettings, Verify};
use mysql_async::SslOpts;

use crate::targets::TargetError;

/// What the connect-phase probe found.
#[derive(Debug, Clone)]
pub(crate) struct MyTls {
    pub settings: TlsSettings,
    pub negotiated: Option<Negotiated>,
    /// Whether the probe ran (replicas read later are not probed: VERIFY_CA checks in full).
    probed: bool,
}

impl MyTls {
    /// Settings not probed: every connection verifies as much as they ask, or more.
    pub fn unprobed(settings: TlsSettings) -> MyTls {
        MyTls {
            settings,
            negotiated: None,
            probed: false,
        }
    }

    /// One probe handshake to `url`'s server: TLS when the mode asks for it, plaintext when
    /// the mode is DISABLED or PREFERRED and the server offers no TLS.
    pub async fn probe(settings: TlsSettings, url: &str) -> Result<MyTls, TargetError> {
        if !settings.uses_tls() {
            return Ok(MyTls::unprobed(settings));
        }
        let endpoint = Endpoint::from_url(url, Some(3306))?;
        let config = settings.client_config()?;
        let found = common::tls::probe(
            &endpoint,
            Prelude::Mysql,
            config,
            common::tls::HANDSHAKE_TIMEOUT,
        )
        .await;
        let negotiated = match found {
            Ok(negotiated) => Some(negotiated),
            Err(TlsError::NotOffered { .. }) if !settings.mode.requires_tls() => None,
            Err(e) => return Err(e.into()),
        };
        Ok(MyTls {
            settings,
            negotiated,
            probed: true,
        })
    }

    /// mysql_async's TLS options for every connection of the system; `None` = plaintext.
    pub fn ssl_opts(&self) -> Result<Option<SslOpts>, TargetError> {
        // Unprobed (a replica named later), a mode that only prefers TLS cannot know whether
        // the server offers it: plaintext, as against a server without TLS.
        let plaintext = !self.settings.uses_tls()
            || (self.probed && self.negotiated.is_none())
            || (!self.probed && !self.settings.mode.requires_tls());
        if plaintext {
            return Ok(None);
        }
        let unverified = SslOpts::default().with_danger_accept_invalid_certs(true);
        let roots = || -> Result<SslOpts, TargetError> {
            let certs = self.settings.trusted_certs()?;
            Ok(SslOpts::default()
                .with_root_certs(certs.iter().map(|c| c.to_vec().into()).collect())
                .with_disable_built_in_roots(true))
        };
        Ok(Some(match self.settings.verify() {
            Verify::Nothing => unverified,
            Verify::Full => roots()?,
            Verify::Chain if !self.probed => roots()?,
            Verify::Chain => {
                let pinned = self
                    .negotiated
                    .as_ref()
                    .and_then(|n| n.leaf_dns_names.first().cloned());
                match pinned {
                    // The chain and this name, on every connection.
                    Some(name) => roots()?.with_danger_tls_hostname_override(Some(name)),
                    // No DNS name to pin: the probe verified the chain; the workers do not.
                    None => unverified,
                }
            }
        }))
    }
}
