//! The live progress line: workers send snapshots over a bounded channel to one reporter
//! thread, which alone merges, formats and draws (on stderr, so stdout stays the result).

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

#[derive(Debug)]
pub enum Message {
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

fn report(rx: Receiver<Message>) {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
    let mut window: Option<WindowView> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Message::Window { label, duration }) => {
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
        match &window {
            Some(view) => {
                bar.set_message(view.line());
                bar.tick();
            }
            None => bar.set_message(""),
        }
    }
    bar.finish_and_clear();
}
