//! What a target needs besides its URL to reach its system (the results folder, the run's
//! secrets, `--insecure-skip-verify`), and what its connections use for TLS (probed once in
//! the connect phase). Every tool's targets take these two types.

use std::path::{Path, PathBuf};

use crate::credentials::Secrets;
use crate::options::{CommonOpts, TargetSpec};
use crate::results::SystemInfo;
use crate::run::Lifecycle;
use crate::target::TargetError;
use crate::tls::{Endpoint, HANDSHAKE_TIMEOUT, Negotiated, Prelude, TlsSettings, probe};

/// What a target needs besides its URL to reach its system: the folder embedded databases,
/// stores and indexes live in (the results folder; for a fork, the run's, which its forks
/// share), the run's secrets (`--password-file`,
/// `FAIRBENCH_PASSWORD_<NAME>`, `FAIRBENCH_API_KEY_<NAME>`) and `--insecure-skip-verify`.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    pub results_dir: PathBuf,
    pub secrets: Secrets,
    pub insecure_skip_verify: bool,
}

impl Reach {
    /// What `lifecycle` read and `common` asked for.
    pub fn of(lifecycle: &Lifecycle, common: &CommonOpts) -> Reach {
        Reach {
            results_dir: lifecycle.data_path().to_owned(),
            secrets: lifecycle.secrets().clone(),
            insecure_skip_verify: common.insecure_skip_verify,
        }
    }

    /// For a target opened outside a run (examples, tests): embedded databases in `dir`, no
    /// secrets beyond the URL's, certificates verified.
    pub fn local(dir: &Path) -> Reach {
        Reach {
            results_dir: dir.to_owned(),
            ..Reach::default()
        }
    }

    /// `spec`'s URL with the password its file or variable holds (the URL's own wins). It
    /// holds the secret: hand it to the client, never print it.
    pub fn url(&self, spec: &TargetSpec) -> String {
        self.secrets.url_with_password(spec)
    }

    /// `spec`'s TLS settings; bad ones (an unknown mode, a CA file that is missing or not PEM)
    /// fail here in one line.
    pub fn tls(&self, spec: &TargetSpec) -> Result<TlsSettings, TargetError> {
        Ok(TlsSettings::from_url(&spec.url, self.insecure_skip_verify)?)
    }

    /// Refuses, in one line, a URL that asks for TLS (a mode that may use it, or a CA file) for
    /// a system whose client here speaks plaintext only: `why` says why, and nothing is
    /// connected in plaintext behind the user's back.
    pub fn refuse_tls(&self, spec: &TargetSpec, why: &str) -> Result<(), TargetError> {
        let names_ca = crate::urlparts::param(&spec.url, crate::tls::CA_PARAMS).is_some();
        if names_ca || self.tls(spec)?.uses_tls() {
            return Err(TargetError::Url {
                url: spec.url_redacted(),
                message: format!("{why}; connect in plaintext"),
            });
        }
        Ok(())
    }
}

/// What a system's connections use for TLS: the settings, and what the connect-phase
/// connection negotiated (`None` = plaintext).
#[derive(Debug, Clone)]
pub struct TlsState {
    pub settings: TlsSettings,
    pub negotiated: Option<Negotiated>,
}

impl TlsState {
    /// Writes what `info`'s system negotiated (version, cipher, verification) into its
    /// verified settings.
    pub fn record(&self, info: &mut SystemInfo) {
        crate::tls::record(info, &self.settings, self.negotiated.as_ref());
    }

    /// What a direct-TLS connection to `url` (at `default_port` when it names none)
    /// negotiates under `settings`, probed once in the connect phase; plaintext when
    /// `settings` asks for no TLS. A failed handshake is one line.
    pub async fn probe(
        settings: TlsSettings,
        url: &str,
        default_port: Option<u16>,
    ) -> Result<TlsState, TargetError> {
        if !settings.uses_tls() {
            return Ok(TlsState {
                settings,
                negotiated: None,
            });
        }
        let endpoint = Endpoint::from_url(url, default_port)?;
        let config = settings.client_config()?;
        let negotiated = probe(&endpoint, Prelude::Direct, config, HANDSHAKE_TIMEOUT).await?;
        Ok(TlsState {
            settings,
            negotiated: Some(negotiated),
        })
    }
}
