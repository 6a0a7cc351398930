//! What a system's report says about its TLS: keys of `SystemInfo.verified` (read from the
//! negotiated connection, not from the URL) and the `insecure-skip-verify` label, which
//! [`crate::results::Report::upsert_cell`] copies onto every cell of the system.

use super::probe::Negotiated;
use super::settings::{INSECURE_LABEL, TlsSettings};
use crate::results::SystemInfo;

/// `TLSv1.3`, `TLSv1.2`, or `none (plaintext)`.
pub const TLS_VERSION: &str = "tls_version";
/// The IANA name of the negotiated suite (`TLS_AES_256_GCM_SHA384`).
pub const TLS_CIPHER: &str = "tls_cipher";
/// How the certificate was checked: `verify-full`, `verify-ca`, `none (sslmode=require)`,
/// `none (--insecure-skip-verify)`.
pub const TLS_VERIFICATION: &str = "tls_verification";
/// The roots a verifying connection trusted: the CA file, or `the system's roots`.
pub const TLS_CA: &str = "tls_ca";
/// The TLS handshake of the connect-phase connection (after TCP and any prelude), in ms.
pub const TLS_HANDSHAKE_MS: &str = "tls_handshake_ms";

/// Records `negotiated` (the system's TLS connection), or a plaintext connection when `None`,
/// with `settings`' check; labels the system when `--insecure-skip-verify` skipped the check.
pub fn record(info: &mut SystemInfo, settings: &TlsSettings, negotiated: Option<&Negotiated>) {
    let verified = &mut info.verified;
    let Some(negotiated) = negotiated else {
        verified.insert(TLS_VERSION.into(), "none (plaintext)".into());
        return;
    };
    verified.insert(TLS_VERSION.into(), negotiated.version.clone());
    verified.insert(TLS_CIPHER.into(), negotiated.cipher.clone());
    verified.insert(TLS_VERIFICATION.into(), settings.verification());
    if settings.verify() != super::Verify::Nothing {
        verified.insert(TLS_CA.into(), settings.roots_described());
    }
    verified.insert(
        TLS_HANDSHAKE_MS.into(),
        format!("{:.1}", negotiated.handshake_ns as f64 / 1e6),
    );
    if settings.insecure_skip_verify && !info.labels.iter().any(|l| l == INSECURE_LABEL) {
        info.labels.push(INSECURE_LABEL.into());
    }
}
