//! One worker of a run as a tool sees it: its [`Segment`], its barrier (none in a run without
//! workers, where every call is free), and the `worker` block its results carry.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::barrier::{Access, Barrier, BarrierError, Hello, TOKEN_VARIABLE, Token};
use super::segment::Segment;
use crate::options::CommonOpts;
use crate::results::WorkerInfo;

/// Options that may differ between the workers of one run (where each writes, what it
/// prints, which index it is); every other option is in the hash every worker must share.
pub const PER_WORKER_OPTIONS: &[&str] = &[
    "worker_index",
    "output",
    "quiet",
    "load_gate",
    "password_files",
    "barrier_token",
    "barrier_bind",
];

/// Who may use the run's barrier ([`Token::read`]) and where worker 0 listens; an open barrier
/// said once, loudly, on stderr.
fn access(common: &CommonOpts) -> Result<Access, String> {
    let variable = std::env::var(TOKEN_VARIABLE).ok();
    let token = Token::read(common.barrier_token.as_deref(), variable)?;
    if !token.is_secret() {
        eprintln!(
            "warning: the barrier is open: any host that reaches it can join, stop or delay this run of {} workers; give every worker the same --barrier-token FILE or {TOKEN_VARIABLE}",
            common.worker_count
        );
    }
    let mut access = Access::open();
    access.token = token;
    if let Some(bind) = common.barrier_bind {
        access.bind = bind;
    }
    Ok(access)
}

/// FNV-1a 64 over the options (as stored in results.json) less [`PER_WORKER_OPTIONS`], hex.
/// serde_json keeps object keys sorted, so the text is canonical.
pub fn options_hash(options: &serde_json::Value) -> String {
    let mut shared = options.clone();
    strip(&mut shared);
    let text = shared.to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn strip(value: &mut serde_json::Value) {
    if let Some(object) = value.as_object_mut() {
        object.retain(|k, _| !PER_WORKER_OPTIONS.contains(&k.as_str()));
        for child in object.values_mut() {
            strip(child);
        }
    }
}

/// One worker of the run.
pub struct Worker {
    pub segment: Segment,
    info: Option<WorkerInfo>,
    barrier: Option<Barrier>,
    /// Which of the run's `--forks` processes this is (1 … N) and N; 0 for a run in one
    /// process. The first fork prepares and verifies the data, the last drops it.
    fork: (u32, u32),
}

impl Worker {
    /// A run without workers: the whole of everything, no barrier.
    pub fn alone() -> Worker {
        Worker {
            segment: Segment::WHOLE,
            info: None,
            barrier: None,
            fork: (0, 1),
        }
    }

    /// One fork of a run of `count` (`index` 1 … `count`), or a run in one process (0).
    pub fn in_fork(mut self, index: u32, count: u32) -> Worker {
        self.fork = (index, count.max(index));
        self
    }

    /// This process's place in the run the flags describe; with `--worker-count` above 1 it
    /// joins the barrier (worker 0 starts listening; the others connect and are admitted or
    /// refused at once). Call it before preparing: a mismatch stops the run before any work.
    /// `interrupt` is the run's Ctrl-C flag: once set, this worker's next meeting stops every
    /// worker as an interrupted run ([`BarrierError::Interrupted`]).
    pub async fn join(
        common: &CommonOpts,
        tool_version: &str,
        options: &serde_json::Value,
        interrupt: &Arc<AtomicBool>,
    ) -> Result<Worker, BarrierError> {
        let segment =
            Segment::new(common.worker_index, common.worker_count).unwrap_or(Segment::WHOLE);
        if common.worker_count == 1 {
            return Ok(Worker::alone().in_fork(common.fork, common.forks));
        }
        let run_id = common.run_id.clone().unwrap_or_default();
        let address = common.barrier.clone().unwrap_or_default();
        let options_hash = options_hash(options);
        let hello = Hello {
            run_id: run_id.clone(),
            options_hash: options_hash.clone(),
            tool_version: tool_version.to_owned(),
            index: segment.index,
            count: segment.count,
        };
        let access = access(common).map_err(|reason| BarrierError::Failed {
            address: address.clone(),
            reason,
        })?;
        let mut barrier = Barrier::join(&address, hello, common.barrier_timeout, access).await?;
        barrier.watch(interrupt.clone());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        Ok(Worker {
            segment,
            info: Some(WorkerInfo {
                index: segment.index,
                count: segment.count,
                run_id,
                host,
                options_hash,
                barrier: None,
            }),
            barrier: Some(barrier),
            fork: (0, 1),
        })
    }

    /// Whether this process is one of several workers.
    pub fn is_part(&self) -> bool {
        self.barrier.is_some()
    }

    /// Whether this process makes the data and verifies it: worker 0 (or a run alone), in the
    /// first fork of a run of several. Every later fork opens what the first one made and
    /// verifies it from the engine's catalog, as a worker other than 0 does.
    pub fn prepares(&self) -> bool {
        self.segment.is_leader() && self.fork.0 <= 1
    }

    /// Whether this process does worker 0's part inside each window (checking the writes a
    /// window acknowledged, putting a table back as it was): worker 0 in every fork.
    pub fn leads(&self) -> bool {
        self.segment.is_leader()
    }

    /// Whether this process drops the data at the end: worker 0, in the last fork, or in a fork
    /// that was interrupted (no fork starts after it).
    pub fn cleans_up(&self, interrupted: bool) -> bool {
        self.segment.is_leader() && (self.fork.0 == 0 || self.fork.0 == self.fork.1 || interrupted)
    }

    /// Which fork this process is (1 … N), or 0 for a run in one process.
    pub fn fork(&self) -> u32 {
        self.fork.0
    }

    /// Waits at the barrier before a window (free without workers). `payload` is this
    /// worker's figure for the round; the sum over all workers comes back.
    pub async fn sync(&mut self, payload: u64) -> Result<u64, BarrierError> {
        match &mut self.barrier {
            Some(barrier) => barrier.wait(payload).await,
            None => Ok(payload),
        }
    }

    /// Waits at the barrier with two figures of this worker's (each below 2³², as counts of
    /// one window are) and gets back each one's sum over all workers (free without workers).
    pub async fn sync_pair(&mut self, a: u64, b: u64) -> Result<(u64, u64), BarrierError> {
        let low = u64::from(u32::MAX);
        let sums = self.sync((a.min(low) << 32) | b.min(low)).await?;
        Ok(if self.is_part() {
            (sums >> 32, sums & low)
        } else {
            (a, b)
        })
    }

    /// Stops every worker of the run (worker 0 tells the others).
    pub async fn abort(&mut self, reason: &str) {
        if let Some(barrier) = &mut self.barrier {
            barrier.abort(reason).await;
        }
    }

    /// The `worker` block as it stands (what the barrier observed so far).
    pub fn info(&self) -> Option<WorkerInfo> {
        let mut info = self.info.clone()?;
        info.barrier = self.barrier.as_ref().map(|b| b.record().clone());
        Some(info)
    }
}
