//! Where a target's password and API key come from when they are not typed into the URL: a
//! `--password-file NAME=FILE`, or the variables `FAIRBENCH_PASSWORD_<NAME>` and
//! `FAIRBENCH_API_KEY_<NAME>` for the target named NAME. Resolved once, in one place, with one
//! precedence (the URL, then the file, then the variable), and refused in one line when a file
//! or a variable names no target.
//!
//! Only a *named* target (`--target NAME=URL`) reads a file or a variable: an unnamed target's
//! name is chosen by the tool after it connects, too late to say which variable it meant.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use crate::options::{CommonOpts, PasswordFile, TargetSpec};
use crate::redact::register_secret;
use crate::urlparts;

/// The prefix of the variable holding the password of the target named NAME.
pub const PASSWORD_VARIABLE: &str = "FAIRBENCH_PASSWORD_";
/// The prefix of the variable holding the API key (or token) of the target named NAME.
pub const API_KEY_VARIABLE: &str = "FAIRBENCH_API_KEY_";
/// URL parameters (normalized) that carry an API key or token: `api_key=`, `apikey=`,
/// `api-key=`, `token=`. A target removes them before it sends the URL anywhere.
pub const API_KEY_PARAMS: &[&str] = &["apikey", "token"];

/// A password or key: never printed (`Debug` shows `***`, there is no `Display`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one call that hands it to a client.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Where a secret was found, for the report (never the secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Url,
    File(PathBuf),
    Variable(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Url => f.write_str("the URL"),
            Source::File(path) => write!(f, "the file {}", path.display()),
            Source::Variable(name) => write!(f, "the variable {name}"),
        }
    }
}

/// Why the credentials given cannot be used; each is one line, and the run stops with exit 2.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("{variable} is set, but no target is named {suffix}: {known}")]
    UnknownVariable {
        variable: String,
        suffix: String,
        known: String,
    },
    #[error("--password-file {name}=…: no target is named `{name}`: {known}")]
    UnknownFile { name: String, known: String },
    #[error("--password-file {name}={path}: cannot read it: {message}")]
    Unreadable {
        name: String,
        path: PathBuf,
        message: String,
    },
    #[error("--password-file {name}={path}: the file is empty")]
    EmptyFile { name: String, path: PathBuf },
    #[error("--password-file is given twice for `{name}`")]
    Twice { name: String },
    #[error("{variable} is set but empty (unset it, or put the password in it)")]
    EmptyVariable { variable: String },
    #[error("{variable} is not valid UTF-8")]
    NotUtf8 { variable: String },
    #[error("targets `{first}` and `{second}` would both read {variable}: rename one")]
    Ambiguous {
        first: String,
        second: String,
        variable: String,
    },
}

/// The part of a variable's name that stands for a target: NAME upper-cased, `-` and `.` as `_`.
pub fn variable_suffix(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect()
}

/// The secrets of one run, read once from the files and variables and checked against the
/// targets. Every secret read is registered with [`crate::redact`], so no output shows it.
#[derive(Debug, Default, Clone)]
pub struct Secrets {
    files: BTreeMap<String, (Secret, PathBuf)>,
    passwords: BTreeMap<String, (Secret, String)>,
    api_keys: BTreeMap<String, (Secret, String)>,
}

impl Secrets {
    /// Reads the `--password-file`s and this process's variables for `common`'s targets.
    pub fn gather(common: &CommonOpts) -> Result<Secrets, CredentialError> {
        Secrets::gather_from(&common.targets, &common.password_files, std::env::vars_os())
    }

    /// [`Secrets::gather`] over explicit variables (tests pass their own).
    pub fn gather_from(
        targets: &[TargetSpec],
        files: &[PasswordFile],
        variables: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Secrets, CredentialError> {
        let names: Vec<&str> = targets.iter().filter_map(|t| t.name.as_deref()).collect();
        let by_suffix = suffixes(&names)?;
        let known = known_names(&names);
        let mut secrets = Secrets::default();
        for file in files {
            if !names.contains(&file.name.as_str()) {
                return Err(CredentialError::UnknownFile {
                    name: file.name.clone(),
                    known,
                });
            }
            let secret = read_password_file(file)?;
            if secrets
                .files
                .insert(file.name.clone(), (secret, file.path.clone()))
                .is_some()
            {
                return Err(CredentialError::Twice {
                    name: file.name.clone(),
                });
            }
        }
        for (key, value) in variables {
            let Some(key) = key.to_str() else { continue };
            let (prefix, store) = if key.starts_with(PASSWORD_VARIABLE) {
                (PASSWORD_VARIABLE, &mut secrets.passwords)
            } else if key.starts_with(API_KEY_VARIABLE) {
                (API_KEY_VARIABLE, &mut secrets.api_keys)
            } else {
                continue;
            };
            let suffix = &key[prefix.len()..];
            let Some(name) = by_suffix.get(suffix) else {
                return Err(CredentialError::UnknownVariable {
                    variable: key.to_owned(),
                    suffix: suffix.to_owned(),
                    known: known.clone(),
                });
            };
            let value = value.into_string().map_err(|_| CredentialError::NotUtf8 {
                variable: key.to_owned(),
            })?;
            if value.is_empty() {
                return Err(CredentialError::EmptyVariable {
                    variable: key.to_owned(),
                });
            }
            register_secret(&value);
            store.insert((*name).to_owned(), (Secret(value), key.to_owned()));
        }
        Ok(secrets)
    }

    /// The password of `spec`: the URL's own (`user:password@` or `password=`), then its
    /// `--password-file`, then `FAIRBENCH_PASSWORD_<NAME>`.
    pub fn password(&self, spec: &TargetSpec) -> Option<(Secret, Source)> {
        if let Some(password) = url_password(&spec.url) {
            return Some((Secret(password), Source::Url));
        }
        let name = spec.name.as_deref()?;
        if let Some((secret, path)) = self.files.get(name) {
            return Some((secret.clone(), Source::File(path.clone())));
        }
        self.passwords
            .get(name)
            .map(|(secret, variable)| (secret.clone(), Source::Variable(variable.clone())))
    }

    /// The API key (or token) of `spec`: the URL's `api_key=`/`apikey=`/`token=`, then
    /// `FAIRBENCH_API_KEY_<NAME>`.
    pub fn api_key(&self, spec: &TargetSpec) -> Option<(Secret, Source)> {
        if let Some((_, key)) = urlparts::param(&spec.url, API_KEY_PARAMS)
            && !key.is_empty()
        {
            return Some((Secret(key), Source::Url));
        }
        let name = spec.name.as_deref()?;
        self.api_keys
            .get(name)
            .map(|(secret, variable)| (secret.clone(), Source::Variable(variable.clone())))
    }

    /// `spec`'s URL with its password in the userinfo, for clients that read it from there
    /// (tokio-postgres, mysql_async, mongodb, MQTT, RESP); the URL as given when it has one or
    /// none is found. The result holds the secret: hand it to the client, never print it.
    pub fn url_with_password(&self, spec: &TargetSpec) -> String {
        match self.password(spec) {
            Some((secret, Source::File(_) | Source::Variable(_))) => {
                urlparts::with_password(&spec.url, secret.expose())
            }
            _ => spec.url.clone(),
        }
    }
}

/// A password written into the URL, as the client will read it.
fn url_password(url: &str) -> Option<String> {
    if let Some((_, Some(password))) = urlparts::userinfo(url) {
        return Some(password);
    }
    urlparts::param(url, &["password"]).map(|(_, value)| value)
}

fn suffixes<'a>(names: &[&'a str]) -> Result<BTreeMap<String, &'a str>, CredentialError> {
    let mut by_suffix: BTreeMap<String, &str> = BTreeMap::new();
    for name in names {
        let suffix = variable_suffix(name);
        if let Some(first) = by_suffix.insert(suffix.clone(), name) {
            return Err(CredentialError::Ambiguous {
                first: first.to_owned(),
                second: (*name).to_owned(),
                variable: format!("{PASSWORD_VARIABLE}{suffix}"),
            });
        }
    }
    Ok(by_suffix)
}

fn known_names(names: &[&str]) -> String {
    if names.is_empty() {
        "no --target has a name (give one: --target NAME=URL)".to_owned()
    } else {
        format!("the named targets are {}", names.join(", "))
    }
}

/// The file's contents without one trailing line end; refused when unreadable or empty.
fn read_password_file(file: &PasswordFile) -> Result<Secret, CredentialError> {
    let text = std::fs::read_to_string(&file.path).map_err(|e| CredentialError::Unreadable {
        name: file.name.clone(),
        path: file.path.clone(),
        message: e.to_string(),
    })?;
    let password = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(CredentialError::EmptyFile {
            name: file.name.clone(),
            path: file.path.clone(),
        });
    }
    register_secret(password);
    Ok(Secret(password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(specs: &[&str]) -> Vec<TargetSpec> {
        specs
            .iter()
            .map(|s| TargetSpec::parse(s).unwrap())
            .collect()
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn password_file(dir: &std::path::Path, name: &str, text: &str) -> PasswordFile {
        let path = dir.join(format!("{name}.pw"));
        std::fs::write(&path, text).unwrap();
        PasswordFile {
            name: name.into(),
            path,
        }
    }

    #[test]
    fn variable_names_follow_the_target_name() {
        assert_eq!(variable_suffix("prod-db.eu"), "PROD_DB_EU");
        assert_eq!(variable_suffix("pg_1"), "PG_1");
    }

    #[test]
    fn the_url_wins_then_the_file_then_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let t = targets(&[
            "inurl=postgres://u:zq-url-pw@h/db",
            "filed=postgres://u@h/db",
            "env-only=postgres://u@h/db",
            "param=postgres://h/db?user=u&password=zq-param-pw",
        ]);
        let files = [
            password_file(dir.path(), "inurl", "zq-file-1\n"),
            password_file(dir.path(), "filed", "zq-file-2\r\n"),
        ];
        let env = vars(&[
            ("FAIRBENCH_PASSWORD_FILED", "zq-env-2"),
            ("FAIRBENCH_PASSWORD_ENV_ONLY", "zq-env-3"),
            ("HOME", "/root"),
        ]);
        let s = Secrets::gather_from(&t, &files, env).unwrap();
        let got = |i: usize| {
            s.password(&t[i])
                .map(|(p, src)| (p.expose().to_owned(), src))
        };
        assert_eq!(got(0), Some(("zq-url-pw".into(), Source::Url)));
        assert_eq!(
            got(1),
            Some(("zq-file-2".into(), Source::File(files[1].path.clone())))
        );
        assert_eq!(
            got(2),
            Some((
                "zq-env-3".into(),
                Source::Variable("FAIRBENCH_PASSWORD_ENV_ONLY".into())
            ))
        );
        assert_eq!(got(3).unwrap().0, "zq-param-pw");
        assert_eq!(s.url_with_password(&t[2]), "postgres://u:zq-env-3@h/db");
        assert_eq!(s.url_with_password(&t[0]), t[0].url);
        let unnamed = TargetSpec::parse("postgres://u@h/db").unwrap();
        assert!(s.password(&unnamed).is_none());
    }

    #[test]
    fn api_keys_come_from_the_url_or_a_variable() {
        let t = targets(&[
            "es=https://h:9200/?api_key=zq-key-url",
            "qd=qdrant://h:6334",
        ]);
        let s =
            Secrets::gather_from(&t, &[], vars(&[("FAIRBENCH_API_KEY_QD", "zq-key-env")])).unwrap();
        assert_eq!(s.api_key(&t[0]).unwrap().0.expose(), "zq-key-url");
        let (key, source) = s.api_key(&t[1]).unwrap();
        assert_eq!(key.expose(), "zq-key-env");
        assert_eq!(source.to_string(), "the variable FAIRBENCH_API_KEY_QD");
        assert_eq!(format!("{key:?}"), "Secret(***)");
    }

    #[test]
    fn files_and_variables_for_no_target_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let t = targets(&["pg=postgres://u@h/db", "postgres://u@other/db"]);
        let error = Secrets::gather_from(&t, &[], vars(&[("FAIRBENCH_PASSWORD_PROD", "x1234")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "FAIRBENCH_PASSWORD_PROD is set, but no target is named PROD: the named targets are pg"
        );
        let stray = password_file(dir.path(), "prod", "pw");
        let error = Secrets::gather_from(&t, &[stray], vars(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("--password-file prod=…: no target is named `prod`"),
            "{error}"
        );
        let error = Secrets::gather_from(&[], &[], vars(&[("FAIRBENCH_API_KEY_ES", "k1234")]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("no --target has a name"), "{error}");
    }

    #[test]
    fn unreadable_and_empty_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let t = targets(&["pg=postgres://u@h/db"]);
        let missing = PasswordFile {
            name: "pg".into(),
            path: dir.path().join("nope"),
        };
        let error = Secrets::gather_from(&t, &[missing], vars(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("cannot read it: No such file"), "{error}");
        let empty = password_file(dir.path(), "pg", "\n");
        let error = Secrets::gather_from(&t, &[empty], vars(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("the file is empty"), "{error}");
        let error = Secrets::gather_from(&t, &[], vars(&[("FAIRBENCH_PASSWORD_PG", "")]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("set but empty"), "{error}");
        let both = targets(&["a-b=postgres://h/x", "a.b=postgres://h/y"]);
        let error = Secrets::gather_from(&both, &[], vars(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("would both read FAIRBENCH_PASSWORD_A_B"),
            "{error}"
        );
        assert!(PasswordFile::parse("pg").is_err());
        assert!(PasswordFile::parse("=x").is_err());
    }

    #[test]
    fn secrets_read_are_scrubbed_from_output() {
        let dir = tempfile::tempdir().unwrap();
        let t = targets(&["pg=postgres://u@h/db"]);
        let file = password_file(dir.path(), "pg", "zq-scrubbed-from-file\n");
        Secrets::gather_from(&t, &[file], vars(&[])).unwrap();
        assert_eq!(
            crate::redact::scrub("login failed for zq-scrubbed-from-file"),
            "login failed for ***"
        );
    }
}
