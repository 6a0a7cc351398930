//! The barrier's wire: one line per message over one TCP connection, each line ending in an
//! HMAC-SHA256 tag made with the run's token (`--barrier-token FILE` or
//! `FAIRBENCH_BARRIER_TOKEN`) over the message, its direction, its number on the connection and
//! a nonce worker 0 sends when the connection opens. A peer without the token can neither make
//! a message worker 0 accepts nor replay one seen on another connection. Without a token the
//! key is empty: anyone can make the tags, and the run says the barrier is open.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::timeout_at;

/// The variable that holds the token itself (a Kubernetes Secret's value, say).
pub const TOKEN_VARIABLE: &str = "FAIRBENCH_BARRIER_TOKEN";

/// The shortest token taken: a guessable token is no lock (`openssl rand -hex 32` gives 64).
pub const MIN_TOKEN_LEN: usize = 16;

/// The longest line read from a peer: a stranger cannot make worker 0 hold megabytes.
const MAX_LINE: u64 = 512;

/// The run's shared secret, as an HMAC key; [`Token::open`] when the run has none.
#[derive(Clone)]
pub struct Token {
    key: Arc<hmac::Key>,
    secret: bool,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.secret {
            "Token(***)"
        } else {
            "Token(open)"
        })
    }
}

impl Token {
    /// No token: tags anyone can make (the barrier is open).
    pub fn open() -> Token {
        Token {
            key: Arc::new(hmac::Key::new(hmac::HMAC_SHA256, b"")),
            secret: false,
        }
    }

    /// A token from its text (one trailing line end dropped), registered for redaction.
    pub fn new(text: &str) -> Result<Token, String> {
        let text = text
            .strip_suffix('\n')
            .map_or(text, |t| t.strip_suffix('\r').unwrap_or(t));
        if text.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the barrier token has {} characters; give at least {MIN_TOKEN_LEN} (`openssl rand -hex 32`)",
                text.len()
            ));
        }
        crate::redact::register_secret(text);
        Ok(Token {
            key: Arc::new(hmac::Key::new(hmac::HMAC_SHA256, text.as_bytes())),
            secret: true,
        })
    }

    /// The token of `--barrier-token FILE`, else of [`TOKEN_VARIABLE`] (from `variable`),
    /// else the open barrier.
    pub fn read(file: Option<&Path>, variable: Option<String>) -> Result<Token, String> {
        if let Some(file) = file {
            let text = std::fs::read_to_string(file).map_err(|e| {
                format!(
                    "--barrier-token {}: cannot read the token ({e})",
                    file.display()
                )
            })?;
            return Token::new(&text)
                .map_err(|e| format!("--barrier-token {}: {e}", file.display()));
        }
        match variable {
            Some(text) => Token::new(&text).map_err(|e| format!("{TOKEN_VARIABLE}: {e}")),
            None => Ok(Token::open()),
        }
    }

    /// Whether the run has a token (the barrier authenticates its peers).
    pub fn is_secret(&self) -> bool {
        self.secret
    }
}

/// Who may use the barrier and where worker 0 listens.
#[derive(Debug, Clone)]
pub struct Access {
    pub token: Token,
    /// The address worker 0's listener binds (`--barrier-bind`; every interface by default).
    pub bind: IpAddr,
}

impl Access {
    /// Every interface, no token: what a test on loopback needs.
    pub fn open() -> Access {
        Access {
            token: Token::open(),
            bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

/// 16 random bytes, in hex: worker 0's nonce for one connection.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    // The system's generator fails only where no randomness exists at all; a fixed nonce
    // would still need the token to make a tag.
    let _ = SystemRandom::new().fill(&mut bytes);
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Why a line could not be read as a message.
#[derive(Debug, Clone, PartialEq)]
pub enum WireError {
    TimedOut,
    Closed,
    TooLong,
    /// The line's tag is not one the run's token makes: a peer without the token.
    Unauthenticated,
    Io(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::TimedOut => f.write_str("timed out"),
            WireError::Closed => f.write_str("the connection closed"),
            WireError::TooLong => write!(f, "a line longer than {MAX_LINE} bytes"),
            WireError::Unauthenticated => {
                f.write_str("a message without a valid tag (no barrier token, or another one)")
            }
            WireError::Io(e) => f.write_str(e),
        }
    }
}

/// Which end of a connection this is: worker 0 (which chose the nonce) or a worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum End {
    Leader,
    Follower,
}

impl End {
    fn word(self) -> &'static str {
        match self {
            End::Leader => "from-0",
            End::Follower => "to-0",
        }
    }

    fn other(self) -> End {
        match self {
            End::Leader => End::Follower,
            End::Follower => End::Leader,
        }
    }
}

/// One authenticated connection of the barrier.
pub struct Wire {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    token: Token,
    nonce: String,
    end: End,
    sent: u64,
    received: u64,
    /// The last line read, tag and all (a refusal worker 0 sends without a tag).
    last: String,
    /// A line read in part when a read was given up (a deadline, a `select!`): kept, so the
    /// next read goes on with it and no message is lost or cut.
    partial: Vec<u8>,
}

impl Wire {
    pub fn new(stream: TcpStream, token: Token, nonce: String, end: End) -> Wire {
        let _ = stream.set_nodelay(true);
        let (read, writer) = stream.into_split();
        Wire {
            reader: BufReader::new(read),
            writer,
            token,
            nonce,
            end,
            sent: 0,
            received: 0,
            last: String::new(),
            partial: Vec::new(),
        }
    }

    /// The nonce, once the follower has read it from worker 0.
    pub fn set_nonce(&mut self, nonce: String) {
        self.nonce = nonce;
    }

    /// One line, at most [`MAX_LINE`] bytes, by `deadline`; without its line end. Safe to
    /// give up (a line read in part is kept for the next call).
    pub async fn recv_plain(&mut self, deadline: Instant) -> Result<String, WireError> {
        let room = MAX_LINE.saturating_sub(self.partial.len() as u64);
        let mut limited = (&mut self.reader).take(room);
        let read = limited.read_until(b'\n', &mut self.partial);
        let read = match timeout_at(deadline.into(), read).await {
            Err(_) => return Err(WireError::TimedOut),
            Ok(read) => read,
        };
        if let Err(e) = read {
            return Err(WireError::Io(e.to_string()));
        }
        if self.partial.last() == Some(&b'\n') {
            let bytes = std::mem::take(&mut self.partial);
            return Ok(String::from_utf8_lossy(&bytes).trim_end().to_owned());
        }
        if self.partial.len() as u64 >= MAX_LINE {
            return Err(WireError::TooLong);
        }
        Err(WireError::Closed)
    }

    fn signed(&self, from: End, number: u64, body: &str) -> String {
        format!("{}\n{}\n{number}\n{body}", self.nonce, from.word())
    }

    pub fn last_line(&self) -> &str {
        &self.last
    }

    /// Sends `body` with its tag.
    pub async fn send(&mut self, body: &str) -> std::io::Result<()> {
        let tag = hmac::sign(
            &self.token.key,
            self.signed(self.end, self.sent, body).as_bytes(),
        );
        self.sent += 1;
        let line = format!("{body} {}\n", hex(tag.as_ref()));
        self.writer.write_all(line.as_bytes()).await
    }

    /// Sends `body` as it is, without a tag (the nonce; a refusal to a peer that has none).
    pub async fn send_plain(&mut self, body: &str) -> std::io::Result<()> {
        self.writer.write_all(format!("{body}\n").as_bytes()).await
    }

    /// The next message, its tag checked and removed.
    pub async fn recv(&mut self, deadline: Instant) -> Result<String, WireError> {
        let line = self.recv_plain(deadline).await?;
        self.last.clone_from(&line);
        let (body, tag) = line.rsplit_once(' ').ok_or(WireError::Unauthenticated)?;
        let tag = unhex(tag).ok_or(WireError::Unauthenticated)?;
        let signed = self.signed(self.end.other(), self.received, body);
        hmac::verify(&self.token.key, signed.as_bytes(), &tag)
            .map_err(|_| WireError::Unauthenticated)?;
        self.received += 1;
        Ok(body.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_enough_and_never_printed() {
        assert!(Token::new("short").is_err());
        let token = Token::new("0123456789abcdef0123\n").unwrap();
        assert!(token.is_secret());
        assert_eq!(format!("{token:?}"), "Token(***)");
        assert!(!Token::open().is_secret());
        assert_eq!(
            crate::redact::scrub("token 0123456789abcdef0123"),
            "token ***"
        );
        let error = Token::read(None, Some("tiny".into())).unwrap_err();
        assert!(
            error.starts_with("FAIRBENCH_BARRIER_TOKEN: the barrier token has 4"),
            "{error}"
        );
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(&[0, 15, 255])).unwrap(), vec![0, 15, 255]);
        assert!(unhex("zz").is_none() && unhex("abc").is_none());
        assert_eq!(nonce().len(), 32);
        assert_ne!(nonce(), nonce());
    }
}
