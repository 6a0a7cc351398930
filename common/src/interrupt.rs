//! Ctrl-C or SIGTERM (what Kubernetes sends a pod it stops): the first stops the run after the
//! operations in flight and still writes the report; a second exits at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signal that stopped this process's run: 0 none (or a flag set by a caller), 1 Ctrl-C,
/// 2 SIGTERM.
static CAUSE: AtomicU8 = AtomicU8::new(0);

/// What stopped the run, as a worker tells the others: `SIGTERM`, or `Ctrl-C` (also when a
/// caller's flag did).
pub fn cause() -> &'static str {
    match CAUSE.load(Ordering::SeqCst) {
        2 => "SIGTERM",
        _ => "Ctrl-C",
    }
}

/// The two signals that stop a run, listened to together.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    /// Listens for both on the current tokio runtime; `None` when they cannot be listened to.
    pub fn listen() -> Option<Signals> {
        Some(Signals {
            interrupt: signal(SignalKind::interrupt()).ok()?,
            terminate: signal(SignalKind::terminate()).ok()?,
        })
    }

    /// Waits for the next of either, and names it.
    pub async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "Ctrl-C",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}

/// Installs the handler on the current tokio runtime and returns the flag it sets.
pub fn install() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    tokio::spawn(async move {
        let Some(mut signals) = Signals::listen() else {
            return;
        };
        let name = signals.next().await;
        CAUSE.store(if name == "SIGTERM" { 2 } else { 1 }, Ordering::SeqCst);
        set.store(true, Ordering::SeqCst);
        eprintln!(
            "\ninterrupted ({name}): finishing the current window and writing the report (again to quit now)"
        );
        signals.next().await;
        std::process::exit(130);
    });
    flag
}
