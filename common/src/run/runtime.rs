//! What surrounds a tool's run: the tokio runtime it runs on, Ctrl-C, what a finished run
//! hands back, and how `main` turns that into an exit code.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::exit::Exit;
use crate::results::Report;

/// What a finished run leaves: the report (also written to `results_dir`) and its exit code.
#[derive(Debug)]
pub struct Summary {
    pub report: Report,
    pub results_dir: PathBuf,
    pub exit: Exit,
}

/// Runs `run` on a multi-threaded runtime of its own whose threads are named `thread_name`.
/// With `interrupt` the caller controls the stop flag (tests); without it Ctrl-C sets it.
/// Every tool's run starts here, so this is where ring becomes the process's TLS provider
/// ([`crate::tls::install_provider`]) and the panic hook that redacts secrets is installed.
pub fn block_on<F, Fut>(
    thread_name: &str,
    interrupt: Option<Arc<AtomicBool>>,
    run: F,
) -> anyhow::Result<Summary>
where
    F: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: Future<Output = anyhow::Result<Summary>>,
{
    // Before any client exists: ring as the TLS provider of the process, and panics that print
    // no secret.
    crate::tls::install_provider();
    crate::redact::install_panic_hook();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(thread_name)
        .build()?;
    runtime.block_on(async move {
        let interrupt = interrupt.unwrap_or_else(crate::interrupt::install);
        run(interrupt).await
    })
}

/// The end of every `main`: a run's own exit code, or the error chain on one line (secrets
/// redacted) and [`Exit::BadInput`].
pub fn exit(result: anyhow::Result<Summary>) -> ExitCode {
    match result {
        Ok(summary) => summary.exit.into(),
        Err(e) if e.downcast_ref::<crate::scale::BarrierError>().is_some() => {
            eprintln!("error: {}", crate::redact::redact_text(&format!("{e:#}")));
            ExitCode::from(crate::scale::BARRIER_EXIT)
        }
        Err(e) => {
            eprintln!("error: {}", crate::redact::redact_text(&format!("{e:#}")));
            Exit::BadInput.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn the_callers_interrupt_flag_reaches_the_run() {
        let flag = Arc::new(AtomicBool::new(true));
        let error = block_on("t", Some(flag), |interrupt| async move {
            anyhow::bail!("interrupted: {}", interrupt.load(Ordering::SeqCst))
        })
        .unwrap_err();
        assert_eq!(error.to_string(), "interrupted: true");
    }
}
