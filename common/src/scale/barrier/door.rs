//! Worker 0's door: every connection's handshake on a task of its own (at most
//! [`MAX_HANDSHAKES`] at once, each within [`super::HANDSHAKE`]), so no peer can hold it; a peer that
//! has the token and fits the run is admitted, one that has it and does not fit stops the run,
//! and one without it is refused, named in worker 0's log and counted, the run untouched.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};

use super::wire::{self, End, Wire, WireError};
use super::{Hello, LOGGED_REFUSALS, MAX_HANDSHAKES, Peer, Token};

/// Peers refused at worker 0's door, each named once in its log.
#[derive(Default)]
pub(super) struct Refusals {
    seen: AtomicU64,
    kept: Mutex<Vec<String>>,
}

impl Refusals {
    pub(super) fn note(&self, peer: SocketAddr, why: &str) {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= LOGGED_REFUSALS {
            let line = format!("{peer}: {why}");
            eprintln!("barrier: refused {line}");
            self.kept
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(line);
        } else if n == LOGGED_REFUSALS + 1 {
            eprintln!("barrier: refused more peers; further refusals are not logged");
        }
    }

    pub(super) fn list(&self) -> Vec<String> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What worker 0's door knows: the run (to check each hello against), the token, how long a
/// peer may take to say who it is, and where refusals are noted.
pub(super) struct Door {
    pub(super) hello: Hello,
    pub(super) token: Token,
    pub(super) handshake: Duration,
    pub(super) refusals: Arc<Refusals>,
}

/// How one connection to worker 0 ended its handshake.
enum Admission {
    /// One of the run's workers, admitted.
    Peer(Peer),
    /// A peer with the token whose hello does not fit the run: every worker stops.
    Mismatch(String),
    /// A peer without the token (or that said nothing valid): refused, the run untouched.
    Stranger(String),
}

/// Worker 0's listener: each connection's handshake on a task of its own (at most
/// [`MAX_HANDSHAKES`] at once), so no peer can hold the door.
pub(super) async fn accept(
    listener: TcpListener,
    door: Arc<Door>,
    sender: mpsc::UnboundedSender<Result<Peer, String>>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of descriptors, say: let them free up rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            door.refusals
                .note(peer, "too many connections saying nothing at once");
            continue;
        };
        let (door, sender) = (door.clone(), sender.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match admit(stream, &door).await {
                Admission::Peer(p) => {
                    let _ = sender.send(Ok(p));
                }
                Admission::Mismatch(reason) => {
                    let _ = sender.send(Err(reason));
                }
                Admission::Stranger(why) => door.refusals.note(peer, &why),
            }
        });
    }
}

/// One connection's handshake at worker 0: the nonce out, an authenticated hello back that
/// fits the run, then `WELCOME`.
async fn admit(stream: TcpStream, door: &Door) -> Admission {
    let deadline = Instant::now() + door.handshake;
    let nonce = wire::nonce();
    let mut wire = Wire::new(stream, door.token.clone(), nonce.clone(), End::Leader);
    if wire.send_plain(&format!("NONCE {nonce}")).await.is_err() {
        return Admission::Stranger("the connection closed".into());
    }
    let line = match wire.recv(deadline).await {
        Ok(line) => line,
        Err(WireError::Unauthenticated) => {
            let _ = wire
                .send_plain("REFUSE not authenticated: this run's barrier needs its token (--barrier-token FILE or FAIRBENCH_BARRIER_TOKEN)")
                .await;
            return Admission::Stranger(
                "not authenticated (no barrier token, or another one)".into(),
            );
        }
        Err(WireError::TimedOut) => {
            return Admission::Stranger(format!(
                "said nothing valid within {}",
                crate::human::format_duration(door.handshake)
            ));
        }
        Err(e) => return Admission::Stranger(format!("no hello ({e})")),
    };
    let Some(theirs) = Hello::parse(&line) else {
        return Admission::Stranger("an authenticated message that is not a hello".into());
    };
    if let Some(reason) = door.hello.mismatch(&theirs) {
        let _ = wire.send(&format!("REFUSE {reason}")).await;
        return Admission::Mismatch(reason);
    }
    match wire.send("WELCOME").await {
        Ok(()) => Admission::Peer(Peer {
            index: theirs.index,
            wire,
        }),
        Err(e) => Admission::Stranger(format!("left before its welcome ({e})")),
    }
}
