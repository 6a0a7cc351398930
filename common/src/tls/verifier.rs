//! The certificate verifier rustls does not ship: chain only (`verify-ca`), or the
//! `--insecure-skip-verify` one, which accepts any certificate; both still check the handshake
//! signatures, so the peer must hold the key of the certificate it sent.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// A verifier rustls does not ship. `verify-ca` ([`LaxVerifier::chain_only`]): the chain must
/// reach one of the roots (and be meant for a server), and the name is not checked; this is
/// exactly the first half of rustls's own `WebPkiServerVerifier`. `--insecure-skip-verify`
/// ([`LaxVerifier::insecure_skip_verify`]): any certificate. Both verify the handshake
/// signatures, so the peer must hold the key of the certificate it sent (what mongodb's
/// `tlsAllowInvalidCertificates` does; ureq's `disable_verification` skips them too, which is
/// weaker).
#[derive(Debug)]
pub struct LaxVerifier {
    /// The roots the chain must reach; `None` accepts any certificate.
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl LaxVerifier {
    /// `verify-ca`: the chain against `roots`, not the name.
    pub fn chain_only(roots: Arc<RootCertStore>, provider: Arc<CryptoProvider>) -> LaxVerifier {
        LaxVerifier {
            roots: Some(roots),
            provider,
        }
    }

    /// `--insecure-skip-verify`: any certificate, its handshake signatures still verified.
    pub fn insecure_skip_verify(provider: Arc<CryptoProvider>) -> LaxVerifier {
        LaxVerifier {
            roots: None,
            provider,
        }
    }
}

impl ServerCertVerifier for LaxVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
