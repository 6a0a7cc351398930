//! A TLS connection driven by hand over a tokio socket: rustls's `ClientConnection` fed from
//! one large socket read at a time and drained into the caller's buffer, its records written
//! with one vectored write.
//!
//! Why not tokio-rustls's stream after the handshake: it reads the socket through rustls's
//! `read_tls`, at most 4 KiB a call, and returns as soon as one read yields plaintext. A
//! subscriber receiving small messages (a QoS 0 publish of 64 bytes is one record of about 110)
//! then makes about five times the `recv` calls a plaintext connection does for the same
//! messages, and the kernel's side of those calls (and the ACKs they send) became most of the
//! client's CPU per delivered message over `mqtts://`. Here one `recv` takes whatever the socket
//! holds, up to the connection's read size, and every record in it is decrypted before the caller sees the
//! plaintext: the same syscalls per message as over plain TCP.

use std::io::{self, BufRead, Write};
use std::task::{Context, Poll, ready};

use bytes::BytesMut;
use common::tls::rustls::ClientConnection;
use tokio::net::TcpStream;

/// The least one socket read takes: a TLS record's header and a small packet.
const MIN_READ: usize = 512;

#[derive(Debug)]
pub struct TlsConn {
    tcp: TcpStream,
    tls: ClientConnection,
    /// One socket read's worth of records, before rustls has taken them.
    scratch: Box<[u8]>,
}

impl TlsConn {
    /// Takes over the socket and the session of a finished handshake; one socket read takes
    /// up to `read_chunk` bytes, as the connection's plaintext reads do (an idle client of a
    /// connection storm reads little, so ten thousand of them stay small).
    pub fn new(tcp: TcpStream, tls: ClientConnection, read_chunk: usize) -> TlsConn {
        TlsConn {
            tcp,
            tls,
            scratch: vec![0; read_chunk.max(MIN_READ)].into_boxed_slice(),
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Records rustls holds that the socket has not taken yet.
    pub fn holds_output(&self) -> bool {
        self.tls.wants_write()
    }

    /// Appends to `buf` the plaintext of every record the socket holds now (one read); ready
    /// with 0 at the end of the stream (the peer's close_notify or a closed socket).
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        loop {
            let (held, end) = drain_plaintext(&mut self.tls, buf)?;
            if held > 0 || end {
                return Poll::Ready(Ok(held));
            }
            ready!(self.tcp.poll_read_ready(cx))?;
            let n = match self.tcp.try_read(&mut self.scratch) {
                Ok(0) => return Poll::Ready(Ok(0)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            };
            let mut records = &self.scratch[..n];
            let (mut taken, mut end) = (0, false);
            while !records.is_empty() {
                self.tls.read_tls(&mut records)?;
                self.tls
                    .process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                // rustls bounds the plaintext it holds: hand it over before the next records.
                let (n, closed) = drain_plaintext(&mut self.tls, buf)?;
                taken += n;
                end |= closed;
            }
            // A key update or alert to answer goes out with the next write or flush; a record
            // cut at the end of the read waits for the next one.
            if taken > 0 || end {
                return Poll::Ready(Ok(taken));
            }
        }
    }

    /// Encrypts `bytes` into records and writes what the socket takes now; ready with how many
    /// bytes rustls took (pending only while its buffer is full and the socket takes nothing).
    pub fn poll_write(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let n = self.tls.writer().write(bytes)?;
            let flushed = self.poll_flush(cx)?;
            if n > 0 || bytes.is_empty() {
                return Poll::Ready(Ok(n));
            }
            ready!(flushed);
        }
    }

    /// Writes every record rustls holds, in vectored writes.
    pub fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.tls.wants_write() {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tls.write_tls(&mut Socket(&self.tcp)) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Sends close_notify, writes it, and shuts the socket's sending side.
    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tls.send_close_notify();
        ready!(self.poll_flush(cx))?;
        use tokio::io::AsyncWrite;
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The socket as `io::Write` without waiting: `WouldBlock` when it is full.
struct Socket<'a>(&'a TcpStream);

impl Write for Socket<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.try_write(bytes)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Appends the decrypted bytes `tls` holds to `buf`: how many, and whether the peer has closed
/// the stream (close_notify) after them.
fn drain_plaintext(tls: &mut ClientConnection, buf: &mut BytesMut) -> io::Result<(usize, bool)> {
    let mut total = 0;
    let mut reader = tls.reader();
    loop {
        match reader.fill_buf() {
            Ok([]) => return Ok((total, true)),
            Ok(chunk) => {
                let n = chunk.len();
                buf.extend_from_slice(chunk);
                reader.consume(n);
                total += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((total, false)),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use bytes::Bytes;
    use common::tls::{TlsSettings, strip_params};

    use crate::protocol::codec::{Protocol, PublishTemplate};
    use crate::protocol::conn::{Conn, ConnectOptions, READ_CHUNK_BYTES};
    use crate::protocol::transport::TlsLink;
    use crate::session::{Client, endpoint};

    /// A subscriber over `mqtts://` whose socket holds hundreds of small messages takes all of
    /// them in one read, as over plain TCP, not the 4 KiB a call that reading through rustls's
    /// `read_tls` alone gives (about 37 messages of 64 bytes).
    #[test]
    fn one_read_takes_every_record_the_socket_holds() {
        let Some(url) = common::testing::server_url("FAIRBENCH_TEST_MOSQUITTO_TLS_URL") else {
            return;
        };
        let settings = TlsSettings::from_url(&url, false).unwrap();
        let server = common::tls::Endpoint::from_url(&url, Some(8883)).unwrap();
        let addr = strip_params(&url).trim_start_matches("mqtts://").to_owned();
        let client = Client {
            username: None,
            password: None,
            protocol: Protocol::V311,
            keep_alive_s: 30,
            source_addrs: Arc::from([]),
            tls: Some(TlsLink {
                config: settings.client_config().unwrap(),
                server,
            }),
            tag: Arc::from("tls-read"),
        };
        let endpoint = endpoint(addr, &client).unwrap();
        let topic = format!("fairbench/tls-read/{}", std::process::id());
        common::testing::block_on(async {
            let options = ConnectOptions::clean("fairbench-tls-read-sub", 0);
            let (mut subscriber, _) = Conn::connect(&endpoint, &options).await.unwrap();
            subscriber
                .subscribe(&[(&topic, 0)], Duration::from_secs(5))
                .await
                .unwrap();
            let options = ConnectOptions::clean("fairbench-tls-read-pub", 1);
            let (mut publisher, _) = Conn::connect(&endpoint, &options).await.unwrap();
            let payload = Bytes::from(vec![7u8; 64]);
            let mut template =
                PublishTemplate::new(Protocol::V311, &topic, 0, false, payload, None);
            let messages = 400;
            for _ in 0..messages {
                template.encode(&mut publisher.wbuf, 0).unwrap();
            }
            let packet = publisher.wbuf.len() / messages;
            publisher.flush().await.unwrap();
            // Every message reaches the subscriber's socket before it reads.
            tokio::time::sleep(Duration::from_millis(500)).await;
            subscriber.fill().await.unwrap();
            let read = subscriber.buffered();
            assert!(
                read >= packet * messages * 9 / 10 && read <= READ_CHUNK_BYTES,
                "one read took {read} bytes of the {} the broker sent",
                packet * messages
            );
        });
    }
}
