//! The bound of a phase that is not one operation (an index build, an ingest, a refresh): the
//! moment past which it stops, and the error that says so, so every tool records it as
//! `timeout` with the same words.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::human::format_duration;

/// Far enough to mean "no bound" when a bound is too large to add to now.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// When a phase started and how long it may run.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    started: Instant,
    bound: Duration,
    at: Instant,
}

/// A phase ran past its bound and was stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{phase} still running {} after it started: stopped at its bound ({flag})", format_duration(*.bound))]
pub struct PastDeadline {
    /// What was running (`building the index`).
    pub phase: String,
    pub bound: Duration,
    /// The option that sets the bound (`--build-ceiling 1h`), for the user to raise it.
    pub flag: String,
}

impl Deadline {
    /// A phase starting now that may run for `bound`.
    pub fn after(bound: Duration) -> Deadline {
        let started = Instant::now();
        let at = started
            .checked_add(bound)
            .unwrap_or_else(|| started + CENTURY);
        Deadline { started, bound, at }
    }

    pub fn bound(&self) -> Duration {
        self.bound
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// The error of `phase` past this bound, naming the flag that sets it.
    pub fn past(&self, phase: &str, flag: &str) -> PastDeadline {
        PastDeadline {
            phase: phase.to_owned(),
            bound: self.bound,
            flag: format!("{flag} {}", format_duration(self.bound)),
        }
    }

    /// For a loop that cannot be preempted (rows added in process, batches sent by a blocking
    /// client): `Err` once the bound has passed, to be checked between steps.
    pub fn check(&self, phase: &str, flag: &str) -> Result<(), PastDeadline> {
        if self.passed() {
            Err(self.past(phase, flag))
        } else {
            Ok(())
        }
    }

    /// Runs `phase` until it ends or the bound passes; past it, the future is dropped (an
    /// HTTP request with it, a blocking step inside it only once that step returns).
    pub async fn within<F: Future>(
        &self,
        phase: &str,
        flag: &str,
        work: F,
    ) -> Result<F::Output, PastDeadline> {
        tokio::time::timeout_at(self.at.into(), work)
            .await
            .map_err(|_| self.past(phase, flag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_phase_past_its_bound_is_stopped_and_says_which_flag_raises_it() {
        let deadline = Deadline::after(Duration::from_millis(50));
        assert!(deadline.check("refreshing", "--ceiling").is_ok());
        let began = Instant::now();
        let stopped = deadline
            .within(
                "refreshing",
                "--ceiling",
                tokio::time::sleep(Duration::from_secs(30)),
            )
            .await
            .unwrap_err();
        assert!(began.elapsed() < Duration::from_secs(5));
        assert!(deadline.passed());
        assert_eq!(
            stopped.to_string(),
            "refreshing still running 50ms after it started: stopped at its bound (--ceiling 50ms)"
        );
        assert_eq!(deadline.check("refreshing", "--ceiling"), Err(stopped));
    }

    #[tokio::test]
    async fn a_phase_within_its_bound_gives_its_output_and_a_huge_bound_never_passes() {
        let deadline = Deadline::after(Duration::MAX);
        assert!(!deadline.passed());
        assert_eq!(deadline.within("x", "--f", async { 7 }).await, Ok(7));
    }
}
