//! The byte stream under one MQTT connection: plain TCP, bound to a chosen source address when
//! the run spreads its clients over several. Everything above drives it through `poll_read` and
//! `poll_write` (never through socket readiness), which is how a TLS stream wants to be driven:
//! `mqtts://` adds a `Tls(tokio_rustls::client::TlsStream<TcpStream>)` variant here, made in
//! [`Transport::connect`] from the same `TcpStream`, and nothing above changes.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::AsyncWrite;
use tokio::net::{TcpSocket, TcpStream};

/// One connection's stream.
#[derive(Debug)]
pub enum Transport {
    Tcp(TcpStream),
}

impl Transport {
    /// Opens a TCP connection to `addr`, from `source` (port chosen by the kernel) when given,
    /// with Nagle's algorithm off so every flush leaves at once.
    pub async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<Transport> {
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
        Ok(Transport::Tcp(stream))
    }

    /// The local address, for the count of connections per source address.
    pub fn local_ip(&self) -> Option<IpAddr> {
        match self {
            Transport::Tcp(s) => s.local_addr().ok().map(|a| a.ip()),
        }
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
        }
    }

    #[inline]
    pub fn poll_write(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, bytes),
        }
    }

    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
