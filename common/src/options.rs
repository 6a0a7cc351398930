//! The flags every fairbench tool shares, with the same names and meanings everywhere.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::human;
use crate::redact::redact_url;

/// Flattened into every tool's options (`#[command(flatten)]`), stored in every report, and
/// read back from it (a report can be the baseline of a later run).
#[derive(clap::Args, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CommonOpts {
    /// A system to measure, as `[NAME=]URL`; repeat to compare systems in one round.
    /// Without any, the tool measures its embedded default.
    #[arg(long = "target", value_name = "[NAME=]URL", value_parser = TargetSpec::parse)]
    pub targets: Vec<TargetSpec>,

    /// The system others are compared against (default: the first target).
    #[arg(long, value_name = "NAME")]
    pub reference: Option<String>,

    /// Length of one measured window.
    #[arg(long, default_value = "5s", value_parser = human::parse_duration)]
    #[serde(
        rename = "duration_s",
        serialize_with = "seconds",
        deserialize_with = "from_seconds"
    )]
    pub duration: Duration,

    /// Warm-up windows per workload and system, measured and discarded.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,

    /// Measured windows per workload and system, interleaved across systems.
    #[arg(long, default_value = "2", value_parser = positive_u32)]
    pub rounds: u32,

    /// Concurrent connections (workers) for the concurrent workloads.
    #[arg(long, default_value = "16", value_parser = positive_u32)]
    pub connections: u32,

    /// Open-loop target rate in operations per second across all connections (`5k`);
    /// without it every connection runs closed-loop, as fast as the system answers.
    #[arg(long, value_name = "OPS_PER_S", value_parser = human::parse_rate)]
    #[serde(rename = "rate_per_s")]
    pub rate: Option<f64>,

    /// Seed of every generator; the same seed gives byte-identical data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Results folder (default: results/<tool>-<suite>-<UTC timestamp>/).
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Longest one operation may run before it is recorded as `timeout` (and stopped on the
    /// server where the engine allows it); a window still busy that long after it closed (plus
    /// the 5 s a cancellation may take, on an async client) is a `timeout` too.
    #[arg(long, default_value = "120s", value_parser = human::parse_duration)]
    #[serde(
        rename = "ceiling_s",
        serialize_with = "seconds",
        deserialize_with = "from_seconds"
    )]
    pub ceiling: Duration,

    /// Wait (at most 10 minutes) for the 1-minute load average to fall to this before measuring.
    #[arg(long, value_name = "LOADAVG")]
    pub load_gate: Option<f64>,

    /// No progress line; the result table and the results path still print.
    #[arg(long)]
    pub quiet: bool,

    /// The practical threshold of a verdict: a system is faster or slower only when the whole
    /// confidence interval of its ratio to the reference lies beyond it, at parity when the
    /// whole interval lies inside it (`5%`: from 1/1.05 to 1.05).
    #[arg(long, default_value = "5%", value_parser = human::parse_share)]
    #[serde(default = "default_threshold")]
    pub threshold: f64,

    /// Accept any TLS certificate (the handshake's signatures are still checked). Loud: a
    /// warning on stderr, and every cell of each system reached over TLS is labelled
    /// `insecure-skip-verify`.
    #[arg(long)]
    #[serde(default)]
    pub insecure_skip_verify: bool,

    /// Read the password of the target named NAME from FILE (one trailing line end is
    /// dropped); repeatable. A password in the URL wins over the file, and the file over
    /// FAIRBENCH_PASSWORD_<NAME> (NAME upper-cased, `-` and `.` as `_`).
    #[arg(long = "password-file", value_name = "NAME=FILE", value_parser = PasswordFile::parse)]
    #[serde(default)]
    pub password_files: Vec<PasswordFile>,

    /// This worker's place among --worker-count workers driving one target as one run
    /// (0 … N−1); a Kubernetes Indexed Job sets JOB_COMPLETION_INDEX for each pod.
    #[arg(
        long,
        env = "JOB_COMPLETION_INDEX",
        default_value_t = 0,
        value_name = "I"
    )]
    #[serde(default)]
    pub worker_index: u32,

    /// Workers (client machines) of one run: each drives its share of the connections, the
    /// rate and the keys (`common::scale::Segment`); `TOOL merge` makes one run of their results.
    #[arg(long, default_value = "1", value_parser = positive_u32, value_name = "N")]
    #[serde(default = "one_worker")]
    pub worker_count: u32,

    /// Fresh processes of the tool each cell is measured in (JMH's forks): the run is done
    /// N times, one process after another (systems in alternating order across forks), and
    /// every interval and verdict is computed over the forks' own figures, not over rounds
    /// of one process. One fork (`--forks 1`) measures no run-to-run variance: `compare` then
    /// gives no faster/slower across runs unless told `--assume-stable`.
    #[arg(long, env = "FAIRBENCH_FORKS", default_value = "4", value_parser = positive_u32, value_name = "N")]
    #[serde(default = "one_fork")]
    pub forks: u32,

    /// Which of the --forks processes this is (1 … N), set by the process that starts them;
    /// 0 is a run in one process.
    #[arg(long, hide = true, default_value_t = 0, value_name = "K")]
    #[serde(default)]
    pub fork: u32,

    /// The id every worker of one run shares (the merge refuses parts of different runs).
    #[arg(long, value_name = "ID")]
    #[serde(default)]
    pub run_id: Option<String>,

    /// Worker 0's start barrier, HOST:PORT: worker 0 listens on PORT, the others connect, and
    /// every measured window starts when all N are there.
    #[arg(long, value_name = "HOST:PORT")]
    #[serde(default)]
    pub barrier: Option<String>,

    /// Longest any worker waits at the barrier (for the others, or for worker 0's preparation)
    /// before every worker stops with the barrier's exit code (3).
    #[arg(long, default_value = "300s", value_parser = human::parse_duration)]
    #[serde(
        rename = "barrier_timeout_s",
        serialize_with = "seconds",
        deserialize_with = "from_seconds",
        default = "default_barrier_timeout"
    )]
    pub barrier_timeout: Duration,

    /// The file holding the run's barrier token (at least 16 characters; `openssl rand -hex
    /// 32`), the same on every worker: every barrier message is authenticated with it, and a
    /// peer without it is refused. Without the flag the token is read from
    /// FAIRBENCH_BARRIER_TOKEN (the token itself); without either, the barrier is open to any
    /// host that reaches it, and the run says so. The token is never stored, only this path.
    #[arg(long, value_name = "FILE")]
    #[serde(default)]
    pub barrier_token: Option<PathBuf>,

    /// The address worker 0's barrier listens on, for a host with several interfaces (default:
    /// every interface).
    #[arg(long, value_name = "ADDR")]
    #[serde(default)]
    pub barrier_bind: Option<IpAddr>,
}

fn one_worker() -> u32 {
    1
}

/// What a report written before forks existed was: one process.
fn one_fork() -> u32 {
    1
}

fn default_barrier_timeout() -> Duration {
    Duration::from_secs(300)
}

/// The practical threshold of a verdict unless `--threshold` says otherwise.
pub const DEFAULT_THRESHOLD: f64 = 0.05;

fn default_threshold() -> f64 {
    DEFAULT_THRESHOLD
}

impl CommonOpts {
    /// Checks what clap cannot: values that only make sense together.
    pub fn validate(&self) -> Result<(), String> {
        let mut names = std::collections::BTreeSet::new();
        for spec in &self.targets {
            if let Some(name) = &spec.name
                && !names.insert(name.clone())
            {
                return Err(format!(
                    "two targets are named `{name}`; give each a distinct NAME="
                ));
            }
        }
        if let Some(gate) = self.load_gate
            && !(gate.is_finite() && gate > 0.0)
        {
            return Err(format!(
                "--load-gate {gate} must be a positive load average"
            ));
        }
        for file in &self.password_files {
            if !self
                .targets
                .iter()
                .any(|t| t.name.as_deref() == Some(&file.name))
            {
                return Err(format!(
                    "--password-file {}=…: no --target is named `{}` (name it: --target {}=URL)",
                    file.name, file.name, file.name
                ));
            }
        }
        if self.fork > self.forks {
            return Err(format!(
                "--fork {} is not one of --forks {} (forks are numbered 1 … {})",
                self.fork, self.forks, self.forks
            ));
        }
        validate_workers(self)
    }

    /// The targets to measure: those named with `--target`, or else the tool's embedded
    /// `default` (written as a `--target` would be).
    pub fn targets_or(&self, default: &str) -> Result<Vec<TargetSpec>, String> {
        if self.targets.is_empty() {
            return Ok(vec![TargetSpec::parse(default)?]);
        }
        Ok(self.targets.clone())
    }
}

/// The worker flags that only make sense together (called by [`CommonOpts::validate`]; see `crate::scale`).
fn validate_workers(common: &CommonOpts) -> Result<(), String> {
    let (index, count) = (common.worker_index, common.worker_count);
    if index >= count {
        return Err(format!(
            "--worker-index {index} is not below --worker-count {count} (workers are numbered 0 … {})",
            count.saturating_sub(1)
        ));
    }
    if let Some(id) = &common.run_id
        && (id.is_empty() || id.chars().any(char::is_whitespace))
    {
        return Err(format!("--run-id `{id}` must be one word (no spaces)"));
    }
    if count > 1 {
        if common.run_id.is_none() {
            return Err(format!(
                "--worker-count {count} needs --run-id ID, the same for every worker of the run"
            ));
        }
        match &common.barrier {
            None => {
                return Err(format!(
                    "--worker-count {count} needs --barrier HOST:PORT (worker 0 listens there, the others connect)"
                ));
            }
            Some(address) => crate::scale::barrier::parse_address(address)?,
        };
        if common.output.is_none() {
            return Err(
                "--worker-count above 1 needs --output DIR: each worker writes its own part for `merge`".into(),
            );
        }
    }
    Ok(())
}

fn positive_u32(text: &str) -> Result<u32, String> {
    let value = human::parse_count(text)?;
    u32::try_from(value).map_err(|_| format!("`{text}` is too large"))
}

/// A duration as fractional seconds, the way every report stores one.
pub fn seconds<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

/// Reads back what [`seconds`] wrote.
pub fn from_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let s = f64::deserialize(deserializer)?;
    Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)
}

/// One `--password-file NAME=FILE`. Stored in reports as written (a path is not a secret).
#[derive(Debug, Clone, PartialEq)]
pub struct PasswordFile {
    pub name: String,
    pub path: PathBuf,
}

impl PasswordFile {
    pub fn parse(text: &str) -> Result<PasswordFile, String> {
        match text.split_once('=') {
            Some((name, path)) if !name.is_empty() && !path.is_empty() => Ok(PasswordFile {
                name: name.to_owned(),
                path: PathBuf::from(path),
            }),
            _ => Err(format!(
                "`{text}` is not NAME=FILE (the target's name, then the file holding its password)"
            )),
        }
    }
}

impl Serialize for PasswordFile {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{}={}", self.name, self.path.display()))
    }
}

impl<'de> Deserialize<'de> for PasswordFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<PasswordFile, D::Error> {
        let text = String::deserialize(deserializer)?;
        PasswordFile::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// One `--target [NAME=]URL`. Serializes with any password redacted.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSpec {
    pub name: Option<String>,
    pub url: String,
}

impl TargetSpec {
    /// Parses `NAME=URL` or a bare `URL`. A name is letters, digits, `-`, `_` and `.`.
    pub fn parse(text: &str) -> Result<TargetSpec, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("a target needs a URL, like postgres://user@127.0.0.1:5432/db".into());
        }
        let scheme_at = text.find("://").unwrap_or(text.len());
        let (name, url) = match text[..scheme_at].split_once('=') {
            Some((name, _)) => (Some(name), &text[name.len() + 1..]),
            None => (None, text),
        };
        if let Some(name) = name
            && (name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Err(format!(
                "`{name}` is not a usable target name (letters, digits, - _ . only)"
            ));
        }
        if url.is_empty() {
            return Err(format!("target `{text}` has a name but no URL"));
        }
        Ok(TargetSpec {
            name: name.map(str::to_owned),
            url: url.to_owned(),
        })
    }

    /// The URL with any password replaced, safe to print and store.
    pub fn url_redacted(&self) -> String {
        redact_url(&self.url)
    }

    /// The URL's scheme (`postgres`, `mysql`, …), or the whole text when it has none (`sqlite`).
    pub fn scheme(&self) -> &str {
        match self.url.split_once(':') {
            Some((scheme, _)) => scheme,
            None => &self.url,
        }
    }
}

impl Serialize for TargetSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = match &self.name {
            Some(name) => format!("{name}={}", self.url_redacted()),
            None => self.url_redacted(),
        };
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for TargetSpec {
    /// A stored target reads back as written (its password, if any, stays redacted).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<TargetSpec, D::Error> {
        let text = String::deserialize(deserializer)?;
        TargetSpec::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonOpts,
    }

    #[test]
    fn target_specs_take_an_optional_name() {
        let named = TargetSpec::parse("pg=postgres://u:p@127.0.0.1/db?x=1").unwrap();
        assert_eq!(named.name.as_deref(), Some("pg"));
        assert_eq!(named.url, "postgres://u:p@127.0.0.1/db?x=1");
        assert_eq!(named.scheme(), "postgres");
        let bare = TargetSpec::parse("mysql://u@127.0.0.1/db").unwrap();
        assert_eq!(bare.name, None);
        assert_eq!(TargetSpec::parse("sqlite").unwrap().scheme(), "sqlite");
        assert!(TargetSpec::parse("").is_err());
        assert!(TargetSpec::parse("bad name=sqlite").is_err());
        assert!(TargetSpec::parse("pg=").is_err());
    }

    #[test]
    fn without_a_target_the_default_is_measured() {
        let none = Cli::parse_from(["t"]).common;
        let default = none.targets_or("sqlite").unwrap();
        assert_eq!(default, [TargetSpec::parse("sqlite").unwrap()]);
        let named = Cli::parse_from(["t", "--target", "a=redis://127.0.0.1"]).common;
        let targets = named.targets_or("sqlite").unwrap();
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].name.as_deref(), Some("a"));
    }

    #[test]
    fn targets_serialize_without_passwords() {
        let spec = TargetSpec::parse("pg=postgres://bench:s3cret@127.0.0.1:5432/db").unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        assert!(!json.contains("s3cret"), "{json}");
        assert!(
            json.contains("pg=postgres://bench:***@127.0.0.1:5432/db"),
            "{json}"
        );
    }

    #[test]
    fn defaults_follow_the_design() {
        let cli = Cli::try_parse_from(["t"]).unwrap();
        let c = cli.common;
        // Four processes of two measured rounds each, unless FAIRBENCH_FORKS says otherwise.
        let forks = std::env::var("FAIRBENCH_FORKS").map_or(4, |v| v.parse().unwrap());
        assert_eq!((c.forks, c.fork), (forks, 0));
        assert_eq!(c.duration, Duration::from_secs(5));
        assert_eq!((c.warmup, c.rounds, c.connections, c.seed), (1, 2, 16, 42));
        assert_eq!(c.ceiling, Duration::from_secs(120));
        assert_eq!(c.threshold, DEFAULT_THRESHOLD);
        assert!(c.rate.is_none() && c.targets.is_empty() && !c.quiet);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["duration_s"], 5.0);
        assert_eq!(json["ceiling_s"], 120.0);
    }

    #[test]
    fn stored_options_read_back_as_parsed() {
        let cli = Cli::parse_from([
            "t",
            "--target",
            "pg=postgres://u@127.0.0.1/db",
            "--duration",
            "1.5s",
            "--rate",
            "5k",
        ]);
        let json = serde_json::to_value(&cli.common).unwrap();
        let back: CommonOpts = serde_json::from_value(json).unwrap();
        assert_eq!(back, cli.common);
    }

    #[test]
    fn tls_and_credential_flags_parse_store_and_check() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pg.pw");
        std::fs::write(&file, "zq-options-pw\n").unwrap();
        let file_arg = format!("pg={}", file.display());
        let cli = Cli::parse_from([
            "t",
            "--target",
            "pg=postgres://u@127.0.0.1/db",
            "--insecure-skip-verify",
            "--password-file",
            &file_arg,
        ]);
        assert!(cli.common.insecure_skip_verify);
        assert_eq!(cli.common.password_files[0].name, "pg");
        cli.common.validate().unwrap();
        let json = serde_json::to_value(&cli.common).unwrap();
        assert_eq!(json["password_files"][0], file_arg.as_str());
        assert!(!json.to_string().contains("zq-options-pw"));
        let back: CommonOpts = serde_json::from_value(json).unwrap();
        assert_eq!(back, cli.common);
        let stray = Cli::parse_from(["t", "--password-file", "prod=/nonexistent"]);
        let error = stray.common.validate().unwrap_err();
        assert!(error.contains("no --target is named `prod`"), "{error}");
    }

    #[test]
    fn options_stored_before_the_tls_flags_still_read_back() {
        let mut json = serde_json::to_value(Cli::parse_from(["t"]).common).unwrap();
        let object = json.as_object_mut().unwrap();
        object.remove("insecure_skip_verify");
        object.remove("password_files");
        let back: CommonOpts = serde_json::from_value(json).unwrap();
        assert!(!back.insecure_skip_verify && back.password_files.is_empty());
    }

    #[test]
    fn nonsense_values_are_refused_by_the_parser() {
        for args in [
            vec!["t", "--connections", "0"],
            vec!["t", "--rounds", "0"],
            vec!["t", "--duration", "0s"],
            vec!["t", "--rate", "-5"],
            vec!["t", "--connections", "-1"],
        ] {
            assert!(Cli::try_parse_from(&args).is_err(), "{args:?} was accepted");
        }
        let twice = Cli::parse_from(["t", "--target", "a=sqlite", "--target", "a=sqlite"]);
        assert!(twice.common.validate().unwrap_err().contains("two targets"));
    }
}
