//! TLS for CQL: `sslmode=` and `cacert=` (or any CA parameter common reads) in the URL,
//! `--insecure-skip-verify`, one `rustls::ClientConfig` from common (the ring provider named
//! explicitly) handed to the driver as its `TlsContext::Rustls023`. A probe handshake in the
//! connect phase fails fast in one line and records the version, cipher and handshake time the
//! driver hides. Cassandra speaks TLS from the first byte on its TLS port (`Prelude::Direct`).
//!
//! The driver checks every node's certificate against the IP address it connects to (it knows
//! nodes by address, from `system.local` and `system.peers`): under `verify-full` a node's
//! certificate needs an IP SAN; the probe checks the host the URL names.
//!
//! Built only with the `cql-tls` feature (on by default): the driver's `rustls-023` feature
//! enables rustls's default features, which compile the aws-lc-rs provider (a C build) beside
//! ring. Without it a URL that asks for TLS is refused in one line.

use std::sync::Arc;

use common::options::TargetSpec;
#[cfg(feature = "cql-tls")]
use common::tls::CA_PARAMS;
use common::tls::rustls::ClientConfig;
use scylla::client::session_builder::SessionBuilder;

use crate::targets::{Reach, TargetError, TlsState};

/// The system's TLS, probed, and the configuration every session connects with (`None` =
/// plaintext).
#[cfg(feature = "cql-tls")]
pub(super) async fn open(
    spec: &TargetSpec,
    reach: &Reach,
) -> Result<(TlsState, Option<Arc<ClientConfig>>), TargetError> {
    let settings = reach.tls(spec)?;
    if !settings.uses_tls() && common::urlparts::param(&spec.url, CA_PARAMS).is_some() {
        // cql:// is plaintext unless the mode says otherwise: a CA file alone is a user who
        // meant TLS, and nothing is connected in plaintext behind their back.
        return Err(TargetError::Url {
            url: spec.url_redacted(),
            message: format!(
                "the URL names a CA file, but {} uses no TLS (cql:// is plaintext unless \
                 sslmode= asks for TLS); add sslmode=verify-full",
                settings.mode_source
            ),
        });
    }
    let config = match settings.uses_tls() {
        true => Some(settings.client_config()?),
        false => None,
    };
    let tls = TlsState::probe(settings, &spec.url, Some(super::DEFAULT_PORT)).await?;
    Ok((tls, config))
}

/// Refuses a URL that asks for TLS in one line: this build has no TLS for CQL.
#[cfg(not(feature = "cql-tls"))]
pub(super) async fn open(
    spec: &TargetSpec,
    reach: &Reach,
) -> Result<(TlsState, Option<Arc<ClientConfig>>), TargetError> {
    reach.refuse_tls(spec, NOT_BUILT)?;
    let tls = TlsState {
        settings: reach.tls(spec)?,
        negotiated: None,
    };
    Ok((tls, None))
}

#[cfg(not(feature = "cql-tls"))]
const NOT_BUILT: &str = "TLS for CQL is not in this build: rebuild sql-bench with `--features \
     cql-tls` (off here because it compiles the driver's rustls feature, which also builds the \
     aws-lc-rs provider, a C library)";

/// `builder` connecting over TLS with `config`.
#[cfg(feature = "cql-tls")]
pub(super) fn with_tls(
    builder: SessionBuilder,
    config: Option<&Arc<ClientConfig>>,
) -> SessionBuilder {
    builder.tls_context(config.cloned())
}

/// `builder` unchanged: [`open`] refused every URL that asks for TLS.
#[cfg(not(feature = "cql-tls"))]
pub(super) fn with_tls(
    builder: SessionBuilder,
    config: Option<&Arc<ClientConfig>>,
) -> SessionBuilder {
    debug_assert!(config.is_none());
    builder
}

/// A failed session start in one line: the TLS reason when there is one (a node whose
/// certificate has no IP SAN for the address the driver connects to, under `verify-full`).
pub(super) fn explain(error: &(dyn std::error::Error + 'static), host: &str) -> Option<String> {
    let found = common::tls::explain(error, host)
        .or_else(|| common::tls::explain_text(&error.to_string(), host))?;
    Some(format!(
        "{found} (the CQL driver checks each node's certificate against the IP address it \
         connects to)"
    ))
}

#[cfg(all(test, feature = "cql-tls"))]
mod tests {
    use super::*;
    use common::tls::{Mode, TlsSettings, Verify};

    fn settings(url: &str, insecure: bool) -> TlsSettings {
        TlsSettings::from_url(url, insecure).unwrap()
    }

    #[test]
    fn a_cql_url_names_its_tls_as_every_other_target() {
        let ca = format!(
            "{}/../common/testdata/tls/ca.pem",
            env!("CARGO_MANIFEST_DIR")
        );
        let plain = settings("cql://127.0.0.1:9042", false);
        assert!(!plain.uses_tls());
        let full = settings(
            &format!("cql://127.0.0.1:9142?sslmode=verify-full&cacert={ca}"),
            false,
        );
        assert_eq!((full.mode, full.verify()), (Mode::VerifyFull, Verify::Full));
        assert!(full.ca_file.is_some());
        let chain = settings(
            &format!("cassandra://h?sslmode=verify-ca&cacert={ca}"),
            false,
        );
        assert_eq!(chain.verify(), Verify::Chain);
        let skipped = settings("cql://h?sslmode=verify-full", true);
        assert_eq!(skipped.verify(), Verify::Nothing);
        assert_eq!(skipped.verification(), "none (--insecure-skip-verify)");
    }

    #[test]
    fn a_certificate_error_inside_the_drivers_error_is_one_line() {
        let io = std::io::Error::other(common::tls::rustls::Error::InvalidCertificate(
            common::tls::rustls::CertificateError::UnknownIssuer,
        ));
        let line = explain(&io, "127.0.0.1").unwrap();
        assert!(
            line.contains("the certificate of 127.0.0.1 did not verify"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        let other = std::io::Error::other("connection refused");
        assert_eq!(explain(&other, "127.0.0.1"), None);
    }
}
