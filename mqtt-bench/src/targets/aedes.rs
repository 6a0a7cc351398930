//! aedes (Node.js), started through aedes-cli: recognised by its process, whose command line
//! names the aedes-cli script; its version is read from the `package.json` of the aedes and
//! aedes-cli packages installed beside that script (aedes publishes no version over MQTT).
//! It speaks MQTT 3.1/3.1.1 only and has no shared subscriptions.

use std::path::Path;

use super::{BrokerKind, Reached};

/// aedes.
#[derive(Debug, Clone, Copy)]
pub struct Aedes;

impl BrokerKind for Aedes {
    fn kind(&self) -> &'static str {
        "aedes"
    }

    fn recognises(&self, broker: &Reached) -> bool {
        broker.runs("aedes")
    }

    fn describe<'a>(
        &'a self,
        broker: &'a Reached,
    ) -> common::pool::BoxFuture<'a, Result<Option<super::Description>, super::TargetError>> {
        Box::pin(async move {
            if !self.recognises(broker) {
                return Ok(None);
            }
            let modules = node_modules(broker);
            let version = |package: &str| {
                modules
                    .as_deref()
                    .and_then(|m| package_version(&m.join(package).join("package.json")))
            };
            let (aedes, cli) = (version("aedes"), version("aedes-cli"));
            let mut verified = std::collections::BTreeMap::new();
            if let Some(cli) = &cli {
                verified.insert("aedes-cli".to_owned(), cli.clone());
            }
            if let Some(modules) = &modules {
                verified.insert("node_modules".to_owned(), modules.display().to_string());
            }
            Ok(Some(super::Description {
                version: aedes.map_or_else(
                    || "aedes (version unknown: its package.json was not found)".to_owned(),
                    |v| format!("aedes {v}"),
                ),
                verified,
            }))
        })
    }
}

/// The `node_modules` folder the aedes-cli script of the command line lives in.
fn node_modules(broker: &Reached) -> Option<std::path::PathBuf> {
    let script = broker
        .cmdline
        .iter()
        .find(|a| a.contains("node_modules/aedes"))?;
    let at = script.find("node_modules/")? + "node_modules".len();
    Some(Path::new(&script[..at]).to_path_buf())
}

fn package_version(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["version"].as_str().map(str::to_owned)
}
