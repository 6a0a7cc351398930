//! The results folder: the only place a run writes files. Every write goes to a temporary file
//! that is then renamed, so a crash or Ctrl-C never leaves a half-written `results.json`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::export::{Exporter, export_all, results_json};
use crate::results::Report;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot use {path} as the results folder: {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone)]
pub struct ResultsDir {
    path: PathBuf,
    /// Whether this run made the folder (and so may remove it when nothing was measured).
    created: bool,
}

impl ResultsDir {
    /// The default folder: `results/<tool>-<suite>-<UTC timestamp>/`.
    pub fn default_path(tool: &str, suite: &str, compact_timestamp: &str) -> PathBuf {
        PathBuf::from("results").join(format!("{tool}-{suite}-{compact_timestamp}"))
    }

    /// Creates the folder and proves it is writable before anything is measured.
    pub fn create(path: &Path) -> Result<ResultsDir, WriteError> {
        let folder_error = |source| WriteError::Folder {
            path: path.to_owned(),
            source,
        };
        let created = !path.exists();
        fs::create_dir_all(path).map_err(folder_error)?;
        let probe = path.join(".fairbench-write-probe");
        fs::write(&probe, b"probe").map_err(folder_error)?;
        fs::remove_file(&probe).map_err(folder_error)?;
        Ok(ResultsDir {
            path: path.to_owned(),
            created,
        })
    }

    /// Removes the folder when this run created it and the run is abandoned before measuring,
    /// so bad input leaves nothing behind.
    pub fn discard(self) {
        if self.created {
            let _ = fs::remove_dir_all(&self.path);
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rewrites `results.json` atomically (after every cell).
    pub fn write_results(&self, report: &Report) -> Result<(), WriteError> {
        self.write_atomic("results.json", &results_json(report))
    }

    /// Writes every file of every format a finished (or interrupted) run leaves, each once.
    pub fn write_exports(
        &self,
        report: &Report,
        exporters: &[Box<dyn Exporter + '_>],
    ) -> Result<(), WriteError> {
        for export in export_all(report, exporters) {
            self.write_atomic(&export.file, &export.bytes)?;
        }
        Ok(())
    }

    /// Writes one file of the folder atomically (temporary file, fsync, rename). `name` is
    /// relative and may name a subfolder (`hdr/x.hgrm`), which is created; every secret read from a file or a variable is replaced
    /// ([`crate::redact::scrub_bytes`]).
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), WriteError> {
        let bytes = crate::redact::scrub_bytes(bytes);
        let target = self.path.join(name);
        let file_error = |source| WriteError::File {
            path: target.clone(),
            source,
        };
        let relative = Path::new(name);
        let plain = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        let Some(file_name) = relative.file_name().filter(|_| plain) else {
            return Err(file_error(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an export is named by a relative path inside the results folder",
            )));
        };
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(file_error)?;
        }
        let temporary = target.with_file_name(format!(".{}.tmp", file_name.to_string_lossy()));
        let mut file = fs::File::create(&temporary).map_err(file_error)?;
        file.write_all(&bytes).map_err(file_error)?;
        file.sync_data().map_err(file_error)?;
        fs::rename(&temporary, &target).map_err(file_error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let results = ResultsDir::create(&dir.path().join("a/b")).unwrap();
        results.write_atomic("x.txt", b"first").unwrap();
        results.write_atomic("x.txt", b"second").unwrap();
        assert_eq!(fs::read(results.path().join("x.txt")).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(results.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
        results.write_atomic("hdr/y.hgrm", b"y").unwrap();
        assert_eq!(fs::read(results.path().join("hdr/y.hgrm")).unwrap(), b"y");
        assert_eq!(fs::read_dir(results.path().join("hdr")).unwrap().count(), 1);
        for bad in ["../escape", "/abs", ""] {
            assert!(results.write_atomic(bad, b"x").is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unwritable_folder_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        fs::write(&file, b"x").unwrap();
        let error = ResultsDir::create(&file.join("sub")).unwrap_err();
        assert!(error.to_string().contains("cannot use"), "{error}");
    }

    #[test]
    fn discarding_removes_only_a_folder_this_run_created() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = ResultsDir::create(&dir.path().join("fresh")).unwrap();
        fresh.write_atomic("x", b"x").unwrap();
        fresh.discard();
        assert!(!dir.path().join("fresh").exists());
        let existing = ResultsDir::create(dir.path()).unwrap();
        existing.discard();
        assert!(dir.path().exists());
    }
}
