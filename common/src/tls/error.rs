//! Why TLS failed, in one line a user can act on: the rustls error found anywhere in a
//! client's error chain (tokio-postgres, mysql_async, reqwest, tokio-rustls and scylla keep
//! it typed; mongodb flattens it into text) turned into "the certificate of HOST did not
//! verify: …", a server's alert, or a port that does not speak TLS.

use std::error::Error as StdError;
use std::path::PathBuf;

use rustls::CertificateError;

use crate::target::TargetError;

/// Where a CA can be named in a URL, for the hints (a client that takes no CA file replaces
/// it with its own).
pub const NAME_THE_CA: &str = "name the CA that signed it in the URL (sslrootcert=, ssl-ca=, \
                           tlsCAFile= or cacert=), or use --insecure-skip-verify";

#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    #[error("`{url}` is not a usable target: {message}")]
    Url { url: String, message: String },
    #[error("CA file {}: {message}", path.display())]
    CaFile { path: PathBuf, message: String },
    #[error(
        "no trusted CA certificates on this system ({why}); name a CA file in the URL \
         (sslrootcert=, ssl-ca=, tlsCAFile= or cacert=)"
    )]
    NoSystemRoots { why: String },
    #[error("the certificate of {host} did not verify: {why}")]
    Certificate { host: String, why: String },
    #[error("{host} ended the TLS handshake (alert {alert}){hint}")]
    Alert {
        host: String,
        alert: String,
        hint: String,
    },
    #[error(
        "no TLS answer from {endpoint} within {seconds}s — is this a TLS port? (a plaintext \
         server waits for input a TLS client never sends)"
    )]
    NoAnswer { endpoint: String, seconds: u64 },
    #[error(
        "{endpoint} closed the connection during the TLS handshake — is this a TLS port? \
         ({message})"
    )]
    Closed { endpoint: String, message: String },
    #[error("{endpoint} does not accept TLS: {why}")]
    NotOffered { endpoint: String, why: String },
    #[error("{endpoint} refused a plaintext connection: {message}{hint}")]
    PlaintextRefused {
        endpoint: String,
        message: String,
        hint: String,
    },
    #[error("cannot reach {endpoint}: {message}")]
    Connect { endpoint: String, message: String },
    #[error("TLS with {host} failed: {message}")]
    Other { host: String, message: String },
}

impl From<TlsError> for TargetError {
    fn from(error: TlsError) -> TargetError {
        TargetError::Other(error.to_string())
    }
}

/// The rustls error somewhere in an error chain. `io::Error::source()` skips its payload, so
/// every `io::Error` is looked inside (hyper-rustls even nests one in another).
pub fn find_rustls<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            let inner: &(dyn StdError + 'static) = inner;
            if let Some(found) = find_rustls(inner) {
                return Some(found);
            }
        }
        next = err.source();
    }
    None
}

/// The one line for a client's error when TLS is its cause (`None` when it is not): `host` is
/// the host the client connected to. A [`TlsError`] already in the chain (from common's own
/// connectors, such as [`super::postgres`]) is handed back as it is.
pub fn explain(error: &(dyn StdError + 'static), host: &str) -> Option<TlsError> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(err) = next {
        if let Some(own) = err.downcast_ref::<TlsError>() {
            return Some(own.clone());
        }
        next = err.source();
    }
    find_rustls(error).map(|e| from_rustls(e, host))
}

/// A rustls error as one line.
pub(crate) fn from_rustls(error: &rustls::Error, host: &str) -> TlsError {
    let host = host.to_owned();
    match error {
        rustls::Error::InvalidCertificate(cert) => TlsError::Certificate {
            why: certificate_why(cert, &host),
            host,
        },
        rustls::Error::AlertReceived(alert) => {
            let alert = format!("{alert:?}");
            TlsError::Alert {
                hint: alert_hint(&alert),
                alert,
                host,
            }
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            TlsError::Other {
                message: format!(
                    "{error} — the server does not answer in TLS: is this a TLS port?"
                ),
                host,
            }
        }
        other => TlsError::Other {
            message: other.to_string(),
            host,
        },
    }
}

fn alert_hint(alert: &str) -> String {
    match alert {
        "CertificateRequired" => {
            " — the server wants a client certificate, which fairbench does not send (Redis: \
             tls-auth-clients no)"
                .into()
        }
        "ProtocolVersion" => {
            " — no TLS version both sides accept (rustls speaks 1.2 and 1.3)".into()
        }
        _ => String::new(),
    }
}

fn certificate_why(error: &CertificateError, host: &str) -> String {
    match error {
        CertificateError::UnknownIssuer => {
            format!("it is not signed by a trusted CA (UnknownIssuer); {NAME_THE_CA}")
        }
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => name_mismatch(expected.to_str().as_ref(), &presented.join(", ")),
        CertificateError::NotValidForName => name_mismatch(host, "other names"),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            format!("it has expired ({error})")
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            format!("it is not valid yet ({error})")
        }
        CertificateError::Revoked => "it has been revoked (Revoked)".into(),
        CertificateError::BadSignature => "a signature does not verify (BadSignature): the \
             certificate is not signed by its issuer's key, or the server does not hold the key \
             of the certificate it sent"
            .into(),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            format!("it is not meant for a TLS server ({error})")
        }
        other => format!("{other} ({other:?})"),
    }
}

fn name_mismatch(expected: &str, presented: &str) -> String {
    format!(
        "it is not valid for {expected} (it names {presented}) (NotValidForName); connect by a \
         name it lists, or check the chain only with sslmode=verify-ca (rustls never falls back \
         to the subject CN)"
    )
}

/// [`explain`] for a client that flattens the rustls error into text (mongodb:
/// `… I/O error: invalid peer certificate: UnknownIssuer …`).
pub fn explain_text(text: &str, host: &str) -> Option<TlsError> {
    let host = host.to_owned();
    if let Some(at) = text.find("invalid peer certificate: ") {
        let rest = &text[at + "invalid peer certificate: ".len()..];
        let cause = rest.split([',', '\n']).next().unwrap_or(rest).trim();
        let why = if cause.starts_with("UnknownIssuer") {
            certificate_why(&CertificateError::UnknownIssuer, &host)
        } else if cause.starts_with("certificate not valid for name") {
            let presented = cause
                .split_once("only valid for ")
                .map_or("other names", |(_, names)| names);
            name_mismatch(&host, presented)
        } else {
            cause.to_owned()
        };
        return Some(TlsError::Certificate { host, why });
    }
    let at = text.find("received fatal alert: ")?;
    let alert = text[at + "received fatal alert: ".len()..]
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_owned();
    Some(TlsError::Alert {
        hint: alert_hint(&alert),
        alert,
        host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_wrapped(error: rustls::Error) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, error)
    }

    #[derive(Debug, thiserror::Error)]
    #[error("error performing TLS handshake")]
    struct ClientError(#[source] std::io::Error);

    #[test]
    fn the_rustls_error_is_found_inside_io_errors_and_chains() {
        let unknown = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let nested = std::io::Error::other(io_wrapped(unknown.clone()));
        let chain = ClientError(nested);
        assert_eq!(find_rustls(&chain), Some(&unknown));
        let line = explain(&chain, "db.example.com").unwrap().to_string();
        assert!(
            line.starts_with(
                "the certificate of db.example.com did not verify: it is not signed by a trusted CA (UnknownIssuer); name the CA"
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(explain(&plain, "h").is_none());
    }

    #[test]
    fn a_name_mismatch_says_which_names_the_certificate_has() {
        let error = rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            presented: vec!["DnsName(\"other.example\")".into()],
        });
        let line = from_rustls(&error, "127.0.0.1").to_string();
        assert!(
            line.starts_with(
                "the certificate of 127.0.0.1 did not verify: it is not valid for 127.0.0.1 (it names DnsName(\"other.example\")) (NotValidForName)"
            ),
            "{line}"
        );
        assert!(line.contains("sslmode=verify-ca"), "{line}");
    }

    #[test]
    fn alerts_and_other_causes_read_as_one_line() {
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
        let line = from_rustls(&alert, "127.0.0.1").to_string();
        assert!(line.starts_with("127.0.0.1 ended the TLS handshake (alert CertificateRequired) — the server wants a client certificate"), "{line}");
        let expired = rustls::Error::InvalidCertificate(CertificateError::Expired);
        assert!(
            from_rustls(&expired, "h")
                .to_string()
                .contains("it has expired")
        );
    }

    #[test]
    fn flattened_texts_are_explained_too() {
        let mongo = "Kind: Server selection timeout: No available servers. Topology: { Error: Kind: I/O error: invalid peer certificate: UnknownIssuer, labels: {} }";
        let line = explain_text(mongo, "127.0.0.1").unwrap().to_string();
        assert!(
            line.starts_with(
                "the certificate of 127.0.0.1 did not verify: it is not signed by a trusted CA"
            ),
            "{line}"
        );
        let name = "invalid peer certificate: certificate not valid for name \"127.0.0.1\"; certificate is only valid for DnsName(\"other.example\")";
        let line = explain_text(name, "127.0.0.1").unwrap().to_string();
        assert!(
            line.contains("(it names DnsName(\"other.example\"))"),
            "{line}"
        );
        assert!(explain_text("connection refused", "h").is_none());
        let target: TargetError = TlsError::NoAnswer {
            endpoint: "h:1".into(),
            seconds: 5,
        }
        .into();
        assert!(
            target
                .to_string()
                .starts_with("no TLS answer from h:1 within 5s")
        );
    }
}
