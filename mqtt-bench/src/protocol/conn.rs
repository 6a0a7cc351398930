//! One MQTT 3.1.1 connection over a tokio `TcpStream`: the handshake (CONNECT → CONNACK),
//! subscriptions, and the buffered, non-blocking reads and writes the publisher and subscriber
//! loops build on. One task owns a connection and both of its directions, so nothing is shared.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::codec::{self, CodecError, ConnectOptions, Frame, kind};

/// Bytes read per `read` call; a subscriber at speed takes hundreds of messages per read.
const READ_CHUNK: usize = 64 * 1024;

/// Why a connection could not be used; every message is a complete sentence.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("cannot connect to {addr}: {source} — is the broker running?")]
    Unreachable { addr: String, source: io::Error },
    #[error("{addr} did not answer within {waited:?} ({what})")]
    Silent {
        addr: String,
        waited: Duration,
        what: &'static str,
    },
    #[error("{addr} refused the connection: {reason} (CONNACK return code {code})")]
    Refused {
        addr: String,
        code: u8,
        reason: &'static str,
    },
    #[error("{addr} refused the subscription to {filter} (SUBACK 0x80)")]
    SubscribeRefused { addr: String, filter: String },
    #[error("{addr} granted QoS {granted} for {filter}, not the QoS {asked} asked for")]
    Downgraded {
        addr: String,
        filter: String,
        asked: u8,
        granted: u8,
    },
    #[error("{addr} closed the connection{context}")]
    Closed { addr: String, context: String },
    #[error("{addr}: {source}")]
    Io { addr: String, source: io::Error },
    #[error("{addr}: {source}")]
    Codec { addr: String, source: CodecError },
    #[error("{addr} sent an unexpected {what} packet (type {kind})")]
    Unexpected {
        addr: String,
        what: &'static str,
        kind: u8,
    },
}

/// Who to connect to and as whom.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port`.
    pub addr: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// How long connecting, subscribing and unsubscribing may take.
    pub handshake_timeout: Duration,
    /// The largest packet this client accepts from the broker.
    pub max_packet_bytes: usize,
    pub keep_alive_s: u16,
}

pub struct Conn {
    stream: TcpStream,
    addr: String,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    /// Bytes to send; `wstart` is how far they have been written.
    pub wbuf: Vec<u8>,
    wstart: usize,
    max_packet_bytes: usize,
    keep_alive: Duration,
    last_sent: Instant,
    next_packet_id: u16,
}

impl Conn {
    /// Opens the TCP connection and completes the MQTT handshake (clean session).
    pub async fn connect(endpoint: &Endpoint, client_id: &str) -> Result<Conn, ConnError> {
        let addr = endpoint.addr.clone();
        let waited = endpoint.handshake_timeout;
        let stream = tokio::time::timeout(waited, TcpStream::connect(&endpoint.addr))
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
        stream.set_nodelay(true).map_err(|source| ConnError::Io {
            addr: addr.clone(),
            source,
        })?;
        let mut conn = Conn {
            stream,
            addr,
            rbuf: vec![0; READ_CHUNK * 2],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(READ_CHUNK),
            wstart: 0,
            max_packet_bytes: endpoint.max_packet_bytes,
            keep_alive: Duration::from_secs(u64::from(endpoint.keep_alive_s)),
            last_sent: Instant::now(),
            next_packet_id: 1,
        };
        codec::encode_connect(
            &mut conn.wbuf,
            &ConnectOptions {
                client_id,
                username: endpoint.username.as_deref(),
                password: endpoint.password.as_deref(),
                keep_alive_s: endpoint.keep_alive_s,
                clean_session: true,
            },
        );
        conn.flush().await?;
        let frame = conn.handshake_frame(waited, "CONNACK").await?;
        let body = conn.body(&frame);
        if frame.kind != kind::CONNACK || body.len() < 2 {
            return Err(conn.unexpected("CONNACK", frame.kind));
        }
        let code = body[1];
        if code != 0 {
            return Err(ConnError::Refused {
                addr: conn.addr.clone(),
                code,
                reason: codec::connack_reason(code),
            });
        }
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn unexpected(&self, what: &'static str, kind: u8) -> ConnError {
        ConnError::Unexpected {
            addr: self.addr.clone(),
            what,
            kind,
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

    fn packet_id(&mut self) -> u16 {
        let id = self.next_packet_id;
        self.next_packet_id = self.next_packet_id.wrapping_add(1).max(1);
        id
    }

    /// Subscribes and waits for the SUBACK; a refused or downgraded subscription is an error.
    pub async fn subscribe(
        &mut self,
        filter: &str,
        qos: u8,
        waited: Duration,
    ) -> Result<(), ConnError> {
        let id = self.packet_id();
        codec::encode_subscribe(&mut self.wbuf, id, filter, qos);
        self.flush().await?;
        let frame = self.handshake_frame(waited, "SUBACK").await?;
        let body = self.body(&frame);
        if frame.kind != kind::SUBACK || body.len() < 3 {
            return Err(self.unexpected("SUBACK", frame.kind));
        }
        match body[2] {
            0x80 => Err(ConnError::SubscribeRefused {
                addr: self.addr.clone(),
                filter: filter.to_owned(),
            }),
            granted if granted != qos => Err(ConnError::Downgraded {
                addr: self.addr.clone(),
                filter: filter.to_owned(),
                asked: qos,
                granted,
            }),
            _ => Ok(()),
        }
    }

    /// Sends DISCONNECT and closes; errors are ignored, the connection is being dropped anyway.
    pub async fn disconnect(mut self) {
        self.wbuf.truncate(self.wstart);
        codec::encode_disconnect(&mut self.wbuf);
        let _ = tokio::time::timeout(Duration::from_millis(200), self.flush()).await;
    }

    /// Waits for the next whole packet during a handshake, skipping keep-alive answers.
    async fn handshake_frame(
        &mut self,
        waited: Duration,
        what: &'static str,
    ) -> Result<Frame, ConnError> {
        let deadline = Instant::now() + waited;
        loop {
            if let Some(frame) = self.next_frame()? {
                if frame.kind == kind::PINGRESP {
                    continue;
                }
                return Ok(frame);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.fill()).await {
                Ok(result) => result?,
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
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ConnError> {
        let found = codec::split_frame(&self.rbuf[self.rstart..self.rend], self.max_packet_bytes)
            .map_err(|source| ConnError::Codec {
            addr: self.addr.clone(),
            source,
        })?;
        Ok(found.map(|frame| {
            let start = self.rstart;
            self.rstart += frame.end();
            Frame {
                body: start + frame.body.start..start + frame.body.end,
                ..frame
            }
        }))
    }

    #[inline]
    pub fn body(&self, frame: &Frame) -> &[u8] {
        &self.rbuf[frame.body.clone()]
    }

    /// Makes room for at least one more chunk (and for a whole packet of the largest size).
    fn make_room(&mut self) {
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        } else if self.rbuf.len() - self.rend < READ_CHUNK {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        if self.rbuf.len() - self.rend < READ_CHUNK {
            let grown = (self.rend + READ_CHUNK).max(self.rbuf.len() * 2);
            self.rbuf.resize(grown, 0);
        }
    }

    /// Reads what is available without waiting: `Ok(true)` when bytes arrived.
    #[inline]
    pub fn try_fill(&mut self) -> Result<bool, ConnError> {
        self.make_room();
        match self.stream.try_read(&mut self.rbuf[self.rend..]) {
            Ok(0) => Err(self.closed("")),
            Ok(n) => {
                self.rend += n;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// Waits until bytes arrive and reads them.
    pub async fn fill(&mut self) -> Result<(), ConnError> {
        loop {
            self.stream.readable().await.map_err(|e| self.io_error(e))?;
            if self.try_fill()? {
                return Ok(());
            }
        }
    }

    /// Writes as much of the pending bytes as the socket takes now: `Ok(true)` when all went.
    #[inline]
    pub fn try_flush(&mut self) -> Result<bool, ConnError> {
        while self.wstart < self.wbuf.len() {
            match self.stream.try_write(&self.wbuf[self.wstart..]) {
                Ok(0) => return Err(self.closed("")),
                Ok(n) => self.wstart += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(self.io_error(e)),
            }
        }
        self.wbuf.clear();
        self.wstart = 0;
        self.last_sent = Instant::now();
        Ok(true)
    }

    /// Bytes still waiting to be written.
    #[inline]
    pub fn unflushed(&self) -> usize {
        self.wbuf.len() - self.wstart
    }

    /// Writes every pending byte, waiting for the socket as needed.
    pub async fn flush(&mut self) -> Result<(), ConnError> {
        while !self.try_flush()? {
            self.stream.writable().await.map_err(|e| self.io_error(e))?;
        }
        Ok(())
    }

    /// Waits until the socket can be read, or written when `want_write`; returns
    /// (readable, writable).
    pub async fn ready(&self, want_write: bool) -> Result<(bool, bool), ConnError> {
        let interest = if want_write {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        let ready = self
            .stream
            .ready(interest)
            .await
            .map_err(|e| self.io_error(e))?;
        Ok((
            ready.is_readable() || ready.is_read_closed(),
            ready.is_writable(),
        ))
    }

    /// Queues a PINGREQ when nothing was sent for half the keep-alive, so a quiet subscriber
    /// is not disconnected in a long window.
    #[inline]
    pub fn keep_alive_due(&mut self, now: Instant) {
        if !self.keep_alive.is_zero() && now.duration_since(self.last_sent) > self.keep_alive / 2 {
            codec::encode_pingreq(&mut self.wbuf);
            self.last_sent = now;
        }
    }
}
