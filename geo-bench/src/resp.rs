//! A small RESP2 client for Redis, Valkey and other servers speaking that protocol, over TCP
//! or TLS (`rediss://`, common's rustls stream): commands are written into one reusable buffer
//! and flushed together (pipelining), and replies are parsed in place from one reusable read
//! buffer, so the hot path neither allocates nor formats per command.

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use common::tls::TlsStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// What a connection runs over: TCP, or TLS over TCP.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One parsed reply header; byte ranges index the connection's read buffer and stay valid
/// until the next read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Simple(Range<usize>),
    Error(Range<usize>),
    Int(i64),
    Bulk(Option<Range<usize>>),
    /// The element count; the elements follow as frames of their own.
    Array(Option<usize>),
}

/// An owned reply, for the control path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

impl Value {
    /// The text of a simple or bulk string.
    pub fn text(&self) -> Option<String> {
        match self {
            Value::Simple(s) => Some(s.clone()),
            Value::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

pub struct Resp {
    stream: Stream,
    out: Vec<u8>,
    buf: Vec<u8>,
    pos: usize,
}

/// Appends the decimal digits of `n` without allocating.
#[inline]
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Where `\r\n` starts in `buf` at or after `from`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn parse_int(bytes: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| protocol_error("a malformed integer"))
}

fn protocol_error(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("RESP protocol error: {what}"),
    )
}

/// Parses one frame at `at`: `Ok(None)` when more bytes are needed, else the frame and the
/// position after it.
fn parse_frame(buf: &[u8], at: usize) -> io::Result<Option<(Frame, usize)>> {
    if at >= buf.len() {
        return Ok(None);
    }
    let Some(end) = line_end(buf, at + 1) else {
        return Ok(None);
    };
    let line = at + 1..end;
    let next = end + 2;
    let frame = match buf[at] {
        b'+' => Frame::Simple(line),
        b'-' => Frame::Error(line),
        b':' => Frame::Int(parse_int(&buf[line])?),
        b'$' => {
            let len = parse_int(&buf[line])?;
            if len < 0 {
                return Ok(Some((Frame::Bulk(None), next)));
            }
            let data_end = next + len as usize;
            if buf.len() < data_end + 2 {
                return Ok(None);
            }
            return Ok(Some((Frame::Bulk(Some(next..data_end)), data_end + 2)));
        }
        b'*' => {
            let len = parse_int(&buf[line])?;
            Frame::Array((len >= 0).then_some(len as usize))
        }
        other => {
            return Err(protocol_error(&format!(
                "unexpected reply type byte {other:#04x}"
            )));
        }
    };
    Ok(Some((frame, next)))
}

impl Resp {
    /// Connects over TCP (bounded by `timeout`), with Nagle's algorithm off.
    pub async fn connect(address: &str, timeout: Duration) -> io::Result<Resp> {
        Ok(Resp::over(Stream::Plain(
            Resp::tcp(address, timeout).await?,
        )))
    }

    /// A TCP connection (bounded by `timeout`) with Nagle's algorithm off: pipelines are
    /// flushed whole. A TLS handshake may follow ([`Resp::over`]).
    pub async fn tcp(address: &str, timeout: Duration) -> io::Result<TcpStream> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {}s", timeout.as_secs()),
                )
            })??;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// A client over `stream`.
    pub fn over(stream: Stream) -> Resp {
        Resp {
            stream,
            out: Vec::with_capacity(64 * 1024),
            buf: Vec::with_capacity(64 * 1024),
            pos: 0,
        }
    }

    /// Starts a command of `args` arguments (the command name counts).
    #[inline]
    pub fn begin(&mut self, args: usize) {
        self.out.push(b'*');
        push_decimal(&mut self.out, args as u64);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Appends one argument.
    #[inline]
    pub fn arg(&mut self, bytes: &[u8]) {
        self.out.push(b'$');
        push_decimal(&mut self.out, bytes.len() as u64);
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Appends one argument of exactly `len` bytes written by `write`.
    #[inline]
    pub fn arg_with(&mut self, len: usize, write: impl FnOnce(&mut Vec<u8>)) {
        self.out.push(b'$');
        push_decimal(&mut self.out, len as u64);
        self.out.extend_from_slice(b"\r\n");
        let before = self.out.len();
        write(&mut self.out);
        debug_assert_eq!(self.out.len() - before, len, "argument length as announced");
        self.out.extend_from_slice(b"\r\n");
    }

    /// Sends every command written since the last flush.
    pub async fn flush(&mut self) -> io::Result<()> {
        let mut result = self.stream.write_all(&self.out).await;
        if result.is_ok() {
            // TLS may hold the last record until flushed; on TCP this returns at once.
            result = self.stream.flush().await;
        }
        self.out.clear();
        result
    }

    /// The bytes of a frame's range.
    #[inline]
    pub fn bytes(&self, range: Range<usize>) -> &[u8] {
        &self.buf[range]
    }

    /// Reads the next frame, waiting for the server as needed.
    pub async fn frame(&mut self) -> io::Result<Frame> {
        loop {
            if let Some((frame, next)) = parse_frame(&self.buf, self.pos)? {
                self.pos = next;
                return Ok(frame);
            }
            if self.pos > 0 {
                // Keep only the unparsed tail; earlier ranges are dead by now.
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            self.buf.reserve(64 * 1024);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                ));
            }
        }
    }

    /// Reads one whole reply and discards it; a server error becomes `Ok(Err(message))`.
    pub async fn skip(&mut self) -> io::Result<Result<(), String>> {
        let mut pending = 1usize;
        let mut first_error = None;
        while pending > 0 {
            pending -= 1;
            match self.frame().await? {
                Frame::Array(Some(n)) => pending += n,
                Frame::Error(range) if first_error.is_none() => {
                    first_error = Some(String::from_utf8_lossy(self.bytes(range)).into_owned());
                }
                _ => {}
            }
        }
        Ok(first_error.map_or(Ok(()), Err))
    }

    /// Reads one whole reply into an owned value (control path).
    pub async fn value(&mut self) -> io::Result<Value> {
        let frame = self.frame().await?;
        Ok(match frame {
            Frame::Simple(r) => Value::Simple(String::from_utf8_lossy(self.bytes(r)).into_owned()),
            Frame::Error(r) => Value::Error(String::from_utf8_lossy(self.bytes(r)).into_owned()),
            Frame::Int(i) => Value::Int(i),
            Frame::Bulk(r) => Value::Bulk(r.map(|r| self.bytes(r).to_vec())),
            Frame::Array(None) => Value::Array(None),
            Frame::Array(Some(n)) => {
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(Box::pin(self.value()).await?);
                }
                Value::Array(Some(items))
            }
        })
    }

    /// Sends one command and reads its reply (control path).
    pub async fn call(&mut self, args: &[&[u8]]) -> io::Result<Value> {
        self.begin(args.len());
        for a in args {
            self.arg(a);
        }
        self.flush().await?;
        self.value().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_whole_or_ask_for_more() {
        let buf = b"+OK\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*2\r\n-ERR no\r\n";
        let (f, at) = parse_frame(buf, 0).unwrap().unwrap();
        assert_eq!(f, Frame::Simple(1..3));
        let (f, at) = parse_frame(buf, at).unwrap().unwrap();
        assert_eq!(f, Frame::Int(42));
        let (f, at) = parse_frame(buf, at).unwrap().unwrap();
        assert_eq!(f, Frame::Bulk(Some(14..17)));
        let (f, at) = parse_frame(buf, at).unwrap().unwrap();
        assert_eq!(f, Frame::Bulk(None));
        let (f, at) = parse_frame(buf, at).unwrap().unwrap();
        assert_eq!(f, Frame::Array(Some(2)));
        let (f, _) = parse_frame(buf, at).unwrap().unwrap();
        assert!(matches!(f, Frame::Error(_)));
        assert!(parse_frame(b"$5\r\nab", 0).unwrap().is_none());
        assert!(parse_frame(b":12", 0).unwrap().is_none());
        assert!(parse_frame(b"?x\r\n", 0).is_err());
    }

    #[test]
    fn decimals_are_written_without_formatting() {
        let mut out = Vec::new();
        for n in [0u64, 7, 10, 12_345, u64::MAX] {
            out.clear();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
