//! Why a suite's measurement stopped before the end of its schedule, on one of several
//! workers or alone.

use common::scale::BarrierError;

/// Why the measurement stopped before the end of its schedule.
pub(super) enum Stopped {
    /// At the barrier of a run on several workers; the run ends with the barrier's code.
    Barrier(BarrierError),
    /// Anything else: opening the sessions failed, or results.json could not be written.
    Failed(anyhow::Error),
}

impl From<BarrierError> for Stopped {
    fn from(error: BarrierError) -> Stopped {
        Stopped::Barrier(error)
    }
}

impl From<common::writer::WriteError> for Stopped {
    fn from(error: common::writer::WriteError) -> Stopped {
        Stopped::Failed(error.into())
    }
}
