//! Handshakes, bounded and explained: [`handshake`] for clients that hold their own stream
//! (RESP, MQTT), and [`probe`], one extra connection made in the connect phase with the same
//! `ClientConfig` as the client, for clients that hide theirs (mysql_async, mongodb, scylla,
//! reqwest's missing cipher, tonic, ureq): it records the negotiated version and cipher suite
//! and the handshake time, never inside a measured window. PostgreSQL and MySQL first ask for
//! TLS in their own protocol (the preludes below); every other protocol starts TLS at byte 0.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::error::{TlsError, from_rustls};
use super::settings::Endpoint;

/// How long a handshake may take before it is given up: a TLS client against a plaintext port
/// would otherwise wait forever (the ClientHello has no line end a line protocol waits for).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a protocol sends before its TLS handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prelude {
    /// TLS from the first byte (HTTPS, gRPC, MongoDB, CQL, `rediss`, `mqtts`).
    Direct,
    /// PostgreSQL's SSLRequest, answered `S` (TLS follows) or `N`.
    Postgres,
    /// MySQL/MariaDB: the server's greeting, then an SSL request packet.
    Mysql,
}

/// What a TLS connection negotiated, in the spelling servers use (`TLSv1.3`,
/// `TLS_AES_256_GCM_SHA384`: pg_stat_ssl, MariaDB's Ssl_version/Ssl_cipher, openssl).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Negotiated {
    pub version: String,
    pub cipher: String,
    /// The TLS handshake alone: after the TCP connect and any prelude.
    pub handshake_ns: u64,
    /// The DNS names of the server's certificate (a MySQL `VERIFY_CA` connection pins one).
    pub leaf_dns_names: Vec<String>,
}

/// What `connection` negotiated; `handshake_ns` as measured by the caller.
pub fn negotiated(connection: &rustls::ClientConnection, handshake_ns: u64) -> Negotiated {
    let version = connection
        .protocol_version()
        .and_then(|v| v.as_str())
        .map(|v| v.replace('_', "."))
        .unwrap_or_default();
    let cipher = connection
        .negotiated_cipher_suite()
        .and_then(|s| s.suite().as_str())
        .map(|s| match s.strip_prefix("TLS13_") {
            Some(rest) => format!("TLS_{rest}"),
            None => s.to_owned(),
        })
        .unwrap_or_default();
    let leaf_dns_names = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| webpki::EndEntityCert::try_from(leaf).ok())
        .map(|cert| cert.valid_dns_names().map(str::to_owned).collect())
        .unwrap_or_default();
    Negotiated {
        version,
        cipher,
        handshake_ns,
        leaf_dns_names,
    }
}

/// The TLS handshake over `stream` to `endpoint`, within `timeout`; every failure one line.
pub async fn handshake<S>(
    stream: S,
    config: Arc<ClientConfig>,
    endpoint: &Endpoint,
    timeout: Duration,
) -> Result<(TlsStream<S>, Negotiated), TlsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let name = endpoint.server_name()?;
    let started = Instant::now();
    let connect = tokio_rustls::TlsConnector::from(config).connect(name, stream);
    let tls = match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return Err(handshake_error(&e, endpoint)),
        Err(_) => {
            return Err(TlsError::NoAnswer {
                endpoint: endpoint.to_string(),
                seconds: timeout.as_secs().max(1),
            });
        }
    };
    let handshake_ns = started.elapsed().as_nanos() as u64;
    let negotiated = negotiated(tls.get_ref().1, handshake_ns);
    Ok((tls, negotiated))
}

/// A failed handshake's io::Error as one line.
fn handshake_error(error: &std::io::Error, endpoint: &Endpoint) -> TlsError {
    if let Some(found) = super::error::find_rustls(error) {
        return from_rustls(found, &endpoint.host);
    }
    match error.kind() {
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
            TlsError::Closed {
                endpoint: endpoint.to_string(),
                message: error.to_string(),
            }
        }
        _ => TlsError::Other {
            host: endpoint.host.clone(),
            message: error.to_string(),
        },
    }
}

/// One connection to `endpoint` that asks for TLS as `prelude` says, completes the handshake
/// with `config` and closes: what the real clients negotiate, measured in the connect phase.
pub async fn probe(
    endpoint: &Endpoint,
    prelude: Prelude,
    config: Arc<ClientConfig>,
    timeout: Duration,
) -> Result<Negotiated, TlsError> {
    let mut tcp = connect_tcp(endpoint, timeout).await?;
    match tokio::time::timeout(timeout, ask_for_tls(&mut tcp, prelude, endpoint)).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(TlsError::NoAnswer {
                endpoint: endpoint.to_string(),
                seconds: timeout.as_secs().max(1),
            });
        }
    }
    let (mut tls, negotiated) = handshake(tcp, config, endpoint, timeout).await?;
    // close_notify; a server that already went away is no failure of the probe.
    let _ = tokio::time::timeout(Duration::from_millis(200), tls.shutdown()).await;
    Ok(negotiated)
}

async fn connect_tcp(endpoint: &Endpoint, timeout: Duration) -> Result<TcpStream, TlsError> {
    let failed = |message: String| TlsError::Connect {
        endpoint: endpoint.to_string(),
        message,
    };
    let connect = TcpStream::connect((endpoint.host.as_str(), endpoint.port));
    let tcp = match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(failed(e.to_string())),
        Err(_) => return Err(failed(format!("no answer within {}s", timeout.as_secs()))),
    };
    tcp.set_nodelay(true).map_err(|e| failed(e.to_string()))?;
    Ok(tcp)
}

async fn ask_for_tls(
    tcp: &mut TcpStream,
    prelude: Prelude,
    endpoint: &Endpoint,
) -> Result<(), TlsError> {
    let io = |e: std::io::Error| TlsError::Closed {
        endpoint: endpoint.to_string(),
        message: e.to_string(),
    };
    let refused = |why: String| TlsError::NotOffered {
        endpoint: endpoint.to_string(),
        why,
    };
    match prelude {
        Prelude::Direct => Ok(()),
        Prelude::Postgres => {
            // SSLRequest: length 8, code 80877103 (1234 << 16 | 5679).
            tcp.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])
                .await
                .map_err(io)?;
            let mut answer = [0u8; 1];
            tcp.read_exact(&mut answer).await.map_err(io)?;
            match answer[0] {
                b'S' => Ok(()),
                b'N' => Err(refused("it answered N to the SSLRequest (ssl=off)".into())),
                other => Err(refused(format!(
                    "it answered {other:#04x} to the SSLRequest: is this a PostgreSQL server?"
                ))),
            }
        }
        Prelude::Mysql => mysql_ssl_request(tcp, endpoint).await,
    }
}

/// Reads MySQL's greeting, checks it offers CLIENT_SSL, and sends the 32-byte SSL request.
async fn mysql_ssl_request(tcp: &mut TcpStream, endpoint: &Endpoint) -> Result<(), TlsError> {
    const CLIENT_LONG_PASSWORD: u32 = 0x1;
    const CLIENT_PROTOCOL_41: u32 = 0x200;
    const CLIENT_SSL: u32 = 0x0800;
    const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
    let io = |e: std::io::Error| TlsError::Closed {
        endpoint: endpoint.to_string(),
        message: e.to_string(),
    };
    let refused = |why: &str| TlsError::NotOffered {
        endpoint: endpoint.to_string(),
        why: why.to_owned(),
    };
    let mut header = [0u8; 4];
    tcp.read_exact(&mut header).await.map_err(io)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut greeting = vec![0u8; len];
    tcp.read_exact(&mut greeting).await.map_err(io)?;
    if greeting.first() == Some(&0xff) {
        let message = String::from_utf8_lossy(greeting.get(3..).unwrap_or_default());
        return Err(refused(&format!("it answered with an error: {message}")));
    }
    // protocol version, server version (NUL-terminated), thread id, 8 bytes of scramble, filler.
    let nul = greeting
        .iter()
        .skip(1)
        .position(|&b| b == 0)
        .ok_or_else(|| refused("its greeting is not MySQL's"))?
        + 1;
    let at = nul + 1 + 4 + 8 + 1;
    let capabilities = greeting
        .get(at..at + 2)
        .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])))
        .ok_or_else(|| refused("its greeting is not MySQL's"))?;
    if capabilities & CLIENT_SSL == 0 {
        return Err(refused(
            "its greeting does not offer CLIENT_SSL (no ssl_cert/ssl_key?)",
        ));
    }
    let flags = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION;
    let mut packet = vec![32, 0, 0, 1];
    packet.extend_from_slice(&flags.to_le_bytes());
    packet.extend_from_slice(&(16u32 << 20).to_le_bytes());
    packet.push(45); // utf8mb4_general_ci
    packet.extend_from_slice(&[0u8; 23]);
    tcp.write_all(&packet).await.map_err(io)
}

/// Whether PostgreSQL at `endpoint` takes a plaintext connection from `user` to `database`:
/// `Ok` when it asks for authentication, else its own refusal in one line (a TLS-only server
/// says "pg_hba.conf rejects connection … no encryption").
pub async fn plaintext_postgres(
    endpoint: &Endpoint,
    user: &str,
    database: &str,
    timeout: Duration,
) -> Result<(), TlsError> {
    let mut tcp = connect_tcp(endpoint, timeout).await?;
    let mut body = Vec::new();
    body.extend_from_slice(&196608u32.to_be_bytes()); // protocol 3.0
    for (key, value) in [("user", user), ("database", database)] {
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut startup = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    startup.extend_from_slice(&body);
    let exchange = async {
        tcp.write_all(&startup).await?;
        let mut kind = [0u8; 5];
        tcp.read_exact(&mut kind).await?;
        let len = u32::from_be_bytes([kind[1], kind[2], kind[3], kind[4]]) as usize;
        let mut rest = vec![0u8; len.saturating_sub(4).min(1 << 16)];
        tcp.read_exact(&mut rest).await?;
        Ok::<_, std::io::Error>((kind[0], rest))
    };
    let (kind, rest) = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            return Err(TlsError::Closed {
                endpoint: endpoint.to_string(),
                message: e.to_string(),
            });
        }
        Err(_) => {
            return Err(TlsError::Connect {
                endpoint: endpoint.to_string(),
                message: format!(
                    "no answer to a startup message within {}s",
                    timeout.as_secs()
                ),
            });
        }
    };
    if kind != b'E' {
        return Ok(());
    }
    let message = error_fields(&rest);
    let hint = if message.contains("no encryption") {
        " — the server accepts only TLS (use sslmode=require, verify-ca or verify-full)".into()
    } else {
        String::new()
    };
    Err(TlsError::PlaintextRefused {
        endpoint: endpoint.to_string(),
        message,
        hint,
    })
}

/// `SEVERITY: message` of a PostgreSQL ErrorResponse body.
fn error_fields(body: &[u8]) -> String {
    let mut severity = String::new();
    let mut message = String::new();
    for field in body.split(|&b| b == 0).filter(|f| !f.is_empty()) {
        let text = String::from_utf8_lossy(&field[1..]).into_owned();
        match field[0] {
            b'S' => severity = text,
            b'M' => message = text,
            _ => {}
        }
    }
    format!("{severity}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_read_as_severity_and_message() {
        let body = b"SFATAL\0VFATAL\0C28000\0Mpg_hba.conf rejects connection, no encryption\0\0";
        assert_eq!(
            error_fields(body),
            "FATAL: pg_hba.conf rejects connection, no encryption"
        );
    }
}
