//! What every fairbench tool shares: the common options, pacing, recording, the run protocol,
//! the result model, reports, the environment and seeded data.

pub mod calibration;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod cputime;
pub mod credentials;
pub mod data;
pub mod deadline;
pub mod driver;
pub mod environment;
pub mod exit;
pub mod export;
pub mod fork;
pub mod histogram;
#[cfg(feature = "http")]
pub mod http;
pub mod human;
pub mod interrupt;
pub mod lanes;
pub mod load;
pub mod options;
pub mod pacing;
pub mod phases;
pub mod pool;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod procstat;
pub mod progress;
pub mod protocol;
pub mod reach;
pub mod recorder;
pub mod redact;
pub mod reference;
pub mod report;
pub mod results;
pub mod run;
pub mod scale;
pub mod seconds;
pub mod servercpu;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod target;
pub mod testing;
pub mod tls;
pub mod urlparts;
pub mod verdict;
pub mod watchdog;
pub mod window;
pub mod writer;

/// The commit the tools were built from, when built inside a git checkout.
pub fn git_commit() -> Option<String> {
    let commit = env!("FAIRBENCH_GIT_COMMIT");
    (!commit.is_empty()).then(|| commit.to_owned())
}
