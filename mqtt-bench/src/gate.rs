//! The start barrier as a window meets it: once per window, after every client of this worker
//! has connected and subscribed and before the clock starts (a storm's clock is its connects:
//! there, before the first), so every worker's window opens at once. A window that failed
//! before reaching it still meets it afterwards, so every worker meets it the same number of
//! times; a failure of the barrier is kept for the run, which then stops.

use common::scale::{BarrierError, Segment, Worker};

/// This worker at the barrier, and whether the current window has met it.
pub struct Gate {
    pub worker: Worker,
    passed: bool,
    failure: Option<BarrierError>,
}

impl Gate {
    pub fn new(worker: Worker) -> Gate {
        Gate {
            worker,
            passed: false,
            failure: None,
        }
    }

    /// A run without workers: every window opens at once, alone.
    pub fn alone() -> Gate {
        Gate::new(Worker::alone())
    }

    pub fn segment(&self) -> Segment {
        self.worker.segment
    }

    /// A new window: it has not met the barrier yet.
    pub fn arm(&mut self) {
        self.passed = false;
    }

    /// Meets the barrier (once per window; later calls in the same window return at once).
    /// `false`: the barrier failed and the window must not be measured.
    pub async fn open(&mut self) -> bool {
        if !self.passed {
            self.passed = true;
            if let Err(e) = self.worker.sync(0).await {
                self.failure = Some(e);
            }
        }
        self.failure.is_none()
    }

    /// Meets the barrier if the window failed before it did, then the barrier's failure, if any.
    pub async fn close(&mut self) -> Option<BarrierError> {
        self.open().await;
        self.failure.take()
    }

    /// What a window stopped by the barrier says.
    pub fn stopped_message(&self) -> String {
        match &self.failure {
            Some(e) => format!("stopped at the start barrier: {e}"),
            None => "stopped at the start barrier".into(),
        }
    }
}
