//! Ctrl-C or SIGTERM (what Kubernetes sends a pod it stops): the first stops the run after the
//! operations in flight and still writes the report; a second exits at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::signal::unix::{SignalKind, signal};

/// Installs the handler on the current tokio runtime and returns the flag it sets.
pub fn install() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    tokio::spawn(async move {
        let (Ok(mut interrupt), Ok(mut terminate)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        for press in 0.. {
            let name = tokio::select! {
                _ = interrupt.recv() => "Ctrl-C",
                _ = terminate.recv() => "SIGTERM",
            };
            if press > 0 {
                std::process::exit(130);
            }
            set.store(true, Ordering::SeqCst);
            eprintln!(
                "\ninterrupted ({name}): finishing the current window and writing the report (again to quit now)"
            );
        }
    });
    flag
}
