//! Ctrl-C: the first press stops the run after the operations in flight and still writes the
//! report; a second press exits at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Installs the handler on the current tokio runtime and returns the flag it sets.
pub fn install() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            set.store(true, Ordering::SeqCst);
            eprintln!(
                "\ninterrupted: finishing the current window and writing the report (Ctrl-C again to quit now)"
            );
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    flag
}
