//! The certificates a connection trusts: a CA file in PEM, checked with one clear line for a
//! file that is missing or not PEM, or the system's roots.

use std::path::Path;
use std::sync::OnceLock;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::{self, PemObject};

use super::error::TlsError;

/// Every certificate in the PEM file at `path`; one line for a file that is missing,
/// unreadable, not PEM or holds no certificate. Validate a CA file with this even for clients
/// that read the path themselves: mongodb turns a non-PEM file into an empty store and then
/// fails every handshake with `UnknownIssuer`, which points the user the wrong way.
pub fn load_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let fail = |message: String| TlsError::CaFile {
        path: path.to_owned(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(format!("not a PEM file ({})", pem_error(&e))))?;
    if certs.is_empty() {
        // pem_slice_iter yields nothing, not an error, for text that is not PEM at all.
        return Err(fail(
            "no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certs)
}

/// pki-types prints some of its errors as byte lists; these are the words for them.
fn pem_error(error: &pem::Error) -> String {
    match error {
        pem::Error::MissingSectionEnd { .. } => "a section has no -----END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a -----BEGIN line is malformed".into(),
        pem::Error::Base64Decode(_) => "a section is not valid base64".into(),
        other => other.to_string(),
    }
}

/// A root store of `certs`; a certificate that cannot serve as a trust anchor is one line.
pub fn roots_from_certs(certs: &[CertificateDer<'static>]) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certs {
        store.add(cert.clone()).map_err(|e| TlsError::CaFile {
            path: "(CA file)".into(),
            message: format!("a certificate in it cannot be a trust anchor: {e}"),
        })?;
    }
    Ok(store)
}

/// [`load_ca`], then a root store of its certificates, with the file's name in any error.
pub fn roots_from_file(path: &Path) -> Result<RootCertStore, TlsError> {
    let certs = load_ca(path)?;
    roots_from_certs(&certs).map_err(|e| match e {
        TlsError::CaFile { message, .. } => TlsError::CaFile {
            path: path.to_owned(),
            message,
        },
        other => other,
    })
}

/// The system's trusted certificates (`SSL_CERT_FILE` / `SSL_CERT_DIR` when set, else the
/// platform's store), read once per process; as DER, for clients that take certificates
/// rather than a `ClientConfig` (mysql_async, ureq), so they trust what every other client does.
pub fn system_root_certs() -> Result<Vec<CertificateDer<'static>>, TlsError> {
    static CERTS: OnceLock<Result<Vec<CertificateDer<'static>>, String>> = OnceLock::new();
    let certs = CERTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            return Err(found
                .errors
                .first()
                .map_or("none found".to_owned(), |e| e.to_string()));
        }
        Ok(found.certs)
    });
    certs.clone().map_err(|why| TlsError::NoSystemRoots { why })
}

/// The system's trusted roots as a store ([`system_root_certs`]).
pub fn system_roots() -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(system_root_certs()?);
    if added == 0 {
        return Err(TlsError::NoSystemRoots {
            why: "none of them parses as a trust anchor".into(),
        });
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_missing_or_non_pem_file_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let error = load_ca(&missing).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "CA file {}: No such file or directory (os error 2)",
                missing.display()
            )
        );
        let text = write(dir.path(), "hostname", "myhost\n");
        let error = load_ca(&text).unwrap_err().to_string();
        assert!(
            error.ends_with("no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)"),
            "{error}"
        );
        let cut = write(dir.path(), "cut.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n");
        let error = load_ca(&cut).unwrap_err().to_string();
        assert!(
            error.ends_with("not a PEM file (a section has no -----END line)"),
            "{error}"
        );
        assert!(!error.contains('\n'));
        let key_only = write(
            dir.path(),
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        let error = load_ca(&key_only).unwrap_err().to_string();
        assert!(error.contains("no PEM certificate in it"), "{error}");
    }

    #[test]
    fn a_pem_that_is_no_certificate_is_refused_as_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let junk = write(
            dir.path(),
            "junk.pem",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        );
        let error = roots_from_file(&junk).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "CA file {}: a certificate in it cannot be a trust anchor",
                junk.display()
            )),
            "{error}"
        );
    }

    #[test]
    fn the_system_has_roots() {
        let roots = system_roots().expect("this machine has CA certificates");
        assert!(!roots.is_empty());
    }
}
