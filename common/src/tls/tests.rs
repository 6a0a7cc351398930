//! Real handshakes on loopback against in-process rustls servers presenting the certificates
//! of `testdata/tls`: each verifier, each error line, the preludes, the timeouts, the record.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::results::{Cell, Report, SystemInfo};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/tls")
        .join(name)
}

/// A server certificate with any key, even one that does not match it (no check is made here,
/// so the client's signature check can be tested).
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

fn server_config(cert: &str, key: &str, tls12_only: bool) -> Arc<ServerConfig> {
    let chain = vec![CertificateDer::from_pem_file(fixture(cert)).unwrap()];
    let key = PrivateKeyDer::from_pem_file(fixture(key)).unwrap();
    let signer = provider().key_provider.load_private_key(key).unwrap();
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(Arc::new(CertifiedKey::new(chain, signer)))));
    Arc::new(config)
}

/// What the fake server does before its TLS handshake.
#[derive(Clone, Copy)]
enum Before {
    Nothing,
    /// Reads the 8-byte SSLRequest and answers this byte.
    Postgres(u8),
    /// Sends a MySQL greeting (with or without CLIENT_SSL) and reads the 36-byte SSL request.
    Mysql {
        ssl: bool,
    },
}

/// A TLS server for one connection: it answers `before`, handshakes, then echoes until EOF.
async fn serve(config: Arc<ServerConfig>, before: Before) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        match before {
            Before::Nothing => {}
            Before::Postgres(answer) => {
                let mut request = [0u8; 8];
                tcp.read_exact(&mut request).await.unwrap();
                tcp.write_all(&[answer]).await.unwrap();
                if answer != b'S' {
                    return;
                }
            }
            Before::Mysql { ssl } => {
                tcp.write_all(&mysql_greeting(ssl)).await.unwrap();
                if !ssl {
                    return;
                }
                let mut request = [0u8; 36];
                tcp.read_exact(&mut request).await.unwrap();
            }
        }
        let Ok(mut tls) = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await else {
            return;
        };
        let mut buf = [0u8; 64];
        while let Ok(n) = tls.read(&mut buf).await {
            if n == 0 || tls.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    addr
}

fn mysql_greeting(ssl: bool) -> Vec<u8> {
    let mut body = vec![10u8];
    body.extend_from_slice(b"10.11.14-MariaDB\0");
    body.extend_from_slice(&7u32.to_le_bytes());
    body.extend_from_slice(b"12345678\0");
    let capabilities: u16 = if ssl {
        0xf7fe | 0x0800
    } else {
        0xf7fe & !0x0800
    };
    body.extend_from_slice(&capabilities.to_le_bytes());
    body.extend_from_slice(&[45, 2, 0, 0xff, 0x81, 21]);
    body.extend_from_slice(&[0u8; 10]);
    body.extend_from_slice(b"123456789012\0");
    let mut packet = (body.len() as u32).to_le_bytes()[..3].to_vec();
    packet.push(0);
    packet.extend_from_slice(&body);
    packet
}

fn client(verify: Verify, ca: &str) -> Arc<ClientConfig> {
    Arc::new(client_config(verify, roots_from_file(&fixture(ca)).unwrap()).unwrap())
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint {
        host: addr.ip().to_string(),
        port: addr.port(),
    }
}

async fn probe_direct(
    cert: &str,
    key: &str,
    verify: Verify,
    ca: &str,
) -> Result<Negotiated, TlsError> {
    let addr = serve(server_config(cert, key, false), Before::Nothing).await;
    probe(
        &endpoint(addr),
        Prelude::Direct,
        client(verify, ca),
        HANDSHAKE_TIMEOUT,
    )
    .await
}

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    crate::testing::block_on(future)
}

#[test]
fn the_default_provider_is_ring_after_install() {
    install_provider();
    install_provider();
    let provider = rustls::crypto::CryptoProvider::get_default().expect("installed");
    assert!(
        provider
            .cipher_suites
            .iter()
            .any(|s| s.suite() == rustls::CipherSuite::TLS13_AES_256_GCM_SHA384)
    );
}

#[test]
fn full_verification_with_the_right_ca_records_version_and_cipher() {
    let n = run(probe_direct(
        "server.pem",
        "server.key",
        Verify::Full,
        "ca.pem",
    ))
    .unwrap();
    assert_eq!(n.version, "TLSv1.3");
    assert!(
        n.cipher.starts_with("TLS_AES_") || n.cipher.starts_with("TLS_CHACHA20"),
        "{}",
        n.cipher
    );
    assert_eq!(n.leaf_dns_names, vec!["localhost".to_owned()]);
    assert!(n.handshake_ns > 0);
}

#[test]
fn tls12_suites_are_spelled_as_servers_spell_them() {
    let n = run(async {
        let addr = serve(
            server_config("server.pem", "server.key", true),
            Before::Nothing,
        )
        .await;
        probe(
            &endpoint(addr),
            Prelude::Direct,
            client(Verify::Full, "ca.pem"),
            HANDSHAKE_TIMEOUT,
        )
        .await
    })
    .unwrap();
    assert_eq!(n.version, "TLSv1.2");
    assert!(
        n.cipher.starts_with("TLS_ECDHE_ECDSA_WITH_"),
        "{}",
        n.cipher
    );
}

#[test]
fn the_wrong_ca_is_refused_in_one_line() {
    for verify in [Verify::Full, Verify::Chain] {
        let error = run(probe_direct(
            "server.pem",
            "server.key",
            verify,
            "wrong-ca.pem",
        ))
        .unwrap_err();
        let line = error.to_string();
        assert!(
            line.starts_with("the certificate of 127.0.0.1 did not verify: it is not signed by a trusted CA (UnknownIssuer)"),
            "{verify:?}: {line}"
        );
        assert!(!line.contains('\n'));
    }
}

#[test]
fn a_name_mismatch_fails_full_verification_but_not_the_chain_check() {
    let error = run(probe_direct(
        "other.pem",
        "other.key",
        Verify::Full,
        "ca.pem",
    ))
    .unwrap_err();
    let line = error.to_string();
    assert!(
        line.starts_with(
            "the certificate of 127.0.0.1 did not verify: it is not valid for 127.0.0.1 (it names"
        ),
        "{line}"
    );
    assert!(
        line.contains("other.example") && line.contains("(NotValidForName)"),
        "{line}"
    );
    let chain = run(probe_direct(
        "other.pem",
        "other.key",
        Verify::Chain,
        "ca.pem",
    ))
    .unwrap();
    assert_eq!(chain.leaf_dns_names, vec!["other.example".to_owned()]);
}

#[test]
fn the_insecure_verifier_takes_any_certificate_but_checks_signatures() {
    run(probe_direct(
        "server.pem",
        "server.key",
        Verify::Nothing,
        "wrong-ca.pem",
    ))
    .unwrap();
    run(probe_direct(
        "other.pem",
        "other.key",
        Verify::Nothing,
        "wrong-ca.pem",
    ))
    .unwrap();
    // server.pem presented with other.key: the peer does not hold the certificate's key.
    for verify in [Verify::Nothing, Verify::Full] {
        let error = run(probe_direct("server.pem", "other.key", verify, "ca.pem")).unwrap_err();
        let line = error.to_string();
        assert!(
            line.starts_with("the certificate of 127.0.0.1 did not verify: a signature does not verify (BadSignature)"),
            "{verify:?}: {line}"
        );
    }
}

#[test]
fn a_silent_port_times_out_and_a_closing_one_says_so() {
    let (silent, closing) = run(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(tcp);
        });
        let started = Instant::now();
        let config = client(Verify::Full, "ca.pem");
        let silent = probe(
            &endpoint(addr),
            Prelude::Direct,
            config.clone(),
            Duration::from_millis(300),
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(3));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            drop(tcp);
        });
        let closing = probe(&endpoint(addr), Prelude::Direct, config, HANDSHAKE_TIMEOUT).await;
        (silent, closing)
    });
    let silent = silent.unwrap_err().to_string();
    assert!(
        silent.starts_with("no TLS answer from 127.0.0.1:")
            && silent.contains("is this a TLS port?"),
        "{silent}"
    );
    let closing = closing.unwrap_err().to_string();
    assert!(
        closing.contains("closed the connection during the TLS handshake — is this a TLS port?"),
        "{closing}"
    );
}

#[test]
fn a_refused_connection_is_one_line() {
    let error = run(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        probe(
            &endpoint(addr),
            Prelude::Direct,
            client(Verify::Full, "ca.pem"),
            HANDSHAKE_TIMEOUT,
        )
        .await
    })
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("cannot reach 127.0.0.1:") && error.contains("refused"),
        "{error}"
    );
}

#[test]
fn postgres_and_mysql_ask_for_tls_first() {
    let config = server_config("server.pem", "server.key", false);
    let (pg, pg_plain, my, my_plain) = run(async {
        let c = client(Verify::Full, "ca.pem");
        let at = |before| {
            let config = config.clone();
            async move { endpoint(serve(config, before).await) }
        };
        let pg = probe(
            &at(Before::Postgres(b'S')).await,
            Prelude::Postgres,
            c.clone(),
            HANDSHAKE_TIMEOUT,
        )
        .await;
        let pg_plain = probe(
            &at(Before::Postgres(b'N')).await,
            Prelude::Postgres,
            c.clone(),
            HANDSHAKE_TIMEOUT,
        )
        .await;
        let my = probe(
            &at(Before::Mysql { ssl: true }).await,
            Prelude::Mysql,
            c.clone(),
            HANDSHAKE_TIMEOUT,
        )
        .await;
        let my_plain = probe(
            &at(Before::Mysql { ssl: false }).await,
            Prelude::Mysql,
            c,
            HANDSHAKE_TIMEOUT,
        )
        .await;
        (pg, pg_plain, my, my_plain)
    });
    assert_eq!(pg.unwrap().version, "TLSv1.3");
    assert!(
        pg_plain
            .unwrap_err()
            .to_string()
            .contains("does not accept TLS: it answered N to the SSLRequest")
    );
    assert_eq!(my.unwrap().version, "TLSv1.3");
    assert!(
        my_plain
            .unwrap_err()
            .to_string()
            .contains("does not offer CLIENT_SSL")
    );
}

#[test]
fn handshake_hands_back_a_working_stream() {
    let echoed = run(async {
        let addr = serve(
            server_config("server.pem", "server.key", false),
            Before::Nothing,
        )
        .await;
        let tcp = TcpStream::connect(addr).await.unwrap();
        let (mut tls, negotiated) = handshake(
            tcp,
            client(Verify::Full, "ca.pem"),
            &endpoint(addr),
            HANDSHAKE_TIMEOUT,
        )
        .await
        .unwrap();
        assert_eq!(negotiated.version, "TLSv1.3");
        tls.write_all(b"PING\r\n").await.unwrap();
        tls.flush().await.unwrap();
        let mut buf = [0u8; 6];
        tls.read_exact(&mut buf).await.unwrap();
        buf
    });
    assert_eq!(&echoed, b"PING\r\n");
}

#[test]
fn settings_build_the_config_they_name() {
    let ca = fixture("ca.pem");
    let url = |port: u16, mode: &str| {
        format!(
            "postgres://u@127.0.0.1:{port}/db?sslmode={mode}&sslrootcert={}",
            ca.display()
        )
    };
    let results = run(async {
        let mut out = Vec::new();
        for (cert, key, mode) in [
            ("server.pem", "server.key", "verify-full"),
            ("other.pem", "other.key", "verify-ca"),
            ("other.pem", "other.key", "verify-full"),
        ] {
            let addr = serve(server_config(cert, key, false), Before::Postgres(b'S')).await;
            let settings = TlsSettings::from_url(&url(addr.port(), mode), false).unwrap();
            let config = settings.client_config().unwrap();
            out.push(
                probe(
                    &endpoint(addr),
                    Prelude::Postgres,
                    config,
                    HANDSHAKE_TIMEOUT,
                )
                .await,
            );
        }
        out
    });
    assert!(results[0].is_ok() && results[1].is_ok());
    assert!(
        results[2]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("NotValidForName")
    );
}

#[test]
fn a_system_records_its_tls_and_the_insecure_label_reaches_every_cell() {
    let settings = TlsSettings::from_url("rediss://127.0.0.1:6380", true).unwrap();
    settings.client_config().unwrap();
    let negotiated = Negotiated {
        version: "TLSv1.3".into(),
        cipher: "TLS_AES_256_GCM_SHA384".into(),
        handshake_ns: 7_040_000,
        leaf_dns_names: vec![],
    };
    let mut info = SystemInfo {
        name: "redis".into(),
        ..SystemInfo::default()
    };
    record(&mut info, &settings, Some(&negotiated));
    record(&mut info, &settings, Some(&negotiated));
    let v = &info.verified;
    assert_eq!(v[TLS_VERSION], "TLSv1.3");
    assert_eq!(v[TLS_CIPHER], "TLS_AES_256_GCM_SHA384");
    assert_eq!(v[TLS_VERIFICATION], "none (--insecure-skip-verify)");
    assert_eq!(v[TLS_HANDSHAKE_MS], "7.0");
    assert!(!v.contains_key(TLS_CA));
    assert_eq!(info.labels, vec![INSECURE_LABEL.to_owned()]);
    let mut report = Report::begin(
        "t",
        "0",
        "s",
        "s",
        serde_json::json!({}),
        Default::default(),
    );
    report.systems.push(info);
    report.upsert_cell(Cell::new("w", "redis", "ops/s", 1, 1));
    assert_eq!(report.cells[0].labels, vec![INSECURE_LABEL.to_owned()]);

    let verified = TlsSettings::from_url(
        &format!("https://h/?cacert={}", fixture("ca.pem").display()),
        false,
    )
    .unwrap();
    let mut info = SystemInfo::default();
    record(&mut info, &verified, Some(&negotiated));
    assert_eq!(info.verified[TLS_VERIFICATION], "verify-full");
    assert_eq!(
        info.verified[TLS_CA],
        fixture("ca.pem").display().to_string()
    );
    assert!(info.labels.is_empty());
    let mut plain = SystemInfo::default();
    record(
        &mut plain,
        &TlsSettings::from_url("redis://h", false).unwrap(),
        None,
    );
    assert_eq!(plain.verified[TLS_VERSION], "none (plaintext)");
}
