//! What every tool's SQLite target does the same way: a connection opened for durable commits,
//! a setting read back as text, and whether a table is fairbench's (listed in the file's marker
//! table; SQLite has no schemas, so ownership is that list).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

/// How long a connection waits for another's write lock before it fails (the writers of a run
/// queue on one file).
const BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// The database file a target URL names: `sqlite` (`default_file` in `RESULTS_DIR/sqlite`),
/// `sqlite:PATH` or `sqlite://PATH`.
pub fn file_of(url: &str, results_dir: &Path, default_file: &str) -> PathBuf {
    let rest = url.strip_prefix("sqlite").unwrap_or_default();
    let rest = rest
        .strip_prefix("://")
        .or_else(|| rest.strip_prefix(':'))
        .unwrap_or(rest);
    if rest.is_empty() {
        results_dir.join("sqlite").join(default_file)
    } else {
        PathBuf::from(rest)
    }
}

/// [`connect_durable`] to `path`, its folder made first when missing; a failure in words.
pub fn create_durable(path: &Path) -> Result<Connection, String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    connect_durable(path).map_err(|e| e.to_string())
}

/// Opens a connection configured for durable commits: WAL, `synchronous=FULL`.
pub fn connect_durable(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

/// The first column of the one row `sql` returns, as text (an integer in decimal).
pub fn read_text(conn: &Connection, sql: &str) -> rusqlite::Result<String> {
    conn.query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
        .map(|v| match v {
            rusqlite::types::Value::Integer(i) => i.to_string(),
            rusqlite::types::Value::Text(t) => t,
            other => format!("{other:?}"),
        })
}

/// Whether `name` exists (`None` when it does not), and if so whether the table `marker`
/// lists it as fairbench's.
pub fn ownership(conn: &Connection, name: &str, marker: &str) -> rusqlite::Result<Option<bool>> {
    let exists = |name: &str, sql: &str| -> rusqlite::Result<bool> {
        Ok(conn
            .query_row(sql, [name], |_| Ok(()))
            .optional()?
            .is_some())
    };
    if !exists(name, "SELECT 1 FROM sqlite_master WHERE name = ?1")? {
        return Ok(None);
    }
    let listed = exists(
        marker,
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
    )? && exists(name, &format!("SELECT 1 FROM {marker} WHERE name = ?1"))?;
    Ok(Some(listed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_file_or_the_default_in_the_results_folder() {
        let results = Path::new("/r");
        assert_eq!(
            file_of("sqlite", results, "f.db"),
            Path::new("/r/sqlite/f.db")
        );
        assert_eq!(
            file_of("sqlite:/d/x.db", results, "f.db"),
            Path::new("/d/x.db")
        );
        assert_eq!(
            file_of("sqlite:///d/x.db", results, "f.db"),
            Path::new("/d/x.db")
        );
        assert_eq!(
            file_of("sqlite:rel.db", results, "f.db"),
            Path::new("rel.db")
        );
    }

    #[test]
    fn a_table_is_ours_only_when_the_marker_lists_it() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connect_durable(&dir.path().join("t.db")).unwrap();
        assert_eq!(read_text(&conn, "PRAGMA journal_mode").unwrap(), "wal");
        assert_eq!(read_text(&conn, "PRAGMA synchronous").unwrap(), "2");
        assert_eq!(ownership(&conn, "t", "marks").unwrap(), None);
        conn.execute_batch("CREATE TABLE t (k INTEGER)").unwrap();
        assert_eq!(ownership(&conn, "t", "marks").unwrap(), Some(false));
        conn.execute_batch("CREATE TABLE marks (name TEXT PRIMARY KEY)")
            .unwrap();
        assert_eq!(ownership(&conn, "t", "marks").unwrap(), Some(false));
        conn.execute_batch("INSERT INTO marks VALUES ('t')")
            .unwrap();
        assert_eq!(ownership(&conn, "t", "marks").unwrap(), Some(true));
    }
}
