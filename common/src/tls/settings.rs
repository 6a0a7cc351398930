//! The TLS settings a target URL carries, parsed once for every client: the mode (`sslmode=`,
//! `ssl-mode=`, MongoDB's `tls=true`, or what the scheme implies), the CA file (`sslrootcert=`,
//! `ssl-ca=`, `tlsCAFile=`, `cacert=`), the host the certificate must name, and
//! `--insecure-skip-verify`; and the `ClientConfig` they make.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};

use super::ca::{load_ca, roots_from_certs, system_root_certs, system_roots};
use super::config::client_config;
use super::error::TlsError;
use super::mode::{Mode, Verify};
use crate::urlparts;

/// Parameters (normalized) that set the mode: `sslmode=` (libpq), `ssl-mode=` / `ssl_mode=` /
/// `sslMode=` (MySQL).
pub const MODE_PARAMS: &[&str] = &["sslmode"];
/// Parameters (normalized) that name a CA file: `sslrootcert=` (libpq), `ssl-ca=` (MySQL),
/// `tlsCAFile=` (MongoDB), `cacert=` (HTTP, RESP, MQTT, CQL).
pub const CA_PARAMS: &[&str] = &["sslrootcert", "sslca", "tlscafile", "cacert"];
/// What [`strip_params`] removes: fairbench's own spellings. MongoDB's `tls=`, `tlsCAFile=` and
/// `tlsAllowInvalidCertificates=` stay, because its driver reads them itself.
const OWN_PARAMS: &[&str] = &["sslmode", "sslrootcert", "sslca", "cacert"];
/// MongoDB's switches, read for the record and left for its driver.
const TLS_SWITCHES: &[&str] = &["tls", "ssl"];
const TLS_UNVERIFIED: &[&str] = &["tlsallowinvalidcertificates", "tlsinsecure"];

/// Schemes that always mean TLS, and the plaintext scheme each stands beside.
const TLS_SCHEMES: &[(&str, &str)] = &[
    ("https", "http"),
    ("rediss", "redis"),
    ("valkeys", "valkey"),
    ("mqtts", "mqtt"),
    ("wss", "ws"),
    ("ssl", "tcp"),
    ("mongodb+srv", "mongodb"),
];
/// Protocols that negotiate TLS on their own port; their clients default to `prefer`.
const NEGOTIATED: &[&str] = &["postgres", "postgresql", "mysql", "mariadb"];

/// `url` without fairbench's own TLS parameters, for clients that refuse parameters they do
/// not know (tokio-postgres rejects `sslrootcert`, mysql_async `ssl-mode`).
pub fn strip_params(url: &str) -> String {
    urlparts::without_params(url, OWN_PARAMS)
}

/// The label of every cell of a system whose certificate `--insecure-skip-verify` left
/// unchecked ([`crate::results::Report::upsert_cell`] copies it from the system).
pub const INSECURE_LABEL: &str = "insecure-skip-verify";

/// Where a server listens, as a URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// A name or an IP address (without the brackets of an IPv6 literal).
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// The first host of `url` and its port, or the scheme's usual port, or `default_port`.
    pub fn from_url(url: &str, default_port: Option<u16>) -> Result<Endpoint, TlsError> {
        let bad = |message: &str| TlsError::Url {
            url: crate::redact::redact_url(url),
            message: message.to_owned(),
        };
        let (host, port) = urlparts::host_port(url).ok_or_else(|| bad("it names no host"))?;
        if host.is_empty() {
            return Err(bad("it names no host"));
        }
        let scheme = urlparts::scheme(url).unwrap_or_default();
        let port = port
            .or(default_port)
            .or_else(|| usual_port(&scheme))
            .ok_or_else(|| bad("it names no port"))?;
        Ok(Endpoint { host, port })
    }

    /// The name a certificate must carry: an IP address becomes an IP SAN check.
    pub fn server_name(&self) -> Result<ServerName<'static>, TlsError> {
        ServerName::try_from(self.host.clone()).map_err(|_| TlsError::Url {
            url: self.to_string(),
            message: format!("`{}` is neither a host name nor an IP address", self.host),
        })
    }
}

impl fmt::Display for Endpoint {
    /// `host:port` (`[v6]:port`); port 0 (unknown) prints as the host alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.port == 0 {
            f.write_str(&self.host)
        } else if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The port a scheme means when the URL names none.
fn usual_port(scheme: &str) -> Option<u16> {
    Some(match scheme {
        "https" | "wss" => 443,
        "http" | "ws" => 80,
        "mqtts" => 8883,
        "mqtt" => 1883,
        "redis" | "rediss" | "valkey" | "valkeys" => 6379,
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        "mongodb" => 27017,
        "cql" | "cassandra" => 9042,
        "couchdb" => 5984,
        "qdrant" => 6334,
        "chroma" => 8000,
        _ => return None,
    })
}

/// A target's TLS, as its URL and `--insecure-skip-verify` ask for it.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub mode: Mode,
    /// What set the mode, for the report: `sslmode=verify-full`, `https://`, `the default`.
    pub mode_source: String,
    /// The CA file named in the URL; `None` = the system's roots.
    pub ca_file: Option<PathBuf>,
    ca_certs: Vec<CertificateDer<'static>>,
    /// The host the certificate must name (`verify-full`), and every message's subject.
    pub host: String,
    pub insecure_skip_verify: bool,
}

impl TlsSettings {
    /// Reads `url`'s TLS settings. Bad input fails here in one line: an unknown mode, a mode
    /// the scheme contradicts, a CA file that is missing or not PEM.
    pub fn from_url(url: &str, insecure_skip_verify: bool) -> Result<TlsSettings, TlsError> {
        let scheme = urlparts::scheme(url).unwrap_or_default();
        let host = urlparts::host_port(url).map(|(h, _)| h).unwrap_or_default();
        let (mut mode, mut mode_source) = scheme_mode(&scheme);
        if let Some((key, value)) = urlparts::param(url, TLS_SWITCHES) {
            match value.to_ascii_lowercase().as_str() {
                "true" | "1" => mode = Mode::VerifyFull,
                "false" | "0" => mode = Mode::Disable,
                _ => return Err(bad_value(url, &key, &value, "true or false")),
            }
            mode_source = format!("{key}={value}");
        }
        if let Some((key, value)) = urlparts::param(url, TLS_UNVERIFIED)
            && value.eq_ignore_ascii_case("true")
        {
            mode = Mode::Require;
            mode_source = format!("{key}={value}");
        }
        if let Some((key, value)) = urlparts::param(url, MODE_PARAMS) {
            mode =
                Mode::parse(&value).ok_or_else(|| bad_value(url, &key, &value, Mode::CHOICES))?;
            mode_source = format!("{key}={value}");
            check_scheme_allows(url, &scheme, mode, &mode_source)?;
        }
        let mut settings = TlsSettings {
            mode,
            mode_source,
            ca_file: None,
            ca_certs: Vec::new(),
            host,
            insecure_skip_verify,
        };
        if let Some((key, value)) = urlparts::param(url, CA_PARAMS) {
            settings.name_ca(url, &key, &value)?;
        }
        Ok(settings)
    }

    /// A system with no network connection of its own (embedded): no TLS.
    pub fn none() -> TlsSettings {
        TlsSettings {
            mode: Mode::Disable,
            mode_source: "no network connection".into(),
            ca_file: None,
            ca_certs: Vec::new(),
            host: String::new(),
            insecure_skip_verify: false,
        }
    }

    fn name_ca(&mut self, url: &str, key: &str, value: &str) -> Result<(), TlsError> {
        let bad = |message: String| TlsError::Url {
            url: crate::redact::redact_url(url),
            message,
        };
        if value == "system" {
            // libpq 16's meaning: the system's roots, and nothing weaker than verify-full.
            if urlparts::param(url, MODE_PARAMS).is_some() && self.mode != Mode::VerifyFull {
                return Err(bad(format!(
                    "{key}=system needs verify-full ({} is weaker)",
                    self.mode_source
                )));
            }
            let scheme = urlparts::scheme(url).unwrap_or_default();
            check_scheme_allows(url, &scheme, Mode::VerifyFull, &format!("{key}=system"))?;
            self.mode = Mode::VerifyFull;
            self.mode_source = format!("{key}=system");
            return Ok(());
        }
        if !self.mode.may_use_tls() {
            // libpq ignores the CA file under sslmode=disable; a plaintext scheme with a TLS twin
            // and a CA file is a user who meant the twin.
            let scheme = urlparts::scheme(url).unwrap_or_default();
            return match TLS_SCHEMES.iter().find(|(_, plain)| *plain == scheme) {
                Some((tls, _)) => Err(bad(format!(
                    "{key}= names a CA file, but {scheme}:// uses no TLS (use {tls}://)"
                ))),
                None => Ok(()),
            };
        }
        let path = PathBuf::from(value);
        self.ca_certs = load_ca(&path)?;
        self.ca_file = Some(path);
        Ok(())
    }

    /// Whether a connection may use TLS.
    pub fn uses_tls(&self) -> bool {
        self.mode.may_use_tls()
    }

    /// How a TLS connection checks the certificate: `--insecure-skip-verify` checks nothing;
    /// `require` with a CA file named checks the chain (libpq's rule).
    pub fn verify(&self) -> Verify {
        if self.insecure_skip_verify {
            return Verify::Nothing;
        }
        match self.mode {
            Mode::VerifyFull => Verify::Full,
            Mode::VerifyCa => Verify::Chain,
            Mode::Require if self.ca_file.is_some() => Verify::Chain,
            _ => Verify::Nothing,
        }
    }

    /// What the report says of the check: `verify-full`, `verify-ca`,
    /// `none (--insecure-skip-verify)`, `none (sslmode=require)`.
    pub fn verification(&self) -> String {
        match self.verify() {
            Verify::Nothing if self.insecure_skip_verify => "none (--insecure-skip-verify)".into(),
            Verify::Nothing => format!("none ({})", self.mode_source),
            verify => verify.as_str().to_owned(),
        }
    }

    /// The roots a verifying connection trusts, for the report.
    pub fn roots_described(&self) -> String {
        match &self.ca_file {
            Some(path) => path.display().to_string(),
            None => "the system's roots".into(),
        }
    }

    /// The certificates a verifying connection trusts: the CA file's, or the system's (for
    /// clients that take certificates, not a `ClientConfig`: mysql_async, ureq).
    pub fn trusted_certs(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        match &self.ca_file {
            Some(_) => Ok(self.ca_certs.clone()),
            None => system_root_certs(),
        }
    }

    /// The one `ClientConfig` of this system, shared by every connection. With
    /// `--insecure-skip-verify` it warns on stderr, once per host.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        crate::tls::install_provider();
        let verify = self.verify();
        let roots = match (verify, &self.ca_file) {
            (Verify::Nothing, _) => rustls::RootCertStore::empty(),
            (_, Some(_)) => roots_from_certs(&self.ca_certs)?,
            (_, None) => system_roots()?,
        };
        if self.insecure_skip_verify {
            warn_insecure(&self.host);
        }
        Ok(Arc::new(client_config(verify, roots)?))
    }
}

fn scheme_mode(scheme: &str) -> (Mode, String) {
    if TLS_SCHEMES.iter().any(|(tls, _)| *tls == scheme) {
        (Mode::VerifyFull, format!("{scheme}://"))
    } else if NEGOTIATED.contains(&scheme) {
        (Mode::Prefer, "sslmode=prefer, the default".into())
    } else {
        (Mode::Disable, format!("{scheme}://"))
    }
}

/// A scheme that means TLS takes no mode that may go without it, and a plaintext scheme with a
/// TLS twin takes no mode that uses TLS (the twin is the way to ask for it).
fn check_scheme_allows(url: &str, scheme: &str, mode: Mode, source: &str) -> Result<(), TlsError> {
    let contradiction = |message: String| TlsError::Url {
        url: crate::redact::redact_url(url),
        message,
    };
    if let Some((_, plain)) = TLS_SCHEMES.iter().find(|(tls, _)| *tls == scheme)
        && !mode.requires_tls()
    {
        return Err(contradiction(format!(
            "{scheme}:// always uses TLS; {source} contradicts it (use {plain}:// for plaintext)"
        )));
    }
    if let Some((tls, _)) = TLS_SCHEMES.iter().find(|(_, plain)| *plain == scheme)
        && mode.may_use_tls()
        && *tls != "mongodb+srv"
    {
        return Err(contradiction(format!(
            "{scheme}:// is plaintext; for TLS use {tls}:// ({source} is not read here)"
        )));
    }
    Ok(())
}

fn bad_value(url: &str, key: &str, value: &str, choices: &str) -> TlsError {
    TlsError::Url {
        url: crate::redact::redact_url(url),
        message: format!("unknown {key} `{value}`; use {choices}"),
    }
}

/// The loud part of `--insecure-skip-verify`: one line per host, on stderr.
fn warn_insecure(host: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.insert(host.to_owned()) {
        eprintln!(
            "warning: --insecure-skip-verify: the certificate of {host} is not verified (anyone \
             between here and there can read and change the traffic); its cells are labelled {}",
            INSECURE_LABEL
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> String {
        format!("{}/testdata/tls/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    fn settings(url: &str) -> TlsSettings {
        TlsSettings::from_url(url, false).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn refusal(url: &str) -> String {
        TlsSettings::from_url(url, false).unwrap_err().to_string()
    }

    #[test]
    fn modes_come_from_the_url_or_its_scheme() {
        let ca = fixture("ca.pem");
        for (url, mode, verify) in [
            ("postgres://u@h/db", Mode::Prefer, Verify::Nothing),
            (
                "postgres://u@h/db?sslmode=disable",
                Mode::Disable,
                Verify::Nothing,
            ),
            (
                "postgres://u@h/db?sslmode=require",
                Mode::Require,
                Verify::Nothing,
            ),
            (
                "postgresql://u@h/db?sslmode=verify-ca",
                Mode::VerifyCa,
                Verify::Chain,
            ),
            (
                "postgres://u@h/db?sslmode=verify-full",
                Mode::VerifyFull,
                Verify::Full,
            ),
            (
                "mysql://u@h/db?ssl-mode=VERIFY_IDENTITY",
                Mode::VerifyFull,
                Verify::Full,
            ),
            (
                "mariadb://u@h/db?ssl_mode=REQUIRED",
                Mode::Require,
                Verify::Nothing,
            ),
            ("mysql://u@h/db", Mode::Prefer, Verify::Nothing),
            (
                "https://es.example.com:9200",
                Mode::VerifyFull,
                Verify::Full,
            ),
            ("rediss://h:6380", Mode::VerifyFull, Verify::Full),
            ("mqtts://broker", Mode::VerifyFull, Verify::Full),
            ("http://h:9200", Mode::Disable, Verify::Nothing),
            ("mqtt://h", Mode::Disable, Verify::Nothing),
            ("mongodb://h/?tls=true", Mode::VerifyFull, Verify::Full),
            (
                "mongodb://h/?tls=true&tlsAllowInvalidCertificates=true",
                Mode::Require,
                Verify::Nothing,
            ),
            ("mongodb://h/", Mode::Disable, Verify::Nothing),
            (
                "mongodb+srv://cluster.example.com/",
                Mode::VerifyFull,
                Verify::Full,
            ),
            (
                "cql://h:9042?sslmode=verify-ca",
                Mode::VerifyCa,
                Verify::Chain,
            ),
            (
                "qdrant://h:6334?sslmode=verify-full",
                Mode::VerifyFull,
                Verify::Full,
            ),
            ("sqlite", Mode::Disable, Verify::Nothing),
        ] {
            let s = settings(url);
            assert_eq!((s.mode, s.verify()), (mode, verify), "{url}");
        }
        let with_ca = settings(&format!(
            "postgres://u@h/db?sslmode=require&sslrootcert={ca}"
        ));
        assert_eq!(
            with_ca.verify(),
            Verify::Chain,
            "require + a CA file = verify-ca (libpq)"
        );
        assert_eq!(with_ca.ca_file.as_deref(), Some(Path::new(&ca)));
        let system = settings("postgres://u@h/db?sslrootcert=system");
        assert_eq!(
            (system.mode, system.ca_file.clone()),
            (Mode::VerifyFull, None)
        );
        assert_eq!(
            settings(&format!("https://h/?cacert={ca}"))
                .ca_file
                .as_deref(),
            Some(Path::new(&ca))
        );
        assert_eq!(
            settings(&format!("mysql://h/?ssl-ca={ca}&ssl-mode=VERIFY_CA")).verify(),
            Verify::Chain
        );
        assert_eq!(
            settings(&format!("mongodb://h/?tls=true&tlsCAFile={ca}"))
                .ca_file
                .as_deref(),
            Some(Path::new(&ca))
        );
    }

    #[test]
    fn what_the_report_says_of_the_check() {
        assert_eq!(
            settings("postgres://h/db?sslmode=verify-full").verification(),
            "verify-full"
        );
        assert_eq!(
            settings("postgres://h/db?sslmode=require").verification(),
            "none (sslmode=require)"
        );
        assert_eq!(
            settings("postgres://h/db").verification(),
            "none (sslmode=prefer, the default)"
        );
        let insecure = TlsSettings::from_url("https://h", true).unwrap();
        assert_eq!(insecure.verify(), Verify::Nothing);
        assert_eq!(insecure.verification(), "none (--insecure-skip-verify)");
        assert_eq!(
            settings("https://h").roots_described(),
            "the system's roots"
        );
    }

    #[test]
    fn bad_modes_and_contradictions_are_one_line() {
        let error = refusal("postgres://u:pw@h/db?sslmode=verify");
        assert_eq!(
            error,
            format!(
                "`postgres://u:***@h/db?sslmode=verify` is not a usable target: unknown sslmode `verify`; use {}",
                Mode::CHOICES
            )
        );
        assert!(refusal("https://h/?sslmode=disable").contains(
            "https:// always uses TLS; sslmode=disable contradicts it (use http:// for plaintext)"
        ));
        assert!(
            refusal("redis://h/?sslmode=require")
                .contains("redis:// is plaintext; for TLS use rediss://")
        );
        assert!(refusal("mongodb://h/?tls=maybe").contains("unknown tls `maybe`"));
        assert!(
            refusal("postgres://h/db?sslmode=require&sslrootcert=system")
                .contains("sslrootcert=system needs verify-full")
        );
        let ca = fixture("ca.pem");
        assert!(
            refusal(&format!("http://h/?cacert={ca}"))
                .contains("cacert= names a CA file, but http:// uses no TLS (use https://)")
        );
        let disabled = settings(&format!("postgres://h/db?sslmode=disable&sslrootcert={ca}"));
        assert_eq!(
            (disabled.mode, disabled.ca_file),
            (Mode::Disable, None),
            "libpq ignores it"
        );
        let missing =
            refusal("postgres://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem");
        assert_eq!(
            missing,
            "CA file /nonexistent/ca.pem: No such file or directory (os error 2)"
        );
        let not_pem = refusal(&format!(
            "postgres://h/db?sslrootcert={}",
            fixture("README.md")
        ));
        assert!(
            not_pem.ends_with("no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)"),
            "{not_pem}"
        );
    }

    #[test]
    fn clients_that_take_certificates_get_the_same_trust() {
        let ca = fixture("ca.pem");
        let named = settings(&format!(
            "mysql://h/db?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}"
        ));
        assert_eq!(named.trusted_certs().unwrap().len(), 1);
        let system = settings("mysql://h/db?ssl-mode=VERIFY_IDENTITY");
        assert!(system.trusted_certs().unwrap().len() > 10);
    }

    #[test]
    fn own_parameters_are_stripped_and_the_drivers_kept() {
        assert_eq!(
            strip_params(
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=/ca.pem&application_name=x"
            ),
            "postgres://u@h/db?application_name=x"
        );
        assert_eq!(
            strip_params("mysql://u@h/db?ssl-mode=REQUIRED&ssl-ca=/c.pem"),
            "mysql://u@h/db"
        );
        assert_eq!(
            strip_params("mongodb://h/?tls=true&tlsCAFile=/c.pem"),
            "mongodb://h/?tls=true&tlsCAFile=/c.pem"
        );
    }

    #[test]
    fn endpoints_take_the_schemes_port() {
        let at = |url: &str| Endpoint::from_url(url, None).unwrap().to_string();
        assert_eq!(at("mqtts://broker.example.com"), "broker.example.com:8883");
        assert_eq!(at("mqtt://127.0.0.1"), "127.0.0.1:1883");
        assert_eq!(at("https://h"), "h:443");
        assert_eq!(at("postgres://u:pw@db:6432/x"), "db:6432");
        assert_eq!(at("rediss://[::1]"), "[::1]:6379");
        assert_eq!(Endpoint::from_url("foo://h", Some(7)).unwrap().port, 7);
        assert!(
            Endpoint::from_url("foo://h", None)
                .unwrap_err()
                .to_string()
                .contains("names no port")
        );
        assert!(Endpoint::from_url("postgres:///db", None).is_err());
        let ip = Endpoint::from_url("https://127.0.0.1", None).unwrap();
        assert!(matches!(
            ip.server_name().unwrap(),
            ServerName::IpAddress(_)
        ));
    }
}
