//! The index's SQLite file: its schema, its version, and what is done with
//! a file that is not this version's, not a database, or not this user's
//! alone (it is removed and built again: the logs are the truth).
//!
//! Tables: `sessions` (one row per log: what its header says, its title,
//! and how far it was read — the offset, and hashes of the header and of
//! the last line read, to tell a log appended to from one rewritten),
//! `events` (one row per indexed event: seq, time, type, surface and the
//! line's place in the log, for its snippet), `replaced` (the ranges
//! compaction summaries replaced: what is shadowed), and `words`, an FTS5
//! table without content (the text is in the logs) whose rowid is the
//! event's.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// The schema's version (`PRAGMA user_version`); another is rebuilt.
pub(super) const VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    cwd TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    subagent_of TEXT,
    forked_from TEXT,
    parent TEXT,
    title TEXT,
    read_to INTEGER NOT NULL,
    head BLOB NOT NULL,
    tail_at INTEGER NOT NULL,
    tail BLOB NOT NULL,
    file_len INTEGER NOT NULL,
    mtime INTEGER NOT NULL,
    ino INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_cwd ON sessions(cwd);
CREATE TABLE IF NOT EXISTS events (
    rowid INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    time INTEGER NOT NULL,
    type TEXT NOT NULL,
    surface INTEGER NOT NULL,
    at INTEGER NOT NULL,
    len INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_sid ON events(sid, seq);
CREATE TABLE IF NOT EXISTS replaced (
    sid INTEGER NOT NULL,
    first INTEGER NOT NULL,
    last INTEGER NOT NULL,
    by INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS replaced_sid ON replaced(sid);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(
    body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
";

/// Opens the index at `file`, creating it (0600, in a 0700 directory) or
/// building it anew when the one there cannot be used.
pub(super) fn open(file: &Path) -> Result<Connection, String> {
    if let Some(dir) = file.parent() {
        crate::private::create_dir_all(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(file) {
        if !meta.is_file() || !crate::private::is_owned(&meta, 0o077) {
            tracing::warn!(file = %file.display(), "the search index is not this user's alone: built anew");
            remove(file);
        }
    }
    match open_checked(file) {
        Ok(conn) => Ok(conn),
        Err(OpenError::Unusable(err)) => {
            tracing::info!(%err, file = %file.display(), "the search index is built anew");
            remove(file);
            open_checked(file).map_err(|err| format!("{}: {}", file.display(), err.message()))
        }
        // Busy, no space, no access: this open failed; the file may be
        // fine and is kept.
        Err(OpenError::Failed(err)) => Err(format!("{}: {err}", file.display())),
    }
}

/// Why an index file could not be opened.
enum OpenError {
    /// Not a database, damaged, or not this version's: built anew.
    Unusable(String),
    /// Anything else.
    Failed(String),
}

impl OpenError {
    fn message(&self) -> &str {
        match self {
            OpenError::Unusable(message) | OpenError::Failed(message) => message,
        }
    }
}

impl From<rusqlite::Error> for OpenError {
    fn from(err: rusqlite::Error) -> OpenError {
        if is_corrupt(&err) {
            OpenError::Unusable(err.to_string())
        } else {
            OpenError::Failed(err.to_string())
        }
    }
}

/// Opens (or creates) the file and checks or creates the schema.
fn open_checked(file: &Path) -> Result<Connection, OpenError> {
    // Created here, 0600, before SQLite opens it (its journal files take
    // the database's permissions).
    crate::private::options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(file)
        .map_err(|err| OpenError::Failed(err.to_string()))?;
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "wal")?;
    conn.pragma_update(None, "synchronous", "normal")?;
    // What is deleted (a forgotten session's words) is overwritten, not
    // left in free pages.
    conn.pragma_update(None, "secure_delete", "on")?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    match version {
        VERSION => {
            // A file of this version has every table.
            let tables: i64 = conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE name IN ('sessions', 'events', 'replaced', 'words')",
                [],
                |row| row.get(0),
            )?;
            if tables != 4 {
                return Err(OpenError::Unusable("tables are missing".to_owned()));
            }
        }
        // New (or being created by another process at the same time: the
        // schema's statements are idempotent).
        0 => conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {VERSION}; COMMIT;"
        ))?,
        other => {
            return Err(OpenError::Unusable(format!(
                "version {other}, not {VERSION}"
            )))
        }
    }
    Ok(conn)
}

/// Removes the index and SQLite's files beside it.
pub(super) fn remove(file: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = file.as_os_str().to_owned();
        path.push(suffix);
        let _ = std::fs::remove_file(&path);
    }
}

/// Whether an error means the file is damaged (it is then built anew).
pub(super) fn is_corrupt(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}
