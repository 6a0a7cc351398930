//! The crud suite's PostgreSQL session for the timed loop: the extended query protocol spoken
//! straight on the connection's socket, as libpq speaks it for pgbench `-M prepared`. Each
//! statement is one write of Bind, Execute and Sync (one statement in flight, no pipelining)
//! and one read of the answer up to ReadyForQuery; the worker's task owns its socket, so no
//! other task, channel or wake-up stands between them, and nothing is allocated per statement
//! (a read patches the key into a request built once). tokio-postgres, which every other
//! PostgreSQL path of fairbench uses, hands each statement to a connection task through a
//! channel and builds a row object for each answer: about twice pgbench's client CPU per point
//! select on the same machine.
//!
//! Opening speaks the start-up the server asks for (SCRAM-SHA-256 without channel binding, MD5
//! or a cleartext password) over the TLS the link asks for (libpq's `sslmode`, the link's own
//! certificate checks) or a Unix socket. A server that asks for anything else (GSSAPI, SSPI, a
//! client certificate alone) is [`OpenError::Unsupported`]: the target then opens a
//! tokio-postgres session for it instead.

use std::io;
use std::net::SocketAddr;

use bytes::{Buf, BufMut, BytesMut};
use common::driver::OpError;
use common::postgres::Link;
use common::tls::Mode;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_postgres::config::Host;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

/// The prepared statements' names on the session's connection.
const READ: &str = "r";
const INSERT: &str = "w";
/// The types of their parameters: the key is `bigint`, the value `text`.
const INT8: u32 = 20;
const TEXT: u32 = 25;
/// Parameter formats: binary for the key, text for the value.
const BINARY: i16 = 1;
const TEXT_FORMAT: i16 = 0;

/// A byte stream to the server: TCP, TLS over TCP or a Unix socket.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Why a session could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The server asks for a start-up this session does not speak; the reason names it.
    Unsupported(String),
    /// The connection or the server refused, in the server's words when it sent any.
    Failed(String),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> OpenError {
        OpenError::Failed(e.to_string())
    }
}

/// How to reach the session's server again, for a cancel request.
#[derive(Clone)]
struct Route {
    link: Link,
    host: Host,
    address: Option<SocketAddr>,
    port: u16,
    tls: bool,
}

/// One worker's connection with its two statements prepared.
pub struct WireSession {
    io: Box<dyn Io>,
    input: BytesMut,
    output: BytesMut,
    /// Bind of the read statement, Execute and Sync; the key is patched in at `key_at`.
    read_request: Vec<u8>,
    key_at: usize,
    /// Answers still owed to requests whose caller stopped waiting (a statement dropped at the
    /// ceiling): read and set aside before the next request.
    owed: u32,
    /// A request was dropped part-written: the stream is no longer in step with the server.
    torn: bool,
    route: Route,
    process_id: i32,
    secret_key: i32,
}

impl WireSession {
    /// Connects to the first of the link's hosts that answers, speaks the start-up and
    /// prepares `read_sql` (`$1` the key) and `write_sql` (`$1` the key, `$2` the value).
    pub async fn open(link: &Link, read_sql: &str, write_sql: &str) -> Result<Self, OpenError> {
        let config = &link.config;
        let timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(common::postgres::CONNECT_TIMEOUT);
        let ports = config.get_ports();
        let addresses = config.get_hostaddrs();
        let mut last = OpenError::Failed("the URL names no host".into());
        for (i, host) in config.get_hosts().iter().enumerate() {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            let address = addresses.get(i).map(|ip| SocketAddr::new(*ip, port));
            let mut route = Route {
                link: link.clone(),
                host: host.clone(),
                address,
                port,
                tls: false,
            };
            let attempt =
                tokio::time::timeout(timeout, Self::start(&mut route, read_sql, write_sql));
            match attempt.await {
                Ok(Ok(session)) => return Ok(session),
                Ok(Err(OpenError::Unsupported(why))) => return Err(OpenError::Unsupported(why)),
                Ok(Err(e)) => last = e,
                Err(_) => {
                    last = OpenError::Failed(format!("no answer within {}s", timeout.as_secs()))
                }
            }
        }
        Err(last)
    }

    /// One host: the stream the TLS mode asks for, then the start-up; under `allow`, a server
    /// that refuses plaintext is asked again over TLS, as libpq does.
    async fn start(route: &mut Route, read_sql: &str, write_sql: &str) -> Result<Self, OpenError> {
        let mode = route.link.settings.mode;
        let io = route.connect(mode).await?;
        match Self::start_up(io, route.clone(), read_sql, write_sql).await {
            Err(OpenError::Failed(why)) if mode == Mode::Allow && why.contains("no encryption") => {
                let io = route.connect(Mode::Require).await?;
                Self::start_up(io, route.clone(), read_sql, write_sql).await
            }
            other => other,
        }
    }

    async fn start_up(
        io: Box<dyn Io>,
        route: Route,
        read_sql: &str,
        write_sql: &str,
    ) -> Result<Self, OpenError> {
        let config = &route.link.config;
        let user = config
            .get_user()
            .ok_or_else(|| OpenError::Failed("the URL names no user".into()))?
            .to_owned();
        let mut session = WireSession {
            io,
            input: BytesMut::with_capacity(8192),
            output: BytesMut::with_capacity(1024),
            read_request: Vec::new(),
            key_at: 0,
            owed: 0,
            torn: false,
            route,
            process_id: 0,
            secret_key: 0,
        };
        let config = session.route.link.config.clone();
        let mut parameters = vec![("user", user.as_str()), ("client_encoding", "UTF8")];
        if let Some(database) = config.get_dbname() {
            parameters.push(("database", database));
        }
        if let Some(name) = config.get_application_name() {
            parameters.push(("application_name", name));
        }
        if let Some(options) = config.get_options() {
            parameters.push(("options", options));
        }
        frontend::startup_message(parameters, &mut session.output)?;
        session.flush_output().await?;
        session.authenticate(&user, config.get_password()).await?;
        session.prepare(read_sql, write_sql).await?;
        Ok(session)
    }

    /// Answers the server's requests for credentials until it is ready for statements,
    /// keeping the key that cancels this connection's statements.
    async fn authenticate(&mut self, user: &str, password: Option<&[u8]>) -> Result<(), OpenError> {
        let needs_password = || {
            password.ok_or_else(|| {
                OpenError::Failed("the server asks for a password and none was given".into())
            })
        };
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, body) = self.message().await.map_err(open_error)?;
            match tag {
                b'R' => {
                    let code = be_i32(&body, 0);
                    match code {
                        0 => {}
                        3 => frontend::password_message(needs_password()?, &mut self.output)?,
                        5 => {
                            let salt = [body[4], body[5], body[6], body[7]];
                            let hash = md5_hash(user.as_bytes(), needs_password()?, salt);
                            frontend::password_message(hash.as_bytes(), &mut self.output)?;
                        }
                        10 => {
                            let offered = body[4..]
                                .split(|b| *b == 0)
                                .any(|m| m == SCRAM_SHA_256.as_bytes());
                            if !offered {
                                return Err(OpenError::Unsupported(format!(
                                    "SASL mechanisms {}",
                                    String::from_utf8_lossy(&body[4..]).replace('\0', " ")
                                )));
                            }
                            let state =
                                ScramSha256::new(needs_password()?, ChannelBinding::unsupported());
                            frontend::sasl_initial_response(
                                SCRAM_SHA_256,
                                state.message(),
                                &mut self.output,
                            )?;
                            scram = Some(state);
                        }
                        11 | 12 => {
                            let state = scram.as_mut().ok_or_else(|| {
                                OpenError::Failed("a SASL message before SASL began".into())
                            })?;
                            if code == 11 {
                                state.update(&body[4..])?;
                                frontend::sasl_response(state.message(), &mut self.output)?;
                            } else {
                                state.finish(&body[4..])?;
                            }
                        }
                        other => {
                            return Err(OpenError::Unsupported(format!(
                                "authentication request {other}"
                            )));
                        }
                    }
                    if !self.output.is_empty() {
                        self.flush_output().await?;
                    }
                }
                b'K' => {
                    self.process_id = be_i32(&body, 0);
                    self.secret_key = be_i32(&body, 4);
                }
                b'Z' => return Ok(()),
                b'E' => return Err(OpenError::Failed(error_text(&body))),
                _ => {}
            }
        }
    }

    /// Prepares the two statements and builds the read's request once.
    async fn prepare(&mut self, read_sql: &str, write_sql: &str) -> Result<(), OpenError> {
        frontend::parse(READ, read_sql, [INT8], &mut self.output)?;
        frontend::parse(INSERT, write_sql, [INT8, TEXT], &mut self.output)?;
        frontend::sync(&mut self.output);
        self.flush_output().await?;
        loop {
            let (tag, body) = self.message().await.map_err(open_error)?;
            match tag {
                b'E' => {
                    let why = error_text(&body);
                    // The rest of the answer, so the error is the server's last word.
                    while self.message().await.map_err(open_error)?.0 != b'Z' {}
                    return Err(OpenError::Failed(why));
                }
                b'Z' => break,
                _ => {}
            }
        }
        let mut request = BytesMut::new();
        self.key_at = bind(READ, &[(BINARY, &0i64.to_be_bytes()[..])], &mut request);
        frontend::execute("", 0, &mut request)?;
        frontend::sync(&mut request);
        self.read_request = request.to_vec();
        Ok(())
    }

    /// Reads the row of `key` and returns the length of its value.
    pub async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        self.settle().await?;
        self.read_request[self.key_at..self.key_at + 8].copy_from_slice(&key.to_be_bytes());
        self.owed += 1;
        self.torn = true;
        let sent = self.io.write_all(&self.read_request).await;
        self.sent(sent).await?;
        match self.answer().await? {
            Some(len) => Ok(len),
            None => Err(OpError::Failed(format!("key {key} not found"))),
        }
    }

    /// Inserts one row.
    pub async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        self.settle().await?;
        self.output.clear();
        bind(
            INSERT,
            &[
                (BINARY, &key.to_be_bytes()[..]),
                (TEXT_FORMAT, value.as_bytes()),
            ],
            &mut self.output,
        );
        frontend::execute("", 0, &mut self.output).map_err(lost)?;
        frontend::sync(&mut self.output);
        self.owed += 1;
        self.torn = true;
        let sent = self.io.write_all(&self.output).await;
        self.sent(sent).await?;
        self.answer().await.map(drop)
    }

    /// Asks the server to stop the statement this connection runs (PostgreSQL's cancel
    /// request, on a connection of its own, over TLS when this one uses it). Its answer, an
    /// error, is read before the next statement.
    pub async fn cancel(&mut self) -> Result<(), OpError> {
        let mode = if self.route.tls {
            Mode::Require
        } else {
            Mode::Disable
        };
        let mut io = self
            .route
            .connect(mode)
            .await
            .map_err(|e| OpError::Fatal(format!("cancel request failed: {}", open_text(e))))?;
        let mut request = BytesMut::new();
        frontend::cancel_request(self.process_id, self.secret_key, &mut request);
        io.write_all(&request).await.map_err(lost)?;
        io.flush().await.map_err(lost)?;
        // The server closes the connection once it has the request.
        let mut rest = Vec::new();
        let _ = io.read_to_end(&mut rest).await;
        Ok(())
    }

    /// Finishes a write the caller began: on success the stream is whole again.
    async fn sent(&mut self, written: io::Result<()>) -> Result<(), OpError> {
        written.map_err(lost)?;
        self.io.flush().await.map_err(lost)?;
        self.torn = false;
        Ok(())
    }

    /// Before a request: the answers owed to dropped ones, set aside.
    async fn settle(&mut self) -> Result<(), OpError> {
        if self.torn {
            return Err(OpError::Fatal(
                "a statement was abandoned while it was being sent".into(),
            ));
        }
        while self.owed > 0 {
            let _ = self.answer().await;
        }
        Ok(())
    }

    /// One statement's answer, up to ReadyForQuery: the length of the first column of its
    /// first row if it sent one, or the server's error.
    async fn answer(&mut self) -> Result<Option<usize>, OpError> {
        let mut row = None;
        let mut error = None;
        loop {
            let (tag, len) = self.frame().await?;
            let body = &self.input[5..5 + len];
            match tag {
                b'D' if row.is_none() && body.len() >= 6 => {
                    row = Some(usize::try_from(be_i32(body, 2)).unwrap_or(0));
                }
                b'E' => error = Some(error_text(body)),
                b'Z' => {
                    self.input.advance(5 + len);
                    self.owed -= 1;
                    break;
                }
                _ => {}
            }
            self.input.advance(5 + len);
        }
        match error {
            Some(e) => Err(OpError::Failed(e)),
            None => Ok(row),
        }
    }

    /// Waits until one whole message is in `input`: its tag and the length of its body, which
    /// starts at byte 5.
    async fn frame(&mut self) -> Result<(u8, usize), OpError> {
        loop {
            if self.input.len() >= 5 {
                let len = be_i32(&self.input, 1);
                let Some(len) = usize::try_from(len).ok().filter(|l| *l >= 4) else {
                    return Err(OpError::Fatal(format!(
                        "the server sent a message of length {len}"
                    )));
                };
                if self.input.len() > len {
                    return Ok((self.input[0], len - 4));
                }
                self.input.reserve(len + 1 - self.input.len());
            }
            if self.input.capacity() - self.input.len() < 1024 {
                self.input.reserve(8192);
            }
            let read = self.io.read_buf(&mut self.input).await.map_err(lost)?;
            if read == 0 {
                return Err(OpError::Fatal("the server closed the connection".into()));
            }
        }
    }

    /// One whole message, copied out (for the start-up, not the timed loop).
    async fn message(&mut self) -> Result<(u8, Vec<u8>), OpError> {
        let (tag, len) = self.frame().await?;
        let body = self.input[5..5 + len].to_vec();
        self.input.advance(5 + len);
        Ok((tag, body))
    }

    async fn flush_output(&mut self) -> io::Result<()> {
        self.io.write_all(&self.output).await?;
        self.io.flush().await?;
        self.output.clear();
        Ok(())
    }
}

impl Route {
    /// A stream to the server in TLS `mode`: `disable` and `allow` plaintext, `prefer` TLS
    /// when the server offers it, `require` and the verifying modes TLS or an error. A Unix
    /// socket is always plaintext, as libpq has it.
    async fn connect(&mut self, mode: Mode) -> Result<Box<dyn Io>, OpenError> {
        let name = match &self.host {
            Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            Host::Unix(folder) => {
                let path = folder.join(format!(".s.PGSQL.{}", self.port));
                let socket = tokio::net::UnixStream::connect(&path)
                    .await
                    .map_err(|e| OpenError::Failed(format!("{}: {e}", path.display())))?;
                self.tls = false;
                return Ok(Box::new(socket));
            }
        };
        let mut tcp = match self.address {
            Some(address) => TcpStream::connect(address).await,
            None => TcpStream::connect((name.as_str(), self.port)).await,
        }
        .map_err(|e| OpenError::Failed(format!("{name}:{}: {e}", self.port)))?;
        tcp.set_nodelay(true)?;
        if matches!(mode, Mode::Disable | Mode::Allow) {
            self.tls = false;
            return Ok(Box::new(tcp));
        }
        let mut request = BytesMut::new();
        frontend::ssl_request(&mut request);
        tcp.write_all(&request).await?;
        let offered = tcp.read_u8().await? == b'S';
        if !offered {
            if mode == Mode::Prefer {
                self.tls = false;
                return Ok(Box::new(tcp));
            }
            return Err(OpenError::Failed("the server does not accept TLS".into()));
        }
        let mut maker = self.link.tls.clone();
        let handshake =
            <common::tls::postgres::MakeTls as MakeTlsConnect<TcpStream>>::make_tls_connect(
                &mut maker, &name,
            )
            .map_err(|e| OpenError::Failed(e.to_string()))?;
        let stream = handshake
            .connect(tcp)
            .await
            .map_err(|e| OpenError::Failed(e.to_string()))?;
        self.tls = true;
        Ok(Box::new(stream))
    }
}

/// Appends a Bind of the unnamed portal to `statement` with `params` (format, bytes), every
/// result column in text; returns where the first parameter's bytes start in `out`.
fn bind(statement: &str, params: &[(i16, &[u8])], out: &mut BytesMut) -> usize {
    let start = out.len();
    out.put_u8(b'B');
    out.put_i32(0);
    out.put_u8(0);
    out.put_slice(statement.as_bytes());
    out.put_u8(0);
    out.put_i16(params.len() as i16);
    for (format, _) in params {
        out.put_i16(*format);
    }
    out.put_i16(params.len() as i16);
    let mut first = None;
    for (_, bytes) in params {
        out.put_i32(bytes.len() as i32);
        first.get_or_insert(out.len());
        out.put_slice(bytes);
    }
    out.put_i16(0);
    let len = (out.len() - start - 1) as i32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
    first.unwrap_or(out.len())
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// An ErrorResponse in the words tokio-postgres gives it: `ERROR: message`.
fn error_text(body: &[u8]) -> String {
    let (mut severity, mut message) = (String::new(), String::new());
    for field in body.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let text = String::from_utf8_lossy(&field[1..]).into_owned();
        match field[0] {
            b'S' if severity.is_empty() => severity = text,
            b'V' => severity = text,
            b'M' => message = text,
            _ => {}
        }
    }
    format!("{severity}: {message}")
}

/// A broken connection: the worker stops and its window records why.
fn lost(e: io::Error) -> OpError {
    OpError::Fatal(format!("the connection to the server failed: {e}"))
}

fn open_error(e: OpError) -> OpenError {
    match e {
        OpError::Failed(why) | OpError::Fatal(why) => OpenError::Failed(why),
    }
}

fn open_text(e: OpenError) -> String {
    match e {
        OpenError::Failed(why) | OpenError::Unsupported(why) => why,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use common::options::TargetSpec;
    use common::reach::Reach;

    use super::*;

    fn link(url: &str) -> Link {
        let reach = Reach::local(std::path::Path::new("."));
        Link::of(&TargetSpec::parse(url).unwrap(), &reach, &[]).unwrap()
    }

    /// Key 0 sleeps a minute on the server; any other key answers at once with three bytes.
    const SLEEPY: &str = "SELECT repeat('x', 3) || '' FROM pg_sleep(CASE WHEN $1 = 0 THEN 60 ELSE 0 END) \
                          -- fairbench wire cancel test";

    #[test]
    fn a_read_past_the_ceiling_is_cancelled_on_the_server_and_the_session_goes_on() {
        let Some(url) = common::testing::server_url("FAIRBENCH_TEST_POSTGRES_URL") else {
            return;
        };
        let _lock = common::testing::lock_servers();
        common::testing::block_on(async {
            let link = link(&url);
            let mut session = WireSession::open(&link, SLEEPY, "SELECT $1::bigint, $2::text")
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(session.read(7).await, Ok(3));
            let hung = tokio::time::timeout(Duration::from_millis(300), session.read(0));
            assert!(hung.await.is_err(), "the sleeping read answered");
            session.cancel().await.unwrap();
            // The cancelled statement's error is read and set aside; the next read is answered.
            assert_eq!(session.read(8).await, Ok(3));
            let watcher = common::postgres::connect(
                &link,
                &common::target::Identity::of(&TargetSpec::parse(&url).unwrap(), "PostgreSQL"),
            )
            .await
            .unwrap();
            let running: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
                     AND query LIKE '%fairbench wire cancel test%' AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(
                running, 0,
                "the cancelled statement still runs on the server"
            );
            // A missing key is a failed read, and the session still answers after it.
            let mut missing = WireSession::open(
                &link,
                "SELECT 'abc' WHERE $1 > 0",
                "SELECT $1::bigint, $2::text",
            )
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
            assert!(matches!(missing.read(-1).await, Err(OpError::Failed(_))));
            assert_eq!(missing.read(1).await, Ok(3));
        });
    }

    #[test]
    fn tls_and_a_wrong_password_speak_as_the_driver_does() {
        let (Some(url), Some(tls_url)) = (
            common::testing::server_url("FAIRBENCH_TEST_POSTGRES_URL"),
            common::testing::server_url("FAIRBENCH_TEST_POSTGRES_TLS_URL"),
        ) else {
            return;
        };
        let _lock = common::testing::lock_servers();
        common::testing::block_on(async {
            let link = link(&tls_url);
            let mut session = WireSession::open(
                &link,
                "SELECT 'abcd' WHERE $1 > 0",
                "SELECT $1::bigint, $2::text",
            )
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
            assert!(
                session.route.tls,
                "the TLS-only server was reached without TLS"
            );
            assert_eq!(session.read(1).await, Ok(4));
            session.cancel().await.unwrap();
            assert_eq!(session.read(2).await, Ok(4));
            let wrong = url.replacen(":fairbench@", ":not-the-password@", 1);
            assert_ne!(wrong, url, "the test URL's password is not `fairbench`");
            match WireSession::open(
                &super::tests::link(&wrong),
                "SELECT 'a' WHERE $1 > 0",
                "SELECT $1::bigint, $2::text",
            )
            .await
            {
                Err(OpenError::Failed(why)) => {
                    assert!(why.contains("password authentication failed"), "{why}")
                }
                Err(e) => panic!("{e:?}"),
                Ok(_) => panic!("a wrong password was accepted"),
            }
        });
    }

    #[test]
    fn a_bind_carries_its_length_and_its_parameters_where_it_says() {
        let mut out = BytesMut::new();
        let key_at = bind(
            "w",
            &[
                (BINARY, &7i64.to_be_bytes()[..]),
                (TEXT_FORMAT, &b"abc"[..]),
            ],
            &mut out,
        );
        assert_eq!(out[0], b'B');
        assert_eq!(be_i32(&out, 1) as usize, out.len() - 1);
        assert_eq!(&out[key_at..key_at + 8], &7i64.to_be_bytes());
        // The value follows the key with its length before it, then no result formats.
        assert_eq!(be_i32(&out, key_at + 8), 3);
        assert_eq!(&out[key_at + 12..key_at + 15], b"abc");
        assert_eq!(&out[key_at + 15..], &[0, 0]);
    }

    #[test]
    fn an_error_reads_as_the_server_wrote_it() {
        let body = b"SERROR\0VERROR\0C42P01\0Mrelation \"t\" does not exist\0\0";
        assert_eq!(error_text(body), "ERROR: relation \"t\" does not exist");
    }
}
