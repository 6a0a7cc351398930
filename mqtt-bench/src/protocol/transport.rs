//! The byte stream under one MQTT connection: plain TCP, bound to a chosen source address when
//! the run spreads its clients over several, or TLS over that TCP (`mqtts://`, common's rustls
//! with the system's one `ClientConfig`; the handshake through tokio-rustls, then the session
//! driven by [`TlsConn`]). Everything above drives it through `poll_read`,
//! `poll_write` and `poll_flush` (never through socket readiness), which is how a TLS stream
//! wants to be driven: rustls holds decrypted bytes the socket no longer signals, and written
//! records until they are flushed.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use common::tls::rustls::ClientConfig;
use common::tls::{Negotiated, TlsError};
use tokio::io::AsyncWrite;
use tokio::net::{TcpSocket, TcpStream};

use super::tls::TlsConn;

/// What a TLS connection to the broker needs: the system's one `ClientConfig` (shared by every
/// client) and the name its certificate must carry.
#[derive(Debug, Clone)]
pub struct TlsLink {
    pub config: Arc<ClientConfig>,
    pub server: common::tls::Endpoint,
}

/// One connection's stream.
#[derive(Debug)]
pub enum Transport {
    Tcp(TcpStream),
    Tls(Box<TlsConn>),
}

impl Transport {
    /// Opens a TCP connection to `addr`, from `source` (port chosen by the kernel) when given,
    /// with Nagle's algorithm off so every flush leaves at once.
    pub async fn tcp(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
        let stream = match source {
            None => TcpStream::connect(addr).await?,
            Some(ip) => {
                let socket = match ip {
                    IpAddr::V4(_) => TcpSocket::new_v4()?,
                    IpAddr::V6(_) => TcpSocket::new_v6()?,
                };
                socket.bind(SocketAddr::new(ip, 0))?;
                socket.connect(addr).await?
            }
        };
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// The TLS handshake over `tcp`, within `timeout`: the stream and what it negotiated (the
    /// handshake alone timed), or the failure in one line ("the certificate of HOST did not
    /// verify: …").
    pub async fn tls(
        tcp: TcpStream,
        link: &TlsLink,
        timeout: Duration,
        read_chunk: usize,
    ) -> Result<(Transport, Negotiated), TlsError> {
        let (tls, negotiated) =
            common::tls::handshake(tcp, link.config.clone(), &link.server, timeout).await?;
        let (tcp, session) = tls.into_inner();
        Ok((
            Transport::Tls(Box::new(TlsConn::new(tcp, session, read_chunk))),
            negotiated,
        ))
    }

    /// The local address, for the count of connections per source address.
    pub fn local_ip(&self) -> Option<IpAddr> {
        let tcp = match self {
            Transport::Tcp(s) => s,
            Transport::Tls(s) => s.tcp(),
        };
        tcp.local_addr().ok().map(|a| a.ip())
    }

    /// Reads into `buf`'s spare capacity (the caller reserves it first).
    #[inline]
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        match self {
            Transport::Tcp(s) => tokio_util::io::poll_read_buf(Pin::new(s), cx, buf),
            Transport::Tls(s) => s.poll_read(cx, buf),
        }
    }

    #[inline]
    pub fn poll_write(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, bytes),
            Transport::Tls(s) => s.poll_write(cx, bytes),
        }
    }

    /// Sends what the stream still holds: nothing for TCP (every write went to the socket);
    /// for TLS the records rustls holds until the socket takes them.
    #[inline]
    pub fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(_) => Poll::Ready(Ok(())),
            Transport::Tls(s) => s.poll_flush(cx),
        }
    }

    /// Whether the stream holds bytes written but not yet sent (TLS records).
    #[inline]
    pub fn holds_output(&self) -> bool {
        match self {
            Transport::Tcp(_) => false,
            Transport::Tls(s) => s.holds_output(),
        }
    }

    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => s.poll_shutdown(cx),
        }
    }
}
