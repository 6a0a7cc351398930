//! The start barrier: worker 0 listens, the others connect and say who they are (run id,
//! options hash, tool version, index, count); before every measured window each worker
//! arrives, and when all N are there worker 0 answers "start in D" (a relative delay: no
//! synchronized clocks needed). A mismatch, a worker missing past `--barrier-timeout` or a
//! worker that leaves stops every worker with [`BARRIER_EXIT`].
//!
//! The protocol is one line per message over one TCP connection per worker, kept for the run,
//! every line but the first authenticated with the run's token ([`wire`]): `NONCE n` (worker
//! 0, in the clear) → `HELLO run hash version index count` → `WELCOME` | `REFUSE reason`; then
//! per window `ARRIVE round payload rtt_ns` → `GO round delay_ns payload_sum` | `ABORT
//! reason`. A peer without the token is refused at the door, named in worker 0's log, and
//! touches nothing: it cannot join, stop or delay the run (each handshake runs on a task of
//! its own, within [`HANDSHAKE`]). A worker interrupted (Ctrl-C or SIGTERM) says `STOP round
//! cause` instead of arriving, or at once while it waits for "go", and stops; worker 0 (on its
//! own interrupt too) answers every worker `HALT index cause`: each stops at that meeting as
//! an interrupted run does ([`BarrierError::Interrupted`]), not as a failed one.

mod door;
mod wire;

pub use wire::{Access, MIN_TOKEN_LEN, TOKEN_VARIABLE, Token};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout_at;

use door::{Door, Refusals, accept};
use wire::{End, Wire, WireError};

/// The exit code of a run stopped at the barrier (0, 1 and 2 are the usual ones).
pub const BARRIER_EXIT: u8 = 3;

/// The least time between worker 0's "go" and the window's start: room for the message to
/// reach every worker.
const MIN_START_DELAY: Duration = Duration::from_millis(20);

/// The longest a peer may take, once connected, to say who it is: worker 0 admits every
/// connection on a task of its own, so a peer that says nothing delays no one.
const HANDSHAKE: Duration = Duration::from_secs(5);

/// Connections worker 0 reads hellos from at once; more are closed unread (a worker retries).
const MAX_HANDSHAKES: usize = 16;

/// Refused peers named in worker 0's log and results; later ones are counted only.
const LOGGED_REFUSALS: u64 = 10;

/// How often a wait at the barrier looks at this worker's interrupt flag.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// Why the barrier stopped the run.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum BarrierError {
    #[error("barrier {address}: {reason}")]
    Failed { address: String, reason: String },
    /// A worker was interrupted (Ctrl-C or SIGTERM, the `cause`) and told the others: the run
    /// stops as an interrupted one does (cells kept, results written), on every worker.
    #[error("barrier {address}: worker {worker} was interrupted ({cause})")]
    Interrupted {
        address: String,
        worker: u32,
        cause: String,
    },
}

/// How one meeting ended, when it did not open the window.
enum Halt {
    Failed(String),
    /// Worker `.0` was interrupted by `.1` (`SIGTERM`, `Ctrl-C`).
    Interrupted(u32, String),
}

impl From<String> for Halt {
    fn from(reason: String) -> Halt {
        Halt::Failed(reason)
    }
}

impl BarrierError {
    fn new(address: &str, reason: impl Into<String>) -> BarrierError {
        BarrierError::Failed {
            address: address.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A cause as it travels: one word of letters, digits and `-`.
fn one_word(cause: &str) -> String {
    let word: String = cause
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(16)
        .collect();
    if word.is_empty() {
        "Ctrl-C".into()
    } else {
        word
    }
}

/// Who a worker is, as it tells worker 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub run_id: String,
    pub options_hash: String,
    pub tool_version: String,
    pub index: u32,
    pub count: u32,
}

impl Hello {
    fn line(&self) -> String {
        format!(
            "HELLO {} {} {} {} {}\n",
            self.run_id, self.options_hash, self.tool_version, self.index, self.count
        )
    }

    fn parse(line: &str) -> Option<Hello> {
        let mut words = line.split_whitespace();
        (words.next()? == "HELLO").then_some(())?;
        let hello = Hello {
            run_id: words.next()?.to_owned(),
            options_hash: words.next()?.to_owned(),
            tool_version: words.next()?.to_owned(),
            index: words.next()?.parse().ok()?,
            count: words.next()?.parse().ok()?,
        };
        words.next().is_none().then_some(hello)
    }

    /// Why `other` cannot join this worker's run, if it cannot.
    fn mismatch(&self, other: &Hello) -> Option<String> {
        let who = format!("worker {}", other.index);
        if other.run_id != self.run_id {
            return Some(format!(
                "{who} belongs to run {}, not {}",
                other.run_id, self.run_id
            ));
        }
        if other.tool_version != self.tool_version {
            return Some(format!(
                "{who} runs version {}, worker 0 runs {}",
                other.tool_version, self.tool_version
            ));
        }
        if other.options_hash != self.options_hash {
            return Some(format!(
                "{who} has other options (hash {}, worker 0 has {}): every worker needs the same flags",
                other.options_hash, self.options_hash
            ));
        }
        if other.count != self.count || other.index == 0 || other.index >= self.count {
            return Some(format!(
                "{who} of {} does not fit a run of {} workers (0 is worker 0 itself)",
                other.count, self.count
            ));
        }
        None
    }
}

/// What a worker observed at the barrier, kept in its results.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct BarrierRecord {
    pub address: String,
    /// Round trip to worker 0 measured when joining (0 on worker 0).
    pub rtt_ns: u64,
    /// Windows opened through the barrier.
    pub windows: u64,
    /// The longest wait at the barrier (for the others, or for worker 0's preparation).
    pub wait_ns_max: u64,
    /// When each window started here (Unix time, this machine's clock): comparable across
    /// workers only where the clocks are (one host, or synchronized ones).
    pub start_unix_ns: Vec<u64>,
    /// How far this worker's starts may be from worker 0's, by what the barrier knows: half
    /// the round trip it compensated for, plus worker 0's spread in sending "go".
    pub skew_bound_ns: u64,
    /// Why the barrier stopped the run, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Whether every message was authenticated with the run's token (`--barrier-token`);
    /// false is an open barrier any host that reaches it could join.
    #[serde(default)]
    pub authenticated: bool,
    /// Peers worker 0 refused without letting them touch the run (address and why), the
    /// first few.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

struct Peer {
    index: u32,
    wire: Wire,
}

enum Role {
    Leader {
        hello: Hello,
        incoming: mpsc::UnboundedReceiver<Result<Peer, String>>,
        peers: Vec<Peer>,
        acceptor: tokio::task::JoinHandle<()>,
        refusals: Arc<Refusals>,
    },
    Follower {
        wire: Wire,
        index: u32,
    },
}

/// One worker's end of the barrier.
pub struct Barrier {
    role: Role,
    address: String,
    timeout: Duration,
    round: u64,
    record: BarrierRecord,
    /// This process's interrupt flag: set, this worker tells the others at once when it is
    /// waiting at the barrier, else at its next meeting, and every worker stops.
    interrupt: Option<Arc<AtomicBool>>,
}

/// `HOST:PORT` split, with the port checked.
pub fn parse_address(address: &str) -> Result<(String, u16), String> {
    let bad = || format!("--barrier {address} is not HOST:PORT (worker 0's address and a port)");
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.trim_matches(['[', ']']).to_owned(), port))
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Resolves once `flag` is set (never without one).
async fn interrupted(flag: Option<&AtomicBool>) {
    let Some(flag) = flag else {
        return std::future::pending().await;
    };
    while !flag.load(Ordering::SeqCst) {
        tokio::time::sleep(INTERRUPT_POLL).await;
    }
}

impl Barrier {
    /// Joins the run: worker 0 (`hello.index == 0`) listens on the barrier's port (on
    /// `access.bind`) and admits the others as they come, each connection on a task of its
    /// own; any other worker connects (retrying until the timeout, as worker 0 may start
    /// later) and is admitted or refused at once. Every message carries a tag made with
    /// `access.token`: a peer without it is refused and named in worker 0's log.
    pub async fn join(
        address: &str,
        hello: Hello,
        timeout: Duration,
        access: Access,
    ) -> Result<Barrier, BarrierError> {
        let (_, port) = parse_address(address).map_err(|e| BarrierError::new(address, e))?;
        let mut record = BarrierRecord {
            address: address.to_owned(),
            authenticated: access.token.is_secret(),
            ..BarrierRecord::default()
        };
        let role = if hello.index == 0 {
            let listener = TcpListener::bind((access.bind, port)).await.map_err(|e| {
                BarrierError::new(
                    address,
                    format!("worker 0 cannot listen on {}:{port}: {e}", access.bind),
                )
            })?;
            let (sender, incoming) = mpsc::unbounded_channel();
            let refusals = Arc::new(Refusals::default());
            let door = Door {
                hello: hello.clone(),
                token: access.token,
                handshake: HANDSHAKE.min(timeout),
                refusals: refusals.clone(),
            };
            let acceptor = tokio::spawn(accept(listener, Arc::new(door), sender));
            Role::Leader {
                hello,
                incoming,
                peers: Vec::new(),
                acceptor,
                refusals,
            }
        } else {
            let (role, rtt) = connect(address, &hello, timeout, &access.token).await?;
            record.rtt_ns = rtt.as_nanos() as u64;
            role
        };
        Ok(Barrier {
            role,
            address: address.to_owned(),
            timeout,
            round: 0,
            record,
            interrupt: None,
        })
    }

    /// Watches `interrupt` (the run's Ctrl-C or SIGTERM flag): once it is set, this worker
    /// stops the run on every worker as an interrupted run, at once when it is waiting at the
    /// barrier, else at its next meeting.
    pub fn watch(&mut self, interrupt: Arc<AtomicBool>) {
        self.interrupt = Some(interrupt);
    }

    /// What this worker observed at the barrier so far (on worker 0, with the peers refused).
    pub fn record(&self) -> BarrierRecord {
        let mut record = self.record.clone();
        if let Role::Leader { refusals, .. } = &self.role {
            record.refused = refusals.list();
        }
        record
    }

    /// Notes the failure in the record (the cells say why) and hands it back.
    fn failed(&mut self, reason: String) -> BarrierError {
        self.record.failure = Some(reason.clone());
        BarrierError::new(&self.address, reason)
    }

    /// Waits until every worker is at the barrier, then until the common start. `payload` is
    /// this worker's figure for the round (acknowledged writes, …); the sum over every worker
    /// comes back.
    pub async fn wait(&mut self, payload: u64) -> Result<u64, BarrierError> {
        self.round += 1;
        let arrived = Instant::now();
        let deadline = arrived + self.timeout;
        let flag = self.interrupt.as_deref();
        let meeting = Meeting {
            round: self.round,
            payload,
            interrupted: flag.is_some_and(|i| i.load(Ordering::SeqCst)),
        };
        let result = match &mut self.role {
            Role::Leader {
                hello,
                incoming,
                peers,
                ..
            } => lead(hello, incoming, peers, meeting, deadline, flag).await,
            Role::Follower { wire, index } => {
                // Worker 0 may arrive a whole timeout after this worker (its preparation)
                // and then wait a timeout for the others: it, not this worker, says who is
                // missing.
                let rtt = self.record.rtt_ns;
                let deadline = deadline + self.timeout;
                follow(wire, *index, meeting, rtt, deadline, flag).await
            }
        };
        let (sum, delay, spread) = match result {
            Ok(go) => go,
            Err(Halt::Failed(reason)) => return Err(self.failed(reason)),
            Err(Halt::Interrupted(worker, cause)) => {
                self.record.failure = Some(format!("worker {worker} was interrupted ({cause})"));
                return Err(BarrierError::Interrupted {
                    address: self.address.clone(),
                    worker,
                    cause,
                });
            }
        };
        let waited = arrived.elapsed();
        tokio::time::sleep(delay).await;
        self.record.windows += 1;
        self.record.wait_ns_max = self.record.wait_ns_max.max(waited.as_nanos() as u64);
        self.record.start_unix_ns.push(unix_ns());
        let bound = self.record.rtt_ns / 2 + spread.as_nanos() as u64;
        self.record.skew_bound_ns = self.record.skew_bound_ns.max(bound);
        Ok(sum)
    }

    /// Stops the run for every worker (worker 0 tells the others why); for a worker that is
    /// not worker 0, closing its connection is enough: worker 0 fails its next wait.
    pub async fn abort(&mut self, reason: &str) {
        if let Role::Leader { peers, .. } = &mut self.role {
            tell_all(peers, &format!("ABORT {reason}")).await;
        }
        self.record.failure.get_or_insert_with(|| reason.to_owned());
    }
}

impl Drop for Barrier {
    fn drop(&mut self) {
        if let Role::Leader { acceptor, .. } = &self.role {
            acceptor.abort();
        }
    }
}

async fn tell_all(peers: &mut [Peer], message: &str) {
    for peer in peers.iter_mut() {
        let _ = peer.wire.send(message).await;
    }
}

/// One attempt to join worker 0: the nonce read, the hello sent, the answer read. `Ok(None)`
/// is a connection that failed before an answer (worker 0 not ready): try again.
async fn handshake(
    stream: TcpStream,
    hello: &Hello,
    token: &Token,
    deadline: Instant,
) -> Result<Result<Wire, String>, String> {
    let mut wire = Wire::new(stream, token.clone(), String::new(), End::Follower);
    let line = wire.recv_plain(deadline).await.map_err(|e| e.to_string())?;
    let Some(nonce) = line.strip_prefix("NONCE ") else {
        return Err(format!("worker 0 said `{line}` instead of its nonce"));
    };
    wire.set_nonce(nonce.to_owned());
    wire.send(hello.line().trim_end())
        .await
        .map_err(|e| e.to_string())?;
    match wire.recv(deadline).await {
        Ok(line) if line == "WELCOME" => Ok(Ok(wire)),
        Ok(line) => Ok(Err(line
            .strip_prefix("REFUSE ")
            .unwrap_or(&line)
            .to_owned())),
        Err(WireError::Unauthenticated) => Ok(Err(wire
            .last_line()
            .strip_prefix("REFUSE ")
            .unwrap_or("an answer without a valid tag (another barrier token?)")
            .to_owned())),
        Err(e) => Err(e.to_string()),
    }
}

/// A worker's connection to worker 0, retried until the deadline, and the round trip of
/// its admission.
async fn connect(
    address: &str,
    hello: &Hello,
    timeout: Duration,
    token: &Token,
) -> Result<(Role, Duration), BarrierError> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        match timeout_at(deadline.into(), TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                let sent = Instant::now();
                match handshake(stream, hello, token, deadline).await {
                    Ok(Ok(wire)) => {
                        let role = Role::Follower {
                            wire,
                            index: hello.index,
                        };
                        return Ok((role, sent.elapsed()));
                    }
                    Ok(Err(reason)) => {
                        return Err(BarrierError::new(
                            address,
                            format!("worker 0 refused worker {}: {reason}", hello.index),
                        ));
                    }
                    Err(e) => last = e,
                }
            }
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(BarrierError::new(
        address,
        format!(
            "worker {} could not join worker 0 within {} ({last})",
            hello.index,
            crate::human::format_duration(timeout)
        ),
    ))
}

/// One meeting as this worker comes to it: its number, this worker's figure, and whether
/// this worker was interrupted.
#[derive(Clone, Copy)]
struct Meeting {
    round: u64,
    payload: u64,
    interrupted: bool,
}

/// A worker's `STOP round cause`: the cause (any round: a worker interrupted while it waited
/// says so after its arrival, and worker 0 reads it at the next meeting).
fn stop_cause(line: &str) -> Option<String> {
    let mut words = line.strip_prefix("STOP ")?.split_whitespace();
    words.next()?.parse::<u64>().ok()?;
    Some(one_word(words.next().unwrap_or("Ctrl-C")))
}

/// Worker 0's side of one round: every worker admitted and arrived, then "go" to each (or
/// "halt" when a worker, worker 0 included, was interrupted). Returns the payload sum, the
/// delay to sleep and the spread of sending "go".
async fn lead(
    hello: &Hello,
    incoming: &mut mpsc::UnboundedReceiver<Result<Peer, String>>,
    peers: &mut Vec<Peer>,
    meeting: Meeting,
    deadline: Instant,
    flag: Option<&AtomicBool>,
) -> Result<(u64, Duration, Duration), Halt> {
    let Meeting { round, payload, .. } = meeting;
    let cause = || crate::interrupt::cause().to_owned();
    let mut interrupted = meeting.interrupted.then(|| (0u32, cause()));
    let expected = hello.count as usize - 1;
    while peers.len() < expected && interrupted.is_none() {
        let next = tokio::select! {
            next = timeout_at(deadline.into(), incoming.recv()) => next,
            () = interrupted_now(flag) => {
                interrupted = Some((0, cause()));
                break;
            }
        };
        let failure = match next {
            Ok(Some(Ok(peer))) if peers.iter().any(|p| p.index == peer.index) => {
                Some(format!("worker {} joined twice", peer.index))
            }
            Ok(Some(Ok(peer))) => {
                peers.push(peer);
                None
            }
            Ok(Some(Err(reason))) => Some(reason),
            Ok(None) => Some("worker 0 stopped listening".into()),
            Err(_) => {
                let missing: Vec<String> = (1..hello.count)
                    .filter(|i| !peers.iter().any(|p| p.index == *i))
                    .map(|i| i.to_string())
                    .collect();
                Some(format!(
                    "worker(s) {} never arrived ({} of {} workers there before the timeout)",
                    missing.join(", "),
                    peers.len() + 1,
                    hello.count
                ))
            }
        };
        if let Some(reason) = failure {
            tell_all(peers, &format!("ABORT {reason}")).await;
            return Err(reason.into());
        }
    }
    let (mut sum, mut rtt_max) = (payload, 0u64);
    for i in 0..peers.len() {
        if interrupted.as_ref().is_some_and(|(w, _)| *w == 0) {
            break;
        }
        let peer = &mut peers[i];
        let index = peer.index;
        let line = tokio::select! {
            line = peer.wire.recv(deadline) => line,
            () = interrupted_now(flag) => {
                interrupted = Some((0, cause()));
                break;
            }
        };
        if let Some(why) = line.as_deref().ok().and_then(stop_cause) {
            interrupted.get_or_insert((index, why));
            continue;
        }
        let arrival = line.as_deref().ok().and_then(|l| {
            let mut words = l.split_whitespace();
            (words.next()? == "ARRIVE").then_some(())?;
            let r: u64 = words.next()?.parse().ok()?;
            Some((
                r,
                words.next()?.parse::<u64>().ok()?,
                words.next()?.parse::<u64>().ok()?,
            ))
        });
        match arrival {
            Some((r, theirs, rtt)) if r == round => {
                sum += theirs;
                rtt_max = rtt_max.max(rtt);
            }
            _ => {
                let why = match line {
                    Err(WireError::TimedOut) => {
                        format!("did not arrive at window {round} before the timeout")
                    }
                    Err(e) => format!("left the run before window {round} ({e})"),
                    Ok(l) => format!("said `{l}` at window {round}"),
                };
                let reason = format!("worker {index} {why}");
                tell_all(peers, &format!("ABORT {reason}")).await;
                return Err(reason.into());
            }
        }
    }
    if interrupted.is_none() {
        interrupted = stopped_meanwhile(peers, round, deadline).await?;
    }
    if let Some((worker, cause)) = interrupted {
        tell_all(peers, &format!("HALT {worker} {cause}")).await;
        return Err(Halt::Interrupted(worker, cause));
    }
    let delay = MIN_START_DELAY.max(Duration::from_nanos(rtt_max.saturating_mul(2)));
    let sending = Instant::now();
    for i in 0..peers.len() {
        let go = format!("GO {round} {} {sum}", delay.as_nanos());
        if let Err(e) = peers[i].wire.send(&go).await {
            let reason = format!(
                "worker {} left the run at window {round} ({e})",
                peers[i].index
            );
            tell_all(peers, &format!("ABORT {reason}")).await;
            return Err(reason.into());
        }
    }
    let spread = sending.elapsed();
    Ok((sum, delay.saturating_sub(spread), spread))
}

/// A worker that arrived and was interrupted while it waited for worker 0 said `STOP` after
/// its arrival: read what is already there (without waiting), so the window does not open
/// without it. Any other message out of turn stops the run.
async fn stopped_meanwhile(
    peers: &mut [Peer],
    round: u64,
    deadline: Instant,
) -> Result<Option<(u32, String)>, Halt> {
    for i in 0..peers.len() {
        let ready = tokio::time::timeout(Duration::ZERO, peers[i].wire.recv(deadline)).await;
        let Ok(Ok(line)) = ready else {
            // Nothing yet, or a connection that closed: the next meeting says so.
            continue;
        };
        if let Some(cause) = stop_cause(&line) {
            return Ok(Some((peers[i].index, cause)));
        }
        let reason = format!(
            "worker {} said `{line}` out of turn at window {round}",
            peers[i].index
        );
        tell_all(peers, &format!("ABORT {reason}")).await;
        return Err(reason.into());
    }
    Ok(None)
}

/// [`interrupted`] for a `select!` branch.
async fn interrupted_now(flag: Option<&AtomicBool>) {
    interrupted(flag).await;
}

/// A worker's side of one round: arrive (or say it was interrupted and stop at once), then
/// wait for "go", stopping at once if this worker is interrupted meanwhile, and sleep its
/// delay less the half round trip the message took.
async fn follow(
    wire: &mut Wire,
    me: u32,
    meeting: Meeting,
    rtt_ns: u64,
    deadline: Instant,
    flag: Option<&AtomicBool>,
) -> Result<(u64, Duration, Duration), Halt> {
    let Meeting { round, payload, .. } = meeting;
    let stop = async |wire: &mut Wire| {
        let cause = crate::interrupt::cause().to_owned();
        // Worker 0 reads it at its next meeting and halts every worker; this one is done.
        let _ = wire.send(&format!("STOP {round} {cause}")).await;
        Halt::Interrupted(me, cause)
    };
    if meeting.interrupted {
        return Err(stop(wire).await);
    }
    wire.send(&format!("ARRIVE {round} {payload} {rtt_ns}"))
        .await
        .map_err(|e| format!("worker 0 is gone ({e})"))?;
    let line = tokio::select! {
        line = wire.recv(deadline) => line,
        () = interrupted_now(flag) => return Err(stop(wire).await),
    };
    let line = line.map_err(|e| format!("no start from worker 0 for window {round} ({e})"))?;
    if let Some(reason) = line.strip_prefix("ABORT ") {
        return Err(format!("worker 0 stopped the run: {reason}").into());
    }
    if let Some(rest) = line.strip_prefix("HALT ") {
        let mut words = rest.split_whitespace();
        if let Some(worker) = words.next().and_then(|w| w.parse().ok()) {
            let cause = one_word(words.next().unwrap_or("Ctrl-C"));
            return Err(Halt::Interrupted(worker, cause));
        }
    }
    let mut words = line.split_whitespace();
    let go = (words.next() == Some("GO"))
        .then(|| {
            let r: u64 = words.next()?.parse().ok()?;
            let delay: u64 = words.next()?.parse().ok()?;
            let sum: u64 = words.next()?.parse().ok()?;
            Some((r, delay, sum))
        })
        .flatten();
    match go {
        Some((r, delay_ns, sum)) if r == round => {
            let delay = Duration::from_nanos(delay_ns.saturating_sub(rtt_ns / 2));
            Ok((sum, delay, Duration::ZERO))
        }
        _ => Err(format!("worker 0 said `{line}` at window {round}").into()),
    }
}

#[cfg(test)]
mod tests;
