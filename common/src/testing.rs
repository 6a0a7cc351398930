//! For the tools' integration tests: whether a real server must be there, its URL from the
//! environment the test command set up, and a lock so one test at a time uses the servers.

use std::sync::{Mutex, MutexGuard};

/// Servers are shared by every test in a test binary; one test uses them at a time.
static SERVERS: Mutex<()> = Mutex::new(());

/// Holds the servers for one test (a test that panicked does not poison them for the next).
pub fn lock_servers() -> MutexGuard<'static, ()> {
    SERVERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a missing server must fail the test (the test command sets
/// `FAIRBENCH_REQUIRE_SERVERS`; so does CI).
pub fn servers_required() -> bool {
    std::env::var_os("FAIRBENCH_REQUIRE_SERVERS").is_some()
        || std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The URL in `variable`, or `None` with a note on stderr when running without the servers
/// outside CI. Panics when the servers are required and the variable is missing.
pub fn server_url(variable: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) => Some(url),
        Err(_) if servers_required() => {
            panic!(
                "{variable} is not set: run the tests through scripts/test, which starts the servers"
            )
        }
        Err(_) => {
            eprintln!("skipped: {variable} is not set (run scripts/test to start the servers)");
            None
        }
    }
}
