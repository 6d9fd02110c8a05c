//! Session logs on disk: `$DSH_HOME/sessions/<id>.jsonl`, one header line and
//! one event per line, append-only. The format lives in
//! `dsh_protocol::log`; this module owns files, ids and listing.
//!
//! One writer per log: a [`LogWriter`] holds an exclusive advisory lock
//! (`flock`) on its file for as long as it lives, and opening a log for
//! writing takes that lock *before* anything is read or repaired. A second
//! process (another editor window) that loads the session gets
//! `session.locked` naming the holder's pid. Lines are appended with
//! `O_APPEND`. Logs are 0600 in a 0700 directory (an existing directory is
//! tightened): they hold code and prompts.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use dsh_protocol::log::{parse_log, Event, EventData, ParsedLog, SessionHeader};

use crate::error::AgentError;

/// Epoch milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The directory of session logs.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
}

/// What `session/list` shows about one stored session.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// Id.
    pub id: String,
    /// Working directory.
    pub cwd: String,
    /// Extra roots.
    pub roots: Vec<String>,
    /// Title (first prompt line), when there was a prompt.
    pub title: Option<String>,
    /// Last write.
    pub updated_at: SystemTime,
}

impl SessionStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: PathBuf) -> Self {
        SessionStore { dir }
    }

    /// Validates a session id and returns its file. Ids come from clients,
    /// so anything but `[A-Za-z0-9_-]` is refused (no path tricks).
    ///
    /// # Errors
    /// An id that is empty, too long or has other characters.
    pub fn path(&self, id: &str) -> Result<PathBuf, AgentError> {
        let valid = !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(AgentError::SessionNotFound(id.chars().take(140).collect()));
        }
        Ok(self.dir.join(format!("{id}.jsonl")))
    }

    /// Creates a new log with its header, locked for writing.
    ///
    /// # Errors
    /// The directory or file cannot be created.
    pub fn create(&self, header: &SessionHeader) -> Result<LogWriter, AgentError> {
        let path = self.path(header.id.as_str())?;
        let write_error = |source| AgentError::LogWrite {
            path: path.display().to_string(),
            source,
        };
        create_private_dir(&self.dir).map_err(write_error)?;
        let mut file = private_file()
            .create_new(true)
            .open(&path)
            .map_err(write_error)?;
        lock(&file, header.id.as_str(), &path)?;
        let mut line =
            serde_json::to_vec(header).map_err(|err| AgentError::Internal(err.to_string()))?;
        line.push(b'\n');
        if let Err(err) = file.write_all(&line) {
            // No half-written log is left to be listed or loaded.
            let _ = std::fs::remove_file(&path);
            return Err(write_error(err));
        }
        Ok(LogWriter {
            file,
            path,
            next_seq: 1,
            len: line.len() as u64,
        })
    }

    /// Reads a log without opening it for writing.
    ///
    /// # Errors
    /// Missing session, unreadable or invalid log.
    pub fn read(&self, id: &str) -> Result<ParsedLog, AgentError> {
        let path = self.path(id)?;
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(AgentError::SessionNotFound(id.to_owned()))
            }
            Err(err) => {
                return Err(AgentError::Internal(format!(
                    "cannot read {}: {err}",
                    path.display()
                )))
            }
        };
        parse_log(&bytes).map_err(AgentError::Log)
    }

    /// Opens a log for appending: takes its lock, then reads it and
    /// repairs a torn tail (a partial last line is cut, a missing final
    /// newline is added).
    ///
    /// # Errors
    /// As [`Self::read`], `session.locked` when another writer holds it,
    /// or the file cannot be opened for writing.
    pub fn open(&self, id: &str) -> Result<(ParsedLog, LogWriter), AgentError> {
        let path = self.path(id)?;
        let write_error = |source| AgentError::LogWrite {
            path: path.display().to_string(),
            source,
        };
        let mut file = match private_file().read(true).open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(AgentError::SessionNotFound(id.to_owned()))
            }
            Err(err) => return Err(write_error(err)),
        };
        lock(&file, id, &path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|err| {
            AgentError::Internal(format!("cannot read {}: {err}", path.display()))
        })?;
        let parsed = parse_log(&bytes).map_err(AgentError::Log)?;
        drop(bytes);
        let len = file.metadata().map_err(write_error)?.len();
        if (parsed.valid_len as u64) < len {
            tracing::warn!(
                session = id,
                dropped = len - parsed.valid_len as u64,
                "cutting a torn last line from the session log"
            );
            file.set_len(parsed.valid_len as u64).map_err(write_error)?;
        }
        if parsed.valid_len > 0 {
            file.seek(SeekFrom::Start(parsed.valid_len as u64 - 1))
                .map_err(write_error)?;
            let mut last = [0u8; 1];
            file.read_exact(&mut last).map_err(write_error)?;
            if last[0] != b'\n' {
                file.seek(SeekFrom::End(0)).map_err(write_error)?;
                file.write_all(b"\n").map_err(write_error)?;
            }
        }
        let len = file.seek(SeekFrom::End(0)).map_err(write_error)?;
        let writer = LogWriter {
            file,
            path,
            next_seq: parsed.last_seq + 1,
            len,
        };
        Ok((parsed, writer))
    }

    /// Deletes a log, unless another writer holds it.
    ///
    /// # Errors
    /// Missing session, `session.locked`, or an I/O failure.
    pub fn delete(&self, id: &str) -> Result<(), AgentError> {
        let path = self.path(id)?;
        if let Ok(file) = File::open(&path) {
            lock(&file, id, &path)?;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                Err(AgentError::SessionNotFound(id.to_owned()))
            }
            Err(source) => Err(AgentError::LogWrite {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Every stored session, newest first (ties by id). Unreadable files are
    /// skipped with a warning.
    pub fn list(&self) -> Vec<SessionSummary> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(_) => return Vec::new(),
        };
        let mut summaries: Vec<SessionSummary> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let path = entry.path();
                let id = path.file_name()?.to_str()?.strip_suffix(".jsonl")?.to_owned();
                let updated_at = entry.metadata().ok()?.modified().ok()?;
                match summarize(&path) {
                    Ok((header, title)) => Some(SessionSummary { id, cwd: header.cwd, roots: header.roots, title, updated_at }),
                    Err(err) => {
                        tracing::warn!(path = %path.display(), %err, "skipping unreadable session log");
                        None
                    }
                }
            })
            .collect();
        summaries.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        summaries
    }
}

/// Reads the header and the title from the first 64 KiB of a log (the title
/// is written with the first prompt, so it is near the top).
fn summarize(path: &Path) -> Result<(SessionHeader, Option<String>), String> {
    let mut file = File::open(path).map_err(|err| err.to_string())?;
    let mut prefix = Vec::with_capacity(8192);
    Read::by_ref(&mut file)
        .take(64 * 1024)
        .read_to_end(&mut prefix)
        .map_err(|err| err.to_string())?;
    let mut lines = prefix.split(|b| *b == b'\n');
    let header: SessionHeader = serde_json::from_slice(lines.next().unwrap_or_default())
        .map_err(|err| format!("bad header: {err}"))?;
    let title = lines
        .filter(|line| memfind(line, b"\"session/title\""))
        .find_map(|line| serde_json::from_slice::<Event>(line).ok())
        .and_then(|event| match event.data {
            EventData::Title { title } => Some(title),
            _ => None,
        });
    Ok((header, title))
}

fn memfind(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Creates `dir` (0700), or tightens an existing one that others can read.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// Options for a log file: appended to, created 0600.
fn private_file() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.append(true).mode(0o600);
    options
}

/// Takes the exclusive lock on a log, or says who holds it.
fn lock(file: &File, id: &str, path: &Path) -> Result<(), AgentError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(AgentError::SessionLocked {
            id: id.to_owned(),
            holder: lock_holder(file),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(AgentError::LogWrite {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The pid holding a `flock` on `file`, from `/proc/locks` (Linux).
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = file.metadata().ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, device) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let lock_inode: u64 = device.rsplit(':').next()?.parse().ok()?;
        (*kind == "FLOCK" && lock_inode == inode)
            .then(|| pid.parse().ok())
            .flatten()
    })
}

/// Appends events to one log; holds the log's lock until dropped.
#[derive(Debug)]
pub struct LogWriter {
    file: File,
    path: PathBuf,
    next_seq: u64,
    /// Bytes of complete lines: where the next line starts.
    len: u64,
}

impl LogWriter {
    /// Appends one event as a single `write` of one line, so a crash leaves
    /// at most one torn line.
    ///
    /// # Errors
    /// The write failed (disk full, file size limit, read-only home). A
    /// partly written line is cut off again, so nothing was recorded and a
    /// later append (once there is space) continues a valid log.
    pub fn append(&mut self, data: EventData) -> Result<Event, AgentError> {
        let event = Event {
            seq: self.next_seq,
            time: now_ms(),
            ignorable: data.is_ignorable(),
            data,
        };
        let mut line =
            serde_json::to_vec(&event).map_err(|err| AgentError::Internal(err.to_string()))?;
        line.push(b'\n');
        if let Err(source) = self.file.write_all(&line) {
            let cut = self
                .file
                .set_len(self.len)
                .and_then(|()| self.file.seek(SeekFrom::Start(self.len)).map(|_| ()));
            if let Err(err) = cut {
                tracing::error!(path = %self.path.display(), %err, "cannot cut a partly written line from the session log");
            }
            return Err(AgentError::LogWrite {
                path: self.path.display().to_string(),
                source,
            });
        }
        self.len += line.len() as u64;
        self.next_seq += 1;
        Ok(event)
    }

    /// Flushes to stable storage (end of a turn, close).
    pub fn sync(&self) {
        if let Err(err) = self.file.sync_data() {
            tracing::warn!(path = %self.path.display(), %err, "cannot sync the session log");
        }
    }
}
