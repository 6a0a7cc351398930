//! One MQTT connection (3.1.1 or 5) over a [`Transport`]: the handshake (CONNECT → CONNACK,
//! with what the broker announced), subscriptions, and the buffered reads and writes the
//! publisher, subscriber and connection-storm loops build on. One task owns a connection and
//! both of its directions, so nothing is shared; nothing reconnects behind its owner's back.

use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::tls::{Negotiated, TlsError};

use super::codec::{self, CodecError, ConnAckInfo, ConnectFields, Incoming, Protocol};
use super::reason;
use super::transport::{TlsLink, Transport};

/// Bytes a throughput client reads per call: a subscriber at speed takes hundreds of messages
/// per read.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Bytes an idle client (connection storms) reserves per read: enough for every control packet,
/// so ten thousand of them stay small; a larger packet grows the buffer as it arrives.
pub const IDLE_READ_BYTES: usize = 64;

/// Why a connection could not be used; every message is a complete sentence.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("cannot connect to {addr}: {source} — is the broker running?")]
    Unreachable { addr: Arc<str>, source: io::Error },
    /// The TLS handshake failed; the message names the host and why ("the certificate of
    /// HOST did not verify: …").
    #[error("{source}")]
    Tls { addr: Arc<str>, source: TlsError },
    #[error("{addr} did not answer within {waited:?} ({what})")]
    Silent {
        addr: Arc<str>,
        waited: Duration,
        what: &'static str,
    },
    #[error("{addr} refused the {protocol} connection: {reason}")]
    Refused {
        addr: Arc<str>,
        protocol: Protocol,
        connack: Box<ConnAckInfo>,
        reason: String,
    },
    #[error("{addr} refused the subscription to {filter}: {reason}")]
    SubscribeRefused {
        addr: Arc<str>,
        filter: String,
        code: u8,
        reason: String,
    },
    #[error("{addr} granted QoS {granted} for {filter}, not the QoS {asked} asked for")]
    Downgraded {
        addr: Arc<str>,
        filter: String,
        asked: u8,
        granted: u8,
    },
    #[error(
        "{addr} closed the connection instead of answering the {protocol} CONNECT with a CONNACK{context}"
    )]
    NoConnAck {
        addr: Arc<str>,
        protocol: Protocol,
        context: String,
    },
    #[error("{addr} does not accept {what}: {detail}")]
    TooLarge {
        addr: Arc<str>,
        what: &'static str,
        detail: String,
    },
    #[error("{addr} does not support {what}: {detail}")]
    Unsupported {
        addr: Arc<str>,
        what: &'static str,
        detail: String,
    },
    #[error("{addr} closed the connection{context}")]
    Closed { addr: Arc<str>, context: String },
    #[error("{addr} disconnected the client: {}", reason::describe(*.code))]
    Disconnected { addr: Arc<str>, code: u8 },
    #[error("{addr}: {source}")]
    Io { addr: Arc<str>, source: io::Error },
    #[error("{addr}: {source}")]
    Codec { addr: Arc<str>, source: CodecError },
    #[error("{addr} sent an unexpected {what}")]
    Unexpected { addr: Arc<str>, what: String },
}

impl ConnError {
    /// Whether the broker declined the protocol itself: a refused CONNECT, or a connection
    /// closed in answer to it.
    pub fn refuses_protocol(&self) -> bool {
        matches!(
            self,
            ConnError::Refused { .. } | ConnError::NoConnAck { .. }
        )
    }

    /// Whether the broker declined what was asked (a CONNACK or SUBACK refusal, a downgraded
    /// QoS, a feature it says it lacks): the system does not do what the scenario needs, which
    /// is a `refused` cell, not a failure of the run.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ConnError::Refused { .. }
                | ConnError::SubscribeRefused { .. }
                | ConnError::Downgraded { .. }
                | ConnError::Unsupported { .. }
        )
    }
}

/// Who to connect to, as whom, speaking which protocol, with the run's client limits, over TLS
/// for `mqtts://`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port`, for messages.
    pub addr: Arc<str>,
    /// What `addr` resolved to, once, when the broker was reached.
    pub socket_addrs: Arc<[SocketAddr]>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub protocol: Protocol,
    /// How long connecting, subscribing and unsubscribing may take.
    pub handshake_timeout: Duration,
    /// The largest packet this client accepts from the broker.
    pub max_packet_bytes: usize,
    pub keep_alive_s: u16,
    /// Local addresses client sockets bind to, in turn (none: the kernel's choice).
    pub source_addrs: Arc<[IpAddr]>,
    /// `mqtts://`: the TLS every connection starts with.
    pub tls: Option<TlsLink>,
}

impl Endpoint {
    /// The source address of the `index`-th client.
    pub fn source(&self, index: usize) -> Option<IpAddr> {
        (!self.source_addrs.is_empty()).then(|| self.source_addrs[index % self.source_addrs.len()])
    }

    /// The broker address to connect to from `source` (the same address family).
    fn target(&self, source: Option<IpAddr>) -> Option<SocketAddr> {
        let family = |a: &SocketAddr| source.is_none_or(|s| s.is_ipv4() == a.is_ipv4());
        self.socket_addrs.iter().copied().find(family)
    }
}

/// The session a CONNECT asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// 3.1.1 clean session / 5 clean start.
    pub clean: bool,
    /// MQTT 5: seconds the broker keeps the session after a disconnect (3.1.1 keeps a
    /// non-clean session until it is resumed or cleaned).
    pub expiry_s: Option<u32>,
}

impl Session {
    pub const CLEAN: Session = Session {
        clean: true,
        expiry_s: None,
    };
}

/// How one client connects.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions<'a> {
    pub client_id: &'a str,
    pub session: Session,
    /// Bytes reserved per read ([`READ_CHUNK_BYTES`] or [`IDLE_READ_BYTES`]).
    pub read_chunk: usize,
    /// Which of the endpoint's source addresses this client uses.
    pub client_index: usize,
}

impl<'a> ConnectOptions<'a> {
    /// A throughput client on a clean session.
    pub fn clean(client_id: &'a str, client_index: usize) -> ConnectOptions<'a> {
        ConnectOptions {
            client_id,
            session: Session::CLEAN,
            read_chunk: READ_CHUNK_BYTES,
            client_index,
        }
    }
}

/// How the connection was made: the TCP connect and the TLS handshake apart from the MQTT
/// handshake.
#[derive(Debug, Clone)]
pub struct Handshake {
    pub tcp: Duration,
    /// What TLS negotiated, with its handshake time (`None`: plaintext).
    pub tls: Option<Negotiated>,
    pub connack: Box<ConnAckInfo>,
}

pub struct Conn {
    io: Transport,
    addr: Arc<str>,
    protocol: Protocol,
    rbuf: BytesMut,
    read_chunk: usize,
    /// Bytes the packet at the front of `rbuf` still lacks.
    needed: usize,
    /// Bytes to send; `wstart` is how far they have been written.
    pub wbuf: BytesMut,
    wstart: usize,
    max_packet_bytes: usize,
    ping_every: Duration,
    last_sent: Instant,
    next_packet_id: u16,
}

impl Conn {
    /// Opens the stream and completes the MQTT handshake; a refused CONNECT is an error that
    /// carries the broker's reason.
    pub async fn connect(
        endpoint: &Endpoint,
        options: &ConnectOptions<'_>,
    ) -> Result<(Conn, Handshake), ConnError> {
        let addr = endpoint.addr.clone();
        let waited = endpoint.handshake_timeout;
        let began = Instant::now();
        let source = endpoint.source(options.client_index);
        let target = endpoint
            .target(source)
            .ok_or_else(|| ConnError::Unreachable {
                addr: addr.clone(),
                source: io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    "no address of the broker matches the source address's family",
                ),
            })?;
        let tcp_stream = tokio::time::timeout(waited, Transport::tcp(target, source))
            .await
            .map_err(|_| ConnError::Silent {
                addr: addr.clone(),
                waited,
                what: "TCP connect",
            })?
            .map_err(|source| ConnError::Unreachable {
                addr: addr.clone(),
                source,
            })?;
        let tcp = began.elapsed();
        let (io, tls) = match &endpoint.tls {
            None => (Transport::Tcp(tcp_stream), None),
            Some(link) => {
                let (io, negotiated) = Transport::tls(tcp_stream, link, waited, options.read_chunk)
                    .await
                    .map_err(|source| ConnError::Tls {
                        addr: addr.clone(),
                        source,
                    })?;
                (io, Some(negotiated))
            }
        };
        let mut conn = Conn {
            io,
            addr,
            protocol: endpoint.protocol,
            rbuf: BytesMut::with_capacity(options.read_chunk),
            read_chunk: options.read_chunk,
            needed: 0,
            wbuf: BytesMut::with_capacity(options.read_chunk.min(READ_CHUNK_BYTES)),
            wstart: 0,
            max_packet_bytes: endpoint.max_packet_bytes,
            ping_every: Duration::from_secs(u64::from(endpoint.keep_alive_s)) / 2,
            last_sent: Instant::now(),
            next_packet_id: 1,
        };
        let fields = ConnectFields {
            client_id: options.client_id,
            username: endpoint.username.as_deref(),
            password: endpoint.password.as_deref(),
            keep_alive_s: endpoint.keep_alive_s,
            clean: options.session.clean,
            session_expiry_s: options.session.expiry_s,
            max_packet_bytes: u32::try_from(endpoint.max_packet_bytes).unwrap_or(u32::MAX),
        };
        codec::encode_connect(&mut conn.wbuf, conn.protocol, &fields).map_err(|source| {
            ConnError::Codec {
                addr: conn.addr.clone(),
                source,
            }
        })?;
        conn.flush().await?;
        let answer = conn
            .handshake_packet(waited, "CONNACK")
            .await
            .map_err(|e| match e {
                ConnError::Closed { addr, context } => ConnError::NoConnAck {
                    addr,
                    protocol: endpoint.protocol,
                    context: format!(
                        "{}{}",
                        context.replace(" instead of answering with a CONNACK", ""),
                        plaintext_hint(endpoint)
                    ),
                },
                e => e,
            })?;
        let connack = match answer {
            Incoming::ConnAck(connack) => connack,
            other => return Err(conn.unexpected(&format!("{} before the CONNACK", other.name()))),
        };
        if !connack.accepted() {
            return Err(ConnError::Refused {
                addr: conn.addr.clone(),
                protocol: conn.protocol,
                reason: connack.refusal(conn.protocol),
                connack,
            });
        }
        if let Some(keep_alive) = connack.server_keep_alive {
            // MQTT 5: the broker's keep-alive replaces the client's.
            conn.ping_every = Duration::from_secs(u64::from(keep_alive)) / 2;
        }
        Ok((conn, Handshake { tcp, tls, connack }))
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The local address the connection was made from.
    pub fn local_ip(&self) -> Option<IpAddr> {
        self.io.local_ip()
    }

    /// How often a quiet connection pings (half the keep-alive unless changed).
    pub fn set_ping_every(&mut self, every: Duration) {
        self.ping_every = every;
    }

    pub fn unexpected(&self, what: &str) -> ConnError {
        ConnError::Unexpected {
            addr: self.addr.clone(),
            what: what.to_owned(),
        }
    }

    pub fn io_error(&self, source: io::Error) -> ConnError {
        if matches!(
            source.kind(),
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::UnexpectedEof
        ) {
            return self.closed(&format!(" ({source})"));
        }
        ConnError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    pub fn closed(&self, context: &str) -> ConnError {
        ConnError::Closed {
            addr: self.addr.clone(),
            context: context.to_owned(),
        }
    }

    pub fn codec_error(&self, source: CodecError) -> ConnError {
        ConnError::Codec {
            addr: self.addr.clone(),
            source,
        }
    }

    /// A DISCONNECT from the broker, as an error.
    pub fn disconnected(&self, code: u8) -> ConnError {
        ConnError::Disconnected {
            addr: self.addr.clone(),
            code,
        }
    }

    pub fn packet_id(&mut self) -> u16 {
        let id = self.next_packet_id;
        self.next_packet_id = self.next_packet_id.wrapping_add(1).max(1);
        id
    }

    /// Subscribes to `filters` and waits for the SUBACK; a refused or downgraded filter is an
    /// error carrying the broker's reason code.
    pub async fn subscribe(
        &mut self,
        filters: &[(&str, u8)],
        waited: Duration,
    ) -> Result<(), ConnError> {
        let id = self.packet_id();
        codec::encode_subscribe(&mut self.wbuf, self.protocol, id, filters)
            .map_err(|e| self.codec_error(e))?;
        self.flush().await?;
        let codes = match self.handshake_packet(waited, "SUBACK").await? {
            Incoming::SubAck { codes, .. } => codes,
            other => return Err(self.unexpected(&format!("{} instead of a SUBACK", other.name()))),
        };
        for (&(filter, asked), &code) in filters.iter().zip(&codes) {
            if code >= 0x80 {
                let why = match self.protocol {
                    Protocol::V311 => "failure (SUBACK 0x80)".to_owned(),
                    Protocol::V5 => reason::describe(code),
                };
                return Err(ConnError::SubscribeRefused {
                    addr: self.addr.clone(),
                    filter: filter.to_owned(),
                    code,
                    reason: why,
                });
            }
            if code != asked {
                return Err(ConnError::Downgraded {
                    addr: self.addr.clone(),
                    filter: filter.to_owned(),
                    asked,
                    granted: code,
                });
            }
        }
        Ok(())
    }

    /// Sends DISCONNECT and closes; errors are ignored, the connection is being dropped anyway.
    pub async fn disconnect(mut self) {
        self.wbuf.truncate(self.wstart);
        codec::encode_disconnect(&mut self.wbuf, self.protocol);
        let _ = tokio::time::timeout(Duration::from_millis(200), self.flush()).await;
    }

    /// Sends DISCONNECT and shuts the stream down, leaving this connection unusable (its owner
    /// replaces it with a new one): a client going away on a session that outlives it.
    pub async fn leave(&mut self) {
        self.wbuf.truncate(self.wstart);
        codec::encode_disconnect(&mut self.wbuf, self.protocol);
        let wait = Duration::from_millis(200);
        let _ = tokio::time::timeout(wait, self.flush()).await;
        let _ = tokio::time::timeout(wait, poll_fn(|cx| self.io.poll_shutdown(cx))).await;
    }

    /// Sends DISCONNECT and waits up to `wait` for the broker to close first, so the
    /// connection's TIME_WAIT stays on the broker's side and this machine's ephemeral ports
    /// are free for the next storm. Returns whether the broker closed in time.
    pub async fn close_gracefully(mut self, wait: Duration) -> bool {
        self.wbuf.truncate(self.wstart);
        codec::encode_disconnect(&mut self.wbuf, self.protocol);
        let closed = tokio::time::timeout(wait, async {
            if self.flush().await.is_err() {
                return;
            }
            loop {
                self.rbuf.clear();
                if self.fill().await.is_err() {
                    return;
                }
            }
        })
        .await
        .is_ok();
        let _ = tokio::time::timeout(wait, poll_fn(|cx| self.io.poll_shutdown(cx))).await;
        closed
    }

    /// Waits for the next whole packet during a handshake, skipping keep-alive answers.
    async fn handshake_packet(
        &mut self,
        waited: Duration,
        what: &'static str,
    ) -> Result<Incoming, ConnError> {
        let deadline = Instant::now() + waited;
        loop {
            if let Some(packet) = self.next_packet()? {
                match packet {
                    Incoming::PingResp => continue,
                    Incoming::Disconnect { code } => return Err(self.disconnected(code)),
                    packet => return Ok(packet),
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.fill()).await {
                Ok(result) => result.map_err(|e| match e {
                    ConnError::Closed { addr, context } => ConnError::Closed {
                        addr,
                        context: format!("{context} instead of answering with a {what}"),
                    },
                    e => e,
                })?,
                Err(_) => {
                    return Err(ConnError::Silent {
                        addr: self.addr.clone(),
                        waited,
                        what,
                    });
                }
            }
        }
    }

    /// The next whole packet already read, if any.
    #[inline]
    pub fn next_packet(&mut self) -> Result<Option<Incoming>, ConnError> {
        codec::read(
            &mut self.rbuf,
            self.protocol,
            self.max_packet_bytes,
            &mut self.needed,
        )
        .map_err(|e| self.codec_error(e))
    }

    /// Makes room for the next read: a chunk, or the rest of a packet larger than that.
    #[inline]
    fn make_room(&mut self) {
        let want = self.read_chunk.max(self.needed);
        if self.rbuf.capacity() - self.rbuf.len() < want {
            self.rbuf.reserve(want);
        }
    }

    #[inline]
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnError>> {
        self.make_room();
        match self.io.poll_read(cx, &mut self.rbuf) {
            Poll::Ready(Ok(0)) => Poll::Ready(Err(self.closed(""))),
            Poll::Ready(Ok(_)) => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(self.io_error(e))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Reads what is available without waiting: `Ok(true)` when bytes arrived.
    #[inline]
    pub fn try_fill(&mut self) -> Result<bool, ConnError> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.poll_fill(&mut cx) {
            Poll::Ready(result) => result.map(|()| true),
            Poll::Pending => Ok(false),
        }
    }

    /// Waits until bytes arrive and reads them.
    pub async fn fill(&mut self) -> Result<(), ConnError> {
        poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Bytes read and not yet taken as packets.
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.rbuf.len()
    }

    /// Writes as much of the pending bytes as the stream takes: ready with `true` when all
    /// went, pending when it took none (and is full).
    #[inline]
    fn poll_flush_some(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, ConnError>> {
        let mut progressed = false;
        while self.wstart < self.wbuf.len() {
            match self.io.poll_write(cx, &self.wbuf[self.wstart..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(self.closed(""))),
                Poll::Ready(Ok(n)) => {
                    self.wstart += n;
                    progressed = true;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.io_error(e))),
                Poll::Pending if progressed => return Poll::Ready(Ok(false)),
                Poll::Pending => return Poll::Pending,
            }
        }
        // TLS: the records rustls still holds go now, or when the socket takes them.
        match self.io.poll_flush(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(self.io_error(e))),
            Poll::Pending if progressed => return Poll::Ready(Ok(false)),
            Poll::Pending => return Poll::Pending,
        }
        self.wbuf.clear();
        self.wstart = 0;
        self.last_sent = Instant::now();
        Poll::Ready(Ok(true))
    }

    /// Writes as much as the stream takes now: `Ok(true)` when everything went.
    #[inline]
    pub fn try_flush(&mut self) -> Result<bool, ConnError> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.poll_flush_some(&mut cx) {
            Poll::Ready(result) => result,
            Poll::Pending => Ok(false),
        }
    }

    /// Bytes still waiting to be written.
    #[inline]
    pub fn unflushed(&self) -> usize {
        self.wbuf.len() - self.wstart
    }

    /// Writes every pending byte, waiting for the stream as needed.
    pub async fn flush(&mut self) -> Result<(), ConnError> {
        while !poll_fn(|cx| self.poll_flush_some(cx)).await? {}
        Ok(())
    }

    /// Waits until bytes arrive (read into the buffer) or, when `want_write`, pending bytes
    /// could be written; returns (read, wrote).
    pub async fn io(&mut self, want_write: bool) -> Result<(bool, bool), ConnError> {
        poll_fn(|cx| {
            let read = match self.poll_fill(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => true,
                Poll::Pending => false,
            };
            let wrote = want_write
                && (self.unflushed() > 0 || self.io.holds_output())
                && match self.poll_flush_some(cx) {
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(_)) => true,
                    Poll::Pending => false,
                };
            if read || wrote {
                Poll::Ready(Ok((read, wrote)))
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Queues a PINGREQ when nothing was sent for `ping_every`, so a quiet client is not
    /// disconnected for want of traffic. Returns whether one was queued.
    #[inline]
    pub fn keep_alive_due(&mut self, now: Instant) -> bool {
        if !self.ping_every.is_zero() && now.duration_since(self.last_sent) >= self.ping_every {
            codec::encode_pingreq(&mut self.wbuf, self.protocol);
            self.last_sent = now;
            return true;
        }
        false
    }

    /// When the next keep-alive ping falls due.
    pub fn next_ping(&self) -> Option<Instant> {
        (!self.ping_every.is_zero()).then(|| self.last_sent + self.ping_every)
    }

    /// Whether this connection's reads are of the throughput size.
    pub fn read_chunk(&self) -> usize {
        self.read_chunk
    }
}

/// What a plaintext client told "connection closed" before any CONNACK most likely met: a TLS
/// listener (Mosquitto resets a plaintext client at once).
fn plaintext_hint(endpoint: &Endpoint) -> &'static str {
    if endpoint.tls.is_none() && endpoint.protocol == Protocol::V311 {
        " — is this a TLS port? (use mqtts://)"
    } else {
        ""
    }
}
