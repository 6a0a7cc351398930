//! A broker reachable at `mqtt://[USER:PASSWORD@]HOST:PORT`: reached with mqtt-bench's own
//! client, described by what it publishes under `$SYS`, observed through /proc when its PID is
//! given.

use common::options::TargetSpec;
use common::results::SystemInfo;

use super::{Broker, TargetError, endpoint, identify, mosquitto, settings, sys_version};
use crate::options::{BrokerPid, BrokerUrl};
use crate::resources::Probe;

pub async fn open(spec: &TargetSpec, pid: Option<&BrokerPid>) -> Result<Broker, TargetError> {
    let url = BrokerUrl::parse(&spec.url).map_err(|message| TargetError::Url {
        url: spec.url_redacted(),
        message,
    })?;
    if !is_loopback(&url.host) {
        return Err(TargetError::Url {
            url: spec.url_redacted(),
            message: "mqtt-bench only sends load to this machine (127.0.0.1, localhost or ::1)"
                .into(),
        });
    }
    let endpoint = endpoint(url.addr(), url.username.clone(), url.password.clone());
    let client_id = format!("fairbench-describe-{}", std::process::id());
    let version = sys_version(&endpoint, &client_id).await?;
    let kind = version.as_deref().map_or("mqtt", identify);
    let probe = pid.map(|p| Probe::Process(p.pid));
    if let (Some(probe), Some(pid)) = (&probe, pid)
        && !probe.alive()
    {
        return Err(TargetError::Other(format!(
            "--broker-pid {}: no process {} is running on this machine",
            pid.pid, pid.pid
        )));
    }
    let mut verified = settings([(
        "$SYS/broker/version",
        version
            .clone()
            .unwrap_or_else(|| "not published".to_owned()),
    )]);
    if let Some(pid) = pid {
        verified.insert("pid".into(), pid.pid.to_string());
        if kind == "mosquitto" {
            verified.extend(mosquitto::settings_of(pid.pid));
        }
    }
    let info = SystemInfo {
        name: spec.name.clone().unwrap_or_else(|| kind.to_owned()),
        kind: kind.to_owned(),
        url_redacted: spec.url_redacted(),
        version: version
            .unwrap_or_else(|| "unknown (the broker publishes no $SYS/broker/version)".to_owned()),
        verified,
        labels: Vec::new(),
        data_dir: None,
        ..SystemInfo::default()
    };
    Ok(Broker {
        endpoint,
        info,
        probe,
        embedded: false,
        _guard: None,
    })
}

/// Whether `host` is this machine: load only ever goes to loopback.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_are_targets() {
        for host in ["127.0.0.1", "127.0.0.53", "localhost", "::1"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.1", "192.168.1.1", "example.com", "0.0.0.0"] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[tokio::test]
    async fn remote_hosts_are_refused_before_any_connection() {
        let spec = TargetSpec::parse("mqtt://10.1.2.3:1883").unwrap();
        let error = open(&spec, None).await.err().unwrap().to_string();
        assert!(error.contains("only sends load to this machine"), "{error}");
    }
}
