//! The live progress lines: workers send snapshots over a bounded channel to one reporter
//! thread, which alone merges, formats and draws (on stderr, so stdout stays the result). The
//! window's line, and under it the run's: windows and cells done of those planned, and the
//! time left estimated from them ([`RunPlan`]).

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};

use crate::human::{format_latency_ns, format_rate};
use crate::recorder::Recorder;

/// Where workers send their snapshots.
pub type ProgressTx = SyncSender<Message>;

/// A worker's cumulative state in the current window.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub worker: usize,
    pub ok: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

impl Snapshot {
    pub fn of(worker: usize, recorder: &Recorder) -> Message {
        Message::Snapshot(Snapshot {
            worker,
            ok: recorder.counts.ok,
            errors: recorder.counts.error,
            latency: recorder.latency_so_far(),
        })
    }
}

/// What the run will measure, for its overall line: `cells` (workload × system), each of
/// `windows_per_cell` windows (warm-ups and measured rounds) of `window`; in fork `fork` of
/// `forks` (1 … N; 0 of 1 for a run in one process), the forks before it counted as done.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunPlan {
    pub cells: u64,
    pub windows_per_cell: u64,
    pub window: Duration,
    pub fork: u32,
    pub forks: u32,
}

impl RunPlan {
    /// Windows of one process (one fork).
    fn windows_here(&self) -> u64 {
        self.cells * self.windows_per_cell
    }

    /// The overall line after `done_here` windows of this process (a fraction for the one
    /// open), `elapsed` since its first window opened: cells and windows done of those
    /// planned, and the time left at the pace seen so far (at first, one window's duration
    /// each).
    pub fn line(&self, done_here: f64, elapsed: Duration) -> String {
        let forks = u64::from(self.forks.max(1));
        let before = u64::from(self.fork.saturating_sub(1)) * self.windows_here();
        let total = self.windows_here() * forks;
        let done = (before as f64 + done_here).min(total as f64);
        let per_window = if done_here >= 1.0 {
            elapsed.as_secs_f64() / done_here
        } else {
            self.window.as_secs_f64()
        };
        let left = Duration::from_secs_f64(((total as f64 - done) * per_window).max(0.0));
        let cells = (done / self.windows_per_cell.max(1) as f64).floor() as u64;
        let fork = if self.fork > 0 {
            format!(" · fork {}/{}", self.fork, self.forks)
        } else {
            String::new()
        };
        format!(
            "run · cell {}/{} · window {}/{total}{fork} · about {} left",
            cells.min(self.cells * forks),
            self.cells * forks,
            (done.ceil() as u64).min(total),
            format_left(left)
        )
    }
}

/// `45s`, `3m 20s`, `1h 05m`.
fn format_left(left: Duration) -> String {
    let s = left.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[derive(Debug)]
pub enum Message {
    /// What the run will measure (for the overall line).
    Plan(RunPlan),
    /// A window opens: what is measured and for how long.
    Window {
        label: String,
        duration: Duration,
    },
    Snapshot(Snapshot),
    /// A line to keep above the progress line (a finished window, a phase, a warning).
    Line(String),
    Quit,
}

/// Handle to the reporter; dropping it stops the reporter and clears the line.
pub struct Progress {
    tx: Option<SyncSender<Message>>,
    reporter: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the reporter, or a silent handle when `quiet`.
    pub fn start(quiet: bool) -> Progress {
        if quiet {
            return Progress {
                tx: None,
                reporter: None,
            };
        }
        let (tx, rx) = sync_channel(1024);
        let reporter = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || report(rx))
            .expect("spawning the progress thread");
        Progress {
            tx: Some(tx),
            reporter: Some(reporter),
        }
    }

    /// The sender to hand to workers (none when quiet).
    pub fn sender(&self) -> Option<ProgressTx> {
        self.tx.clone()
    }

    /// What the run will measure from now on: the overall line appears under the window's.
    pub fn plan(&self, plan: RunPlan) {
        self.send(Message::Plan(plan));
    }

    pub fn window(&self, label: impl Into<String>, duration: Duration) {
        self.send(Message::Window {
            label: label.into(),
            duration,
        });
    }

    /// Prints a line on stderr, above the progress line (nothing when quiet).
    pub fn line(&self, text: impl Into<String>) {
        self.send(Message::Line(text.into()));
    }

    fn send(&self, message: Message) {
        if let Some(tx) = &self.tx {
            // Control messages are rare; waiting for room keeps their order.
            let _ = tx.send(message);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.send(Message::Quit);
        if let Some(reporter) = self.reporter.take() {
            let _ = reporter.join();
        }
    }
}

struct WindowView {
    label: String,
    opened: Instant,
    duration: Duration,
    workers: Vec<Option<Snapshot>>,
}

impl WindowView {
    fn line(&self) -> String {
        let elapsed = self.opened.elapsed();
        let mut ok = 0;
        let mut errors = 0;
        let mut merged: Option<Histogram<u64>> = None;
        for snapshot in self.workers.iter().flatten() {
            ok += snapshot.ok;
            errors += snapshot.errors;
            match &mut merged {
                Some(h) => {
                    let _ = h.add(&snapshot.latency);
                }
                None => merged = Some(snapshot.latency.clone()),
            }
        }
        let rate = ok as f64 / elapsed.as_secs_f64().max(1e-3);
        let p99 = merged.filter(|h| !h.is_empty()).map_or_else(
            || "–".into(),
            |h| format_latency_ns(h.value_at_quantile(0.99)),
        );
        let errors = if errors > 0 {
            format!(" · {errors} errors")
        } else {
            String::new()
        };
        format!(
            "{} · {} ops/s · p99 {p99}{errors} · {:.1}s/{:.1}s",
            self.label,
            format_rate(rate),
            elapsed.as_secs_f64().min(self.duration.as_secs_f64()),
            self.duration.as_secs_f64()
        )
    }
}

/// The run as the reporter follows it: its plan, and the windows opened since the first.
#[derive(Default)]
struct RunView {
    plan: Option<RunPlan>,
    opened: u64,
    first: Option<Instant>,
}

impl RunView {
    fn line(&self, window: Option<&WindowView>) -> Option<String> {
        let plan = self.plan?;
        let first = self.first?;
        // Between windows (a line ended the last one), every window opened is done.
        let done_here = match window {
            Some(w) => {
                let open = w.opened.elapsed().as_secs_f64() / w.duration.as_secs_f64().max(1e-3);
                self.opened.saturating_sub(1) as f64 + open.min(1.0)
            }
            None => self.opened as f64,
        };
        Some(plan.line(done_here, first.elapsed()))
    }
}

fn report(rx: Receiver<Message>) {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
    let mut window: Option<WindowView> = None;
    let mut run = RunView::default();
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Message::Plan(plan)) => {
                run = RunView {
                    plan: Some(plan),
                    ..RunView::default()
                };
            }
            Ok(Message::Window { label, duration }) => {
                run.opened += 1;
                run.first.get_or_insert_with(Instant::now);
                window = Some(WindowView {
                    label,
                    opened: Instant::now(),
                    duration,
                    workers: Vec::new(),
                });
            }
            Ok(Message::Snapshot(snapshot)) => {
                if let Some(view) = &mut window {
                    if view.workers.len() <= snapshot.worker {
                        view.workers.resize(snapshot.worker + 1, None);
                    }
                    let slot = snapshot.worker;
                    view.workers[slot] = Some(snapshot);
                }
                continue;
            }
            Ok(Message::Line(text)) => {
                window = None;
                if bar.is_hidden() {
                    eprintln!("{text}");
                } else {
                    bar.println(text);
                }
            }
            Ok(Message::Quit) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let overall = run.line(window.as_ref());
        match (&window, overall) {
            (Some(view), Some(overall)) => {
                bar.set_message(format!("{}\n  {overall}", view.line()));
                bar.tick();
            }
            (Some(view), None) => {
                bar.set_message(view.line());
                bar.tick();
            }
            (None, Some(overall)) => {
                bar.set_message(overall);
                bar.tick();
            }
            (None, None) => bar.set_message(""),
        }
    }
    bar.finish_and_clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(fork: u32, forks: u32) -> RunPlan {
        RunPlan {
            cells: 4,
            windows_per_cell: 3,
            window: Duration::from_secs(5),
            fork,
            forks,
        }
    }

    #[test]
    fn the_run_line_counts_cells_and_windows_and_estimates_the_time_left() {
        // Before any window ends: one window's duration for each of the 12.
        assert_eq!(
            plan(0, 1).line(0.0, Duration::ZERO),
            "run · cell 0/4 · window 0/12 · about 1m 00s left"
        );
        // Seven windows in 42 s (6 s each, set-up included): five left, 30 s.
        assert_eq!(
            plan(0, 1).line(7.0, Duration::from_secs(42)),
            "run · cell 2/4 · window 7/12 · about 30s left"
        );
        // Fork 2 of 3: the first fork's 12 windows are done; 24 − 13 left at 5 s.
        assert_eq!(
            plan(2, 3).line(1.0, Duration::from_secs(5)),
            "run · cell 4/12 · window 13/36 · fork 2/3 · about 1m 55s left"
        );
        assert_eq!(
            plan(0, 1).line(12.0, Duration::from_secs(70)),
            "run · cell 4/4 · window 12/12 · about 0s left"
        );
        assert_eq!(format_left(Duration::from_secs(3_900)), "1h 05m");
    }
}
