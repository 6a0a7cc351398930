//! The start barrier: worker 0 listens, the others connect and say who they are (run id,
//! options hash, tool version, index, count); before every measured window each worker
//! arrives, and when all N are there worker 0 answers "start in D" (a relative delay: no
//! synchronized clocks needed). A mismatch, a worker missing past `--barrier-timeout` or a
//! worker that leaves stops every worker with [`BARRIER_EXIT`].
//!
//! The protocol is one line per message over one TCP connection per worker, kept for the run:
//! `HELLO run hash version index count` → `WELCOME` | `REFUSE reason`; then per window
//! `ARRIVE round payload rtt_ns` → `GO round delay_ns payload_sum` | `ABORT reason`. A worker
//! interrupted (Ctrl-C) says `STOP round` instead of arriving, and worker 0 (on its own
//! interrupt too) answers every worker `HALT index`: each stops at that meeting as an
//! interrupted run does ([`BarrierError::Interrupted`]), not as a failed one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout_at;

/// The exit code of a run stopped at the barrier (0, 1 and 2 are the usual ones).
pub const BARRIER_EXIT: u8 = 3;

/// The least time between worker 0's "go" and the window's start: room for the message to
/// reach every worker.
const MIN_START_DELAY: Duration = Duration::from_millis(20);

/// Why the barrier stopped the run.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum BarrierError {
    #[error("barrier {address}: {reason}")]
    Failed { address: String, reason: String },
    /// A worker was interrupted and told the others at a meeting: the run stops as an
    /// interrupted one does (cells kept, results written), on every worker.
    #[error("barrier {address}: worker {worker} was interrupted (Ctrl-C)")]
    Interrupted { address: String, worker: u32 },
}

/// How one meeting ended, when it did not open the window.
enum Halt {
    Failed(String),
    Interrupted(u32),
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
}

struct Peer {
    index: u32,
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

enum Role {
    Leader {
        hello: Hello,
        incoming: mpsc::UnboundedReceiver<Result<Peer, String>>,
        peers: Vec<Peer>,
        acceptor: tokio::task::JoinHandle<()>,
    },
    Follower {
        reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
        writer: tokio::net::tcp::OwnedWriteHalf,
    },
}

/// One worker's end of the barrier.
pub struct Barrier {
    role: Role,
    address: String,
    timeout: Duration,
    round: u64,
    record: BarrierRecord,
    /// This process's Ctrl-C flag: set, the next meeting stops every worker.
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

async fn read_line(
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    deadline: Instant,
) -> Result<String, String> {
    let mut line = String::new();
    match timeout_at(deadline.into(), reader.read_line(&mut line)).await {
        Err(_) => Err("timed out".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(0)) => Err("the connection closed".into()),
        Ok(Ok(_)) => Ok(line.trim_end().to_owned()),
    }
}

impl Barrier {
    /// Joins the run: worker 0 (`hello.index == 0`) listens on the barrier's port and admits
    /// the others as they come; any other worker connects (retrying until the timeout, as
    /// worker 0 may start later) and is admitted or refused at once.
    pub async fn join(
        address: &str,
        hello: Hello,
        timeout: Duration,
    ) -> Result<Barrier, BarrierError> {
        let (_, port) = parse_address(address).map_err(|e| BarrierError::new(address, e))?;
        let mut record = BarrierRecord {
            address: address.to_owned(),
            ..BarrierRecord::default()
        };
        let role = if hello.index == 0 {
            let listener = TcpListener::bind(("0.0.0.0", port)).await.map_err(|e| {
                BarrierError::new(
                    address,
                    format!("worker 0 cannot listen on port {port}: {e}"),
                )
            })?;
            let (sender, incoming) = mpsc::unbounded_channel();
            let acceptor = tokio::spawn(accept(listener, hello.clone(), sender, timeout));
            Role::Leader {
                hello,
                incoming,
                peers: Vec::new(),
                acceptor,
            }
        } else {
            let (role, rtt) = connect(address, &hello, timeout).await?;
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

    /// Watches `interrupt` (the run's Ctrl-C flag): once it is set, this worker's next
    /// meeting stops the run on every worker as an interrupted run.
    pub fn watch(&mut self, interrupt: Arc<AtomicBool>) {
        self.interrupt = Some(interrupt);
    }

    pub fn record(&self) -> &BarrierRecord {
        &self.record
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
        let interrupted = self
            .interrupt
            .as_ref()
            .is_some_and(|i| i.load(Ordering::SeqCst));
        let meeting = Meeting {
            round: self.round,
            payload,
            interrupted,
        };
        let result = match &mut self.role {
            Role::Leader {
                hello,
                incoming,
                peers,
                ..
            } => lead(hello, incoming, peers, meeting, deadline).await,
            Role::Follower { reader, writer } => {
                // Worker 0 may arrive a whole timeout after this worker (its preparation)
                // and then wait a timeout for the others: it, not this worker, says who is
                // missing.
                let rtt = self.record.rtt_ns;
                let deadline = deadline + self.timeout;
                follow(reader, writer, meeting, rtt, deadline).await
            }
        };
        let (sum, delay, spread) = match result {
            Ok(go) => go,
            Err(Halt::Failed(reason)) => return Err(self.failed(reason)),
            Err(Halt::Interrupted(worker)) => {
                self.record.failure = Some(format!("worker {worker} was interrupted (Ctrl-C)"));
                return Err(BarrierError::Interrupted {
                    address: self.address.clone(),
                    worker,
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
            for peer in peers.iter_mut() {
                let _ = peer
                    .writer
                    .write_all(format!("ABORT {reason}\n").as_bytes())
                    .await;
            }
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

/// Worker 0's listener: admits each worker whose hello matches, refuses the others (and
/// reports them, so worker 0 stops too).
async fn accept(
    listener: TcpListener,
    hello: Hello,
    sender: mpsc::UnboundedSender<Result<Peer, String>>,
    timeout: Duration,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (read, mut writer) = stream.into_split();
        let mut reader = BufReader::new(read);
        let line = match read_line(&mut reader, Instant::now() + timeout).await {
            Ok(line) => line,
            Err(_) => continue,
        };
        let Some(theirs) = Hello::parse(&line) else {
            // Not a worker (a port scan, a health check): not the run's business.
            continue;
        };
        if let Some(reason) = hello.mismatch(&theirs) {
            let _ = writer
                .write_all(format!("REFUSE {reason}\n").as_bytes())
                .await;
            let _ = sender.send(Err(reason));
            continue;
        }
        if writer.write_all(b"WELCOME\n").await.is_ok() {
            let peer = Peer {
                index: theirs.index,
                reader,
                writer,
            };
            if sender.send(Ok(peer)).is_err() {
                return;
            }
        }
    }
}

/// A worker's connection to worker 0, retried until the deadline, and the round trip of
/// its admission.
async fn connect(
    address: &str,
    hello: &Hello,
    timeout: Duration,
) -> Result<(Role, Duration), BarrierError> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        match timeout_at(deadline.into(), TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                let (read, mut writer) = stream.into_split();
                let mut reader = BufReader::new(read);
                let sent = Instant::now();
                let written = writer.write_all(hello.line().as_bytes()).await;
                let answer = match written {
                    Ok(()) => read_line(&mut reader, deadline).await,
                    Err(e) => Err(e.to_string()),
                };
                let rtt = sent.elapsed();
                match answer {
                    Ok(line) if line == "WELCOME" => {
                        return Ok((Role::Follower { reader, writer }, rtt));
                    }
                    Ok(line) => {
                        let reason = line.strip_prefix("REFUSE ").unwrap_or(&line);
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

/// Worker 0's side of one round: every worker admitted and arrived, then "go" to each (or
/// "halt" when a worker, worker 0 included, was interrupted). Returns the payload sum, the
/// delay to sleep and the spread of sending "go".
async fn lead(
    hello: &Hello,
    incoming: &mut mpsc::UnboundedReceiver<Result<Peer, String>>,
    peers: &mut Vec<Peer>,
    meeting: Meeting,
    deadline: Instant,
) -> Result<(u64, Duration, Duration), Halt> {
    let Meeting { round, payload, .. } = meeting;
    let mut interrupted = meeting.interrupted.then_some(0u32);
    let expected = hello.count as usize - 1;
    let abort = async |peers: &mut Vec<Peer>, reason: &str| {
        for peer in peers.iter_mut() {
            let _ = peer
                .writer
                .write_all(format!("ABORT {reason}\n").as_bytes())
                .await;
        }
    };
    while peers.len() < expected {
        let next = timeout_at(deadline.into(), incoming.recv()).await;
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
            abort(peers, &reason).await;
            return Err(reason.into());
        }
    }
    let (mut sum, mut rtt_max) = (payload, 0u64);
    for i in 0..peers.len() {
        let peer = &mut peers[i];
        let index = peer.index;
        let line = read_line(&mut peer.reader, deadline).await;
        if line.as_deref().is_ok_and(|l| l == format!("STOP {round}")) {
            interrupted.get_or_insert(index);
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
                    Err(e) if e == "timed out" => {
                        format!("did not arrive at window {round} before the timeout")
                    }
                    Err(e) => format!("left the run before window {round} ({e})"),
                    Ok(l) => format!("said `{l}` at window {round}"),
                };
                let reason = format!("worker {index} {why}");
                abort(peers, &reason).await;
                return Err(reason.into());
            }
        }
    }
    if let Some(worker) = interrupted {
        for peer in peers.iter_mut() {
            let _ = peer
                .writer
                .write_all(format!("HALT {worker}\n").as_bytes())
                .await;
        }
        return Err(Halt::Interrupted(worker));
    }
    let delay = MIN_START_DELAY.max(Duration::from_nanos(rtt_max.saturating_mul(2)));
    let sending = Instant::now();
    for peer in peers.iter_mut() {
        let go = format!("GO {round} {} {sum}\n", delay.as_nanos());
        if let Err(e) = peer.writer.write_all(go.as_bytes()).await {
            let reason = format!("worker {} left the run at window {round} ({e})", peer.index);
            abort(peers, &reason).await;
            return Err(reason.into());
        }
    }
    let spread = sending.elapsed();
    Ok((sum, delay.saturating_sub(spread), spread))
}

/// A worker's side of one round: arrive (or say it was interrupted), then wait for "go" and
/// sleep its delay less the half round trip the message took.
async fn follow(
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    meeting: Meeting,
    rtt_ns: u64,
    deadline: Instant,
) -> Result<(u64, Duration, Duration), Halt> {
    let Meeting { round, payload, .. } = meeting;
    let arrive = if meeting.interrupted {
        format!("STOP {round}\n")
    } else {
        format!("ARRIVE {round} {payload} {rtt_ns}\n")
    };
    writer
        .write_all(arrive.as_bytes())
        .await
        .map_err(|e| format!("worker 0 is gone ({e})"))?;
    let line = read_line(reader, deadline)
        .await
        .map_err(|e| format!("no start from worker 0 for window {round} ({e})"))?;
    if let Some(reason) = line.strip_prefix("ABORT ") {
        return Err(format!("worker 0 stopped the run: {reason}").into());
    }
    if let Some(worker) = line.strip_prefix("HALT ").and_then(|w| w.parse().ok()) {
        return Err(Halt::Interrupted(worker));
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
