//! Reading a run back: a results folder or its `results.json`, checked to be a fairbench
//! results file of this tool and of a schema version this build reads, each problem one
//! sentence naming the file (for `compare` and `report`).

use std::path::{Path, PathBuf};

use crate::results::{Report, SCHEMA_VERSION};

/// Why a path is not a run this tool can read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}: no such file or folder")]
    Missing(PathBuf),
    #[error("{0} has no results.json (is it a results folder? a run writes one there)")]
    NoResults(PathBuf),
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON ({source}); is the file complete?")]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} is not a fairbench results file: {reason}")]
    NotResults { path: PathBuf, reason: String },
    #[error(
        "{path} has schema_version {found}, this {tool} reads version {SCHEMA_VERSION}: use the fairbench version that wrote it"
    )]
    UnknownSchema {
        path: PathBuf,
        found: serde_json::Value,
        tool: String,
    },
    #[error("{path} is a {found} run, not a {expected} one: use `{found} …` for it")]
    WrongTool {
        path: PathBuf,
        found: String,
        expected: String,
    },
}

/// A run read back: the report, the bytes it was read from and where.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub report: Report,
    /// The `results.json` itself.
    pub file: PathBuf,
    /// The folder it is in.
    pub dir: PathBuf,
    pub bytes: Vec<u8>,
}

/// Reads `path` (a results folder or a `results.json`) as a run of `tool`.
pub fn load(path: &Path, tool: &str) -> Result<Loaded, LoadError> {
    if !path.exists() {
        return Err(LoadError::Missing(path.to_owned()));
    }
    let file = if path.is_dir() {
        let file = path.join("results.json");
        if !file.is_file() {
            return Err(LoadError::NoResults(path.to_owned()));
        }
        file
    } else {
        path.to_owned()
    };
    let bytes = std::fs::read(&file).map_err(|source| LoadError::Unreadable {
        path: file.clone(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| LoadError::NotJson {
            path: file.clone(),
            source,
        })?;
    let not_results = |reason: &str| LoadError::NotResults {
        path: file.clone(),
        reason: reason.to_owned(),
    };
    let Some(object) = value.as_object() else {
        return Err(not_results("it is not a JSON object"));
    };
    let Some(version) = object.get("schema_version") else {
        return Err(not_results("it has no schema_version"));
    };
    if version.as_u64() != Some(u64::from(SCHEMA_VERSION)) {
        return Err(LoadError::UnknownSchema {
            path: file.clone(),
            found: version.clone(),
            tool: tool.to_owned(),
        });
    }
    match object.get("tool").and_then(serde_json::Value::as_str) {
        Some(found) if found != tool => {
            return Err(LoadError::WrongTool {
                path: file.clone(),
                found: found.to_owned(),
                expected: tool.to_owned(),
            });
        }
        Some(_) => {}
        None => return Err(not_results("it names no tool")),
    }
    let report: Report = serde_json::from_value(value).map_err(|e| not_results(&e.to_string()))?;
    let dir = file
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned);
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    Ok(Loaded {
        report,
        file,
        dir,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_folder_or_its_file_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let report = crate::export::fixture::report();
        let file = write(
            dir.path(),
            "run/results.json",
            &serde_json::to_string(&report).unwrap(),
        );
        let from_dir = load(&dir.path().join("run"), "sql-bench").unwrap();
        assert_eq!(from_dir.file, file);
        assert_eq!(from_dir.report.cells.len(), report.cells.len());
        assert_eq!(
            load(&file, "sql-bench").unwrap().dir,
            dir.path().join("run")
        );
    }

    #[test]
    fn every_bad_input_is_one_sentence_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut report = serde_json::to_value(crate::export::fixture::report()).unwrap();
        let error = |path: &Path| load(path, "sql-bench").unwrap_err().to_string();
        assert!(error(&d.join("nope")).ends_with("nope: no such file or folder"));
        std::fs::create_dir(d.join("empty")).unwrap();
        assert!(error(&d.join("empty")).contains("empty has no results.json"));
        let cut = write(d, "cut.json", r#"{"schema_version": 1, "tool": "#);
        assert!(error(&cut).contains("cut.json is not valid JSON (EOF"));
        let other = write(d, "other.json", r#"{"name": "x", "schema_version": 1}"#);
        assert!(
            error(&other).contains("other.json is not a fairbench results file: it names no tool")
        );
        report["schema_version"] = 7.into();
        let future = write(d, "future.json", &report.to_string());
        let e = error(&future);
        assert!(
            e.contains("has schema_version 7, this sql-bench reads version 1"),
            "{e}"
        );
        report["schema_version"] = 1.into();
        report["tool"] = "geo-bench".into();
        let geo = write(d, "geo.json", &report.to_string());
        assert!(error(&geo).contains("geo.json is a geo-bench run, not a sql-bench one"));
        report["tool"] = "sql-bench".into();
        report["cells"] = "none".into();
        let broken = write(d, "broken.json", &report.to_string());
        assert!(
            error(&broken).contains("broken.json is not a fairbench results file: invalid type")
        );
        for e in [error(&cut), error(&future)] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
