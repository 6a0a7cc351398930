//! TLS for tokio-postgres (feature `postgres`): a connector over [`super::handshake`] that
//! remembers what it negotiated (tokio-postgres-rustls hides its stream; CockroachDB has no
//! pg_stat_ssl), libpq's `sslmode` mapped onto tokio-postgres's three modes, and a connect that
//! gives `allow` its meaning (plaintext, then TLS when the server refuses plaintext).
//!
//! SCRAM runs without channel binding (`ChannelBinding::none()`): SCRAM-SHA-256, not -PLUS.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Config, Connection, Socket};

use super::error::TlsError;
use super::mode::Mode;
use super::probe::{HANDSHAKE_TIMEOUT, Negotiated, handshake};
use super::settings::{Endpoint, TlsSettings};

/// tokio-postgres's mode for libpq's: `allow` starts plaintext ([`connect`] retries with TLS).
pub fn ssl_mode(mode: Mode) -> SslMode {
    match mode {
        Mode::Disable | Mode::Allow => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    }
}

/// The `MakeTlsConnect` of one system: one `ClientConfig` for every connection, and the last
/// negotiation seen.
#[derive(Clone)]
pub struct MakeTls {
    config: Arc<ClientConfig>,
    mode: Mode,
    seen: Arc<Mutex<Option<Negotiated>>>,
}

impl std::fmt::Debug for MakeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MakeTls").field("mode", &self.mode).finish()
    }
}

impl MakeTls {
    /// The connector `settings` ask for (its config is never used under `disable`).
    pub fn new(settings: &TlsSettings) -> Result<MakeTls, TlsError> {
        let config = if settings.uses_tls() {
            settings.client_config()?
        } else {
            Arc::new(super::client_config(
                super::Verify::Nothing,
                rustls::RootCertStore::empty(),
            )?)
        };
        Ok(MakeTls {
            config,
            mode: settings.mode,
            seen: Arc::new(Mutex::new(None)),
        })
    }

    /// What the last TLS connection negotiated; `None` when none used TLS.
    pub fn negotiated(&self) -> Option<Negotiated> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Connects `config` (its `ssl_mode` set from [`ssl_mode`]) with `tls`; under `allow`, a
/// refusal of plaintext ("no encryption") is retried with TLS.
pub async fn connect(
    config: &Config,
    tls: &MakeTls,
) -> Result<(Client, Connection<Socket, Stream<Socket>>), tokio_postgres::Error> {
    let mut config = config.clone();
    config.ssl_mode(ssl_mode(tls.mode));
    match config.connect(tls.clone()).await {
        Err(e) if tls.mode == Mode::Allow && refuses_plaintext(&e) => {
            config.ssl_mode(SslMode::Require);
            config.connect(tls.clone()).await
        }
        other => other,
    }
}

/// The server's "pg_hba.conf rejects connection … no encryption".
pub fn refuses_plaintext(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| {
        db.code() == &SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            && db.message().contains("no encryption")
    })
}

impl<S> MakeTlsConnect<S> for MakeTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type TlsConnect = Connect;
    type Error = TlsError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Connect, TlsError> {
        Ok(Connect {
            config: self.config.clone(),
            // tokio-postgres does not say the port here; port 0 prints as the host alone.
            endpoint: Endpoint {
                host: domain.to_owned(),
                port: 0,
            },
            seen: self.seen.clone(),
        })
    }
}

/// One connection's handshake.
pub struct Connect {
    config: Arc<ClientConfig>,
    endpoint: Endpoint,
    seen: Arc<Mutex<Option<Negotiated>>>,
}

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream<S>, TlsError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let (tls, negotiated) =
                handshake(stream, self.config, &self.endpoint, HANDSHAKE_TIMEOUT).await?;
            *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(negotiated);
            Ok(Stream(tls))
        })
    }
}

/// A TLS connection to PostgreSQL.
pub struct Stream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for Stream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
