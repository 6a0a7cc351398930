//! TLS for every client of every tool, one stack: rustls 0.23 with the ring provider. A target
//! URL's TLS settings are parsed once here ([`TlsSettings`]: libpq's `sslmode` meanings, MySQL's
//! `ssl-mode` names mapped onto them, a CA file, the schemes that imply TLS); one
//! [`rustls::ClientConfig`] is built per system from them (full verification, chain only, or
//! the loud `--insecure-skip-verify` verifier that still checks handshake signatures); a
//! client's TLS failure becomes one line ("the certificate of HOST did not verify: …"); a probe
//! handshake records the negotiated version and cipher suite for clients that hide their
//! connection; and [`record`] writes what a system's report says about its TLS.
//!
//! ```text
//! TlsSettings::from_url(url, insecure)      mode, CA file, host — bad input fails here
//!   → settings.client_config()              Arc<ClientConfig>, shared by every worker
//!   → the client connects (its own code)    errors through tls::explain → one line
//!   → probe(&endpoint, prelude, config)     version, cipher, handshake time (connect phase)
//!   → record(&mut system_info, …)           verified keys and the insecure label
//! ```

mod ca;
mod config;
mod error;
mod mode;
#[cfg(feature = "postgres")]
pub mod postgres;
mod probe;
mod record;
mod settings;
mod verifier;

pub use ca::{load_ca, roots_from_file, system_root_certs, system_roots};
pub use config::client_config;
pub use error::{NAME_THE_CA, TlsError, explain, explain_text, find_rustls};
pub use mode::{Mode, Verify};
pub use probe::{
    HANDSHAKE_TIMEOUT, Negotiated, Prelude, handshake, negotiated, plaintext_postgres, probe,
};
pub use record::{TLS_CA, TLS_CIPHER, TLS_HANDSHAKE_MS, TLS_VERIFICATION, TLS_VERSION, record};
pub use settings::{CA_PARAMS, Endpoint, INSECURE_LABEL, MODE_PARAMS, TlsSettings, strip_params};
pub use verifier::LaxVerifier;

/// The TLS crates, re-exported so a tool that holds its own stream (the RESP and MQTT clients)
/// needs no dependency of its own and cannot pick another version.
pub use rustls;
pub use tokio_rustls;
/// A client-side TLS stream over `S`, as [`handshake`] hands it back.
pub use tokio_rustls::client::TlsStream;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The one crypto provider of the workspace: ring (mongodb and tonic hard-code it).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Installs ring as the process-wide default provider, once; later calls do nothing. Clients
/// that call `ClientConfig::builder()` themselves (mysql_async, reqwest without a provider)
/// panic without one when more than one provider is compiled in (scylla brings aws-lc-rs).
/// [`crate::run::block_on`] and [`crate::testing::block_on`] call it, so every tool's run and
/// every test client has it; anything else that makes a client first calls it too.
pub fn install_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first (by a client library): keep it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests;
