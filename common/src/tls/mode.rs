//! The TLS modes, with libpq's names and meanings (MySQL's `ssl-mode` names map onto them), and
//! the three ways a server certificate can be checked.

use std::fmt;

/// Whether and how a connection uses TLS (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Plaintext only (MySQL `DISABLED`).
    Disable,
    /// Plaintext first; TLS, unverified, only when the server refuses plaintext.
    Allow,
    /// TLS first, unverified; plaintext when the server does not offer TLS (libpq's and
    /// MySQL's default; MySQL `PREFERRED`).
    Prefer,
    /// TLS, encryption only (MySQL `REQUIRED`); with a CA file named, the chain is checked
    /// as `verify-ca` (libpq's rule).
    Require,
    /// TLS, the chain must reach a trusted CA, any name (MySQL `VERIFY_CA`).
    VerifyCa,
    /// TLS, the chain and the host name or IP address (MySQL `VERIFY_IDENTITY`).
    VerifyFull,
}

impl Mode {
    /// Every spelling accepted, for messages.
    pub const CHOICES: &'static str = "disable, allow, prefer, require, verify-ca or verify-full \
         (MySQL: DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY)";

    /// A libpq name or a MySQL `ssl-mode` name, in any case, with `-` or `_`.
    pub fn parse(text: &str) -> Option<Mode> {
        let word = text.trim().to_ascii_lowercase().replace('_', "-");
        Some(match word.as_str() {
            "disable" | "disabled" => Mode::Disable,
            "allow" => Mode::Allow,
            "prefer" | "preferred" => Mode::Prefer,
            "require" | "required" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" | "verify-identity" => Mode::VerifyFull,
            _ => return None,
        })
    }

    /// libpq's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Allow => "allow",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection may use TLS at all.
    pub fn may_use_tls(self) -> bool {
        self != Mode::Disable
    }

    /// Whether a connection without TLS is refused.
    pub fn requires_tls(self) -> bool {
        matches!(self, Mode::Require | Mode::VerifyCa | Mode::VerifyFull)
    }

    /// Whether this mode checks the certificate (before `--insecure-skip-verify`).
    pub fn verifies(self) -> bool {
        matches!(self, Mode::VerifyCa | Mode::VerifyFull)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a server certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// The chain to a trusted CA and the host name or IP (rustls never reads the subject CN).
    Full,
    /// The chain to a trusted CA; any name.
    Chain,
    /// Nothing about the certificate; the handshake signatures still (the peer holds the key
    /// of the certificate it sent, whatever that certificate is).
    Nothing,
}

impl Verify {
    /// The libpq word for it, as the report says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verify::Full => "verify-full",
            Verify::Chain => "verify-ca",
            Verify::Nothing => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_and_mysql_names_map_onto_one_mode() {
        for (text, mode) in [
            ("disable", Mode::Disable),
            ("DISABLED", Mode::Disable),
            ("allow", Mode::Allow),
            ("prefer", Mode::Prefer),
            ("PREFERRED", Mode::Prefer),
            ("require", Mode::Require),
            ("REQUIRED", Mode::Require),
            ("verify-ca", Mode::VerifyCa),
            ("VERIFY_CA", Mode::VerifyCa),
            ("verify-full", Mode::VerifyFull),
            ("VERIFY_IDENTITY", Mode::VerifyFull),
            (" Verify_Full ", Mode::VerifyFull),
        ] {
            assert_eq!(Mode::parse(text), Some(mode), "{text}");
        }
        for text in ["", "on", "true", "verify", "verify-host"] {
            assert_eq!(Mode::parse(text), None, "{text}");
        }
        assert_eq!(Mode::parse(Mode::VerifyCa.as_str()), Some(Mode::VerifyCa));
    }

    #[test]
    fn what_each_mode_asks_of_a_connection() {
        assert!(!Mode::Disable.may_use_tls());
        assert!(Mode::Allow.may_use_tls() && !Mode::Allow.requires_tls());
        assert!(Mode::Prefer.may_use_tls() && !Mode::Prefer.requires_tls());
        assert!(Mode::Require.requires_tls() && !Mode::Require.verifies());
        assert!(Mode::VerifyCa.verifies() && Mode::VerifyFull.verifies());
        assert_eq!(Verify::Chain.as_str(), "verify-ca");
    }
}
