//! common::tls against the real TLS servers the test command starts on loopback
//! (scripts/services: FAIRBENCH_TEST_*_TLS_URL, the test CA and a wrong one): the PostgreSQL
//! that accepts only TLS above all, then one probe per other TLS server.

use std::time::{Duration, Instant};

use common::testing::{lock_servers, server_url, with_param};
use common::tls::{
    Endpoint, HANDSHAKE_TIMEOUT, Negotiated, Prelude, TlsError, TlsSettings, plaintext_postgres,
    probe,
};

fn probe_url(url: &str, prelude: Prelude, insecure: bool) -> Result<Negotiated, TlsError> {
    let settings = TlsSettings::from_url(url, insecure).expect("the exported URL parses");
    let config = settings.client_config().expect("a client config");
    let endpoint = Endpoint::from_url(url, None).expect("an endpoint");
    common::testing::block_on(probe(&endpoint, prelude, config, HANDSHAKE_TIMEOUT))
}

#[test]
fn postgres_accepting_only_tls_verifies_refuses_and_explains() {
    let _servers = lock_servers();
    let Some(url) = server_url("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let wrong_ca = server_url("FAIRBENCH_TEST_TLS_WRONG_CA").expect("exported with the TLS URL");
    let mismatch = server_url("FAIRBENCH_TEST_POSTGRES_TLS_MISMATCH_URL").expect("exported too");

    // verify-full with the right CA: TLS 1.3 and the cipher the server also reports.
    let negotiated = probe_url(&url, Prelude::Postgres, false).unwrap();
    assert_eq!(negotiated.version, "TLSv1.3");
    assert!(
        negotiated.cipher.starts_with("TLS_"),
        "{}",
        negotiated.cipher
    );
    assert_eq!(negotiated.leaf_dns_names, vec!["localhost".to_owned()]);
    let server_side = common::testing::psql(
        &url,
        "SELECT version || ' ' || cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    assert_eq!(
        server_side,
        format!("{} {}", negotiated.version, negotiated.cipher)
    );

    // The wrong CA: one line that says the certificate did not verify.
    let wrong = with_param(&url, "sslrootcert", &wrong_ca);
    let line = probe_url(&wrong, Prelude::Postgres, false)
        .unwrap_err()
        .to_string();
    assert!(
        line.starts_with(
            "the certificate of 127.0.0.1 did not verify: it is not signed by a trusted CA (UnknownIssuer)"
        ),
        "{line}"
    );
    assert!(!line.contains('\n'), "{line}");
    // --insecure-skip-verify takes the same server with the wrong CA.
    assert_eq!(
        probe_url(&wrong, Prelude::Postgres, true).unwrap().version,
        "TLSv1.3"
    );

    // An IP address the certificate does not name: verify-full refuses, verify-ca takes it.
    let line = probe_url(&mismatch, Prelude::Postgres, false)
        .unwrap_err()
        .to_string();
    assert!(
        line.starts_with(
            "the certificate of 127.0.0.2 did not verify: it is not valid for 127.0.0.2"
        ),
        "{line}"
    );
    let chain_only = with_param(&mismatch, "sslmode", "verify-ca");
    probe_url(&chain_only, Prelude::Postgres, false).unwrap();

    // A plaintext client against the TLS-only port: the server's refusal, at once.
    let endpoint = Endpoint::from_url(&url, None).unwrap();
    let started = Instant::now();
    let refusal = common::testing::block_on(plaintext_postgres(
        &endpoint,
        "fairbench",
        "postgres",
        Duration::from_secs(5),
    ))
    .unwrap_err()
    .to_string();
    assert!(started.elapsed() < Duration::from_secs(4), "no hang");
    assert!(
        refusal.contains("refused a plaintext connection: FATAL: pg_hba.conf rejects connection")
            && refusal.contains("no encryption — the server accepts only TLS"),
        "{refusal}"
    );
}

#[test]
fn every_other_tls_server_answers_the_probe_and_refuses_the_wrong_ca() {
    let _servers = lock_servers();
    let wrong_ca = server_url("FAIRBENCH_TEST_TLS_WRONG_CA");
    for (variable, prelude, ca_key) in [
        ("FAIRBENCH_TEST_MYSQL_TLS_URL", Prelude::Mysql, "ssl-ca"),
        ("FAIRBENCH_TEST_REDIS_TLS_URL", Prelude::Direct, "cacert"),
        (
            "FAIRBENCH_TEST_MOSQUITTO_TLS_URL",
            Prelude::Direct,
            "cacert",
        ),
        (
            "FAIRBENCH_TEST_OPENSEARCH_TLS_URL",
            Prelude::Direct,
            "cacert",
        ),
    ] {
        let Some(url) = server_url(variable) else {
            continue;
        };
        let negotiated =
            probe_url(&url, prelude, false).unwrap_or_else(|e| panic!("{variable}: {e}"));
        assert_eq!(negotiated.version, "TLSv1.3", "{variable}");
        let wrong = with_param(&url, ca_key, wrong_ca.as_deref().expect("exported"));
        let line = probe_url(&wrong, prelude, false).unwrap_err().to_string();
        assert!(
            line.contains("did not verify: it is not signed by a trusted CA"),
            "{variable}: {line}"
        );
    }
}

/// A TLS client against a plaintext port gets an answer in bounded time, never a hang.
#[test]
fn a_tls_client_against_plaintext_ports_does_not_hang() {
    let _servers = lock_servers();
    let ca = server_url("FAIRBENCH_TEST_TLS_CA");
    for (variable, prelude) in [
        ("FAIRBENCH_TEST_POSTGRES_URL", Prelude::Postgres),
        ("FAIRBENCH_TEST_REDIS_URL", Prelude::Direct),
        ("FAIRBENCH_TEST_MOSQUITTO_URL", Prelude::Direct),
    ] {
        let Some(url) = server_url(variable) else {
            continue;
        };
        let endpoint = Endpoint::from_url(&url, None).unwrap();
        let tls_url = format!(
            "https://{endpoint}/?cacert={}",
            ca.as_deref().expect("exported")
        );
        let config = TlsSettings::from_url(&tls_url, false)
            .unwrap()
            .client_config()
            .unwrap();
        let started = Instant::now();
        let error =
            common::testing::block_on(probe(&endpoint, prelude, config, Duration::from_secs(2)))
                .unwrap_err()
                .to_string();
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{variable}: no hang"
        );
        assert!(
            error.contains("does not accept TLS")
                || error.contains("is this a TLS port?")
                || error.contains("did not verify"),
            "{variable}: {error}"
        );
    }
}

#[cfg(feature = "postgres")]
#[test]
fn tokio_postgres_over_the_shared_connector_records_what_it_negotiated() {
    use common::tls::postgres::{MakeTls, connect, refuses_plaintext};
    let _servers = lock_servers();
    let Some(url) = server_url("FAIRBENCH_TEST_POSTGRES_TLS_URL") else {
        return;
    };
    let wrong_ca = server_url("FAIRBENCH_TEST_TLS_WRONG_CA").expect("exported with the TLS URL");
    let run = |url: String| {
        common::testing::block_on(async move {
            let settings = TlsSettings::from_url(&url, false).unwrap();
            let config: tokio_postgres::Config = common::tls::strip_params(&url).parse().unwrap();
            let tls = MakeTls::new(&settings).unwrap();
            match connect(&config, &tls).await {
                Ok((client, connection)) => {
                    tokio::spawn(connection);
                    let row = client
                        .query_one(
                            "SELECT version, cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                            &[],
                        )
                        .await
                        .unwrap();
                    let server: (String, String) = (row.get(0), row.get(1));
                    Ok((server, tls.negotiated()))
                }
                Err(e) => Err((
                    refuses_plaintext(&e),
                    common::tls::explain(&e, "127.0.0.1").map(|t| t.to_string()),
                    e.to_string(),
                )),
            }
        })
    };
    let ((version, cipher), negotiated) = run(url.clone()).unwrap();
    let negotiated = negotiated.expect("the connector saw the handshake");
    assert_eq!((version, cipher), (negotiated.version, negotiated.cipher));
    let (_, line, _) = run(with_param(&url, "sslrootcert", &wrong_ca)).unwrap_err();
    assert!(
        line.expect("a TLS cause")
            .starts_with("the certificate of 127.0.0.1 did not verify"),
    );
    let (plaintext_refused, _, text) = run(with_param(&url, "sslmode", "disable")).unwrap_err();
    assert!(plaintext_refused, "{text}");
    let allowed = with_param(
        &common::urlparts::without_params(&url, &["sslrootcert"]),
        "sslmode",
        "allow",
    );
    let ((version, _), _) = run(allowed).unwrap();
    assert_eq!(
        version, "TLSv1.3",
        "allow retries with TLS when plaintext is refused"
    );
}
