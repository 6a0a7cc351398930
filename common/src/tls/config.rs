//! One `rustls::ClientConfig` per verification, always with the ring provider named
//! explicitly (so it never depends on which providers the build compiled in).

use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

use super::error::TlsError;
use super::mode::Verify;
use super::verifier::LaxVerifier;

/// A client configuration that checks the server as `verify` says against `roots` (unused for
/// [`Verify::Nothing`]); TLS 1.2 and 1.3, rustls's safe defaults, no client certificate, no
/// ALPN (a client that needs one, such as HTTP/2 or PostgreSQL's direct TLS, sets
/// `alpn_protocols` on its copy).
pub fn client_config(verify: Verify, roots: RootCertStore) -> Result<ClientConfig, TlsError> {
    let provider = super::provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Other {
            host: String::new(),
            message: format!("the TLS provider offers no safe protocol version: {e}"),
        })?;
    Ok(match verify {
        Verify::Full => builder.with_root_certificates(roots).with_no_client_auth(),
        Verify::Chain => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(LaxVerifier::chain_only(
                Arc::new(roots),
                provider,
            )))
            .with_no_client_auth(),
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(LaxVerifier::insecure_skip_verify(provider)))
            .with_no_client_auth(),
    })
}
