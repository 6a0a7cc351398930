//! Small pieces every tool's run uses around its phases: the machine's description with the
//! optional load gate, and the one-line summary printed after each window.

use std::time::Duration;

use crate::environment::{Environment, wait_for_quiet};
use crate::human::{format_latency_ns, format_rate};
use crate::progress::Progress;
use crate::window::WindowOutcome;

/// Longest the load gate waits for a quiet machine.
pub const LOAD_GATE_MAX_WAIT: Duration = Duration::from_secs(600);

/// The machine as the run starts; with a load gate, after waiting (bounded) for a quiet host
/// and saying so on the progress line.
pub fn capture_environment(load_gate: Option<f64>, progress: &Progress) -> Environment {
    let mut environment = Environment::capture();
    if let Some(gate) = load_gate {
        environment.load_gate = Some(wait_for_quiet(gate, LOAD_GATE_MAX_WAIT, |load| {
            progress.line(format!(
                "waiting for the load average ({load:.2}) to fall to {gate:.2}…"
            ));
        }));
    }
    environment
}

/// `LABEL: 1,234 UNIT · p50 … · p99 … · N errors`, for the line kept after each window.
pub fn window_line(label: &str, outcome: &WindowOutcome, unit: &str) -> String {
    window_line_per(label, outcome, unit, 1.0)
}

/// As [`window_line`] for operations that each carry `per_op` items (events per request):
/// the rate is in items.
pub fn window_line_per(label: &str, outcome: &WindowOutcome, unit: &str, per_op: f64) -> String {
    let latency =
        crate::recorder::percentiles(&outcome.recorder.latency).map_or_else(String::new, |p| {
            format!(
                " · p50 {} · p99 {}",
                format_latency_ns(p.p50),
                format_latency_ns(p.p99)
            )
        });
    let errors = match outcome.recorder.counts.error {
        0 => String::new(),
        n => format!(" · {n} errors"),
    };
    format!(
        "{label}: {} {unit}{latency}{errors}",
        format_rate(outcome.throughput() * per_op)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;

    #[test]
    fn a_window_line_has_the_rate_the_percentiles_and_the_errors() {
        let mut recorder = Recorder::new(false);
        recorder.record_ok(Duration::from_millis(2), Duration::from_millis(2));
        recorder.record_error("boom");
        let outcome = WindowOutcome {
            recorder,
            workers: 1,
            elapsed: Duration::from_secs(1),
            stuck_workers: 0,
            client_cpu_ns: 0,
            client_busy: None,
            client_busy_least: None,
            busy_is_the_clients: false,
            target_rate: None,
        };
        let line = window_line("match · a · round 1/2", &outcome, "q/s");
        assert!(
            line.starts_with("match · a · round 1/2: 1.0 q/s · p50 2"),
            "{line}"
        );
        assert!(line.ends_with(" · 1 errors"), "{line}");
        let quiet = capture_environment(None, &Progress::start(true));
        assert!(quiet.load_gate.is_none());
    }
}
