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
//! tightened): they hold code and prompts. After each write a writer
//! touches the directory, whose change time then tells a listing that a
//! log was written ([`index`]).
//!
//! On Windows, where a lock would keep readers out too, the writer's
//! handle shares reading alone: a second writer's open (or a deletion)
//! fails and is `session.locked`, without a pid. The platform differences
//! of the directory itself are in [`dir`].

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

mod dir;
mod index;

use dsh_protocol::log::{Event, EventData, LogLine, LogParser, SessionHeader};

use crate::error::AgentError;
use dir::Touch;

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
    index: std::sync::Arc<index::Index>,
    /// The full-text index of the logs (opened on first use).
    search: std::sync::Arc<crate::search::SearchIndex>,
}

/// What `session/list` shows about one stored session (shared with the
/// index: a listing of 10,000 sessions copies none of their strings).
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// Id.
    pub id: std::sync::Arc<str>,
    /// Working directory.
    pub cwd: std::sync::Arc<str>,
    /// Extra roots.
    pub roots: std::sync::Arc<[String]>,
    /// Title (first prompt line), when there was a prompt.
    pub title: Option<std::sync::Arc<str>>,
    /// A subagent's log: its parent session.
    pub parent: Option<std::sync::Arc<str>>,
    /// Last write.
    pub updated_at: SystemTime,
}

impl SessionStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: PathBuf) -> Self {
        SessionStore {
            index: std::sync::Arc::new(index::Index::new(dir.join(index::FILE))),
            search: crate::search::SearchIndex::shared(&dir),
            dir,
        }
    }

    /// The full-text index of its logs.
    pub fn search(&self) -> &std::sync::Arc<crate::search::SearchIndex> {
        &self.search
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
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
        let mut dir = Touch::open(&self.dir);
        dir.touch();
        Ok(LogWriter {
            file,
            dir,
            path,
            next_seq: 1,
            len: line.len() as u64,
        })
    }

    /// Reads a log without opening it for writing, up to `limit` bytes (a
    /// live session's log as far as its writer has written).
    ///
    /// # Errors
    /// Missing session, unreadable log or header.
    pub fn read(&self, id: &str, limit: Option<u64>) -> Result<LogReader, AgentError> {
        let path = self.path(id)?;
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(AgentError::SessionNotFound(id.to_owned()))
            }
            Err(err) => return Err(read_error(&path, err)),
        };
        LogReader::new(file, limit.unwrap_or(u64::MAX), path)
    }

    /// Opens a log for appending: takes its lock, then hands out a reader
    /// of its events; [`OpenLog::finish`] repairs a torn tail (a partial
    /// last line is cut, a missing final newline is added) and returns the
    /// writer.
    ///
    /// # Errors
    /// As [`Self::read`], `session.locked` when another writer holds it,
    /// or the file cannot be opened for writing.
    pub fn open(&self, id: &str) -> Result<OpenLog, AgentError> {
        let path = self.path(id)?;
        let file = match private_file().read(true).open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(AgentError::SessionNotFound(id.to_owned()))
            }
            Err(err) if held(&err) => {
                return Err(AgentError::SessionLocked {
                    id: id.to_owned(),
                    holder: None,
                })
            }
            Err(err) => {
                return Err(AgentError::LogWrite {
                    path: path.display().to_string(),
                    source: err,
                })
            }
        };
        lock(&file, id, &path)?;
        let reading = file.try_clone().map_err(|err| read_error(&path, err))?;
        let reader = LogReader::new(reading, u64::MAX, path)?;
        Ok(OpenLog {
            reader,
            file,
            dir: Touch::open(&self.dir),
        })
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
            Ok(()) => {
                self.search.forget(id);
                Ok(())
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                Err(AgentError::SessionNotFound(id.to_owned()))
            }
            Err(err) if held(&err) => Err(AgentError::SessionLocked {
                id: id.to_owned(),
                holder: None,
            }),
            Err(source) => Err(AgentError::LogWrite {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Every stored session, in no particular order. Summaries come from
    /// the index ([`index`]); only logs written since it was saved are
    /// read. Unreadable files are skipped with a warning.
    pub fn list(&self) -> Vec<SessionSummary> {
        self.index.list(&self.dir)
    }

    /// A page of the stored sessions that `keep(cwd, parent)` keeps:
    /// up to `size` of those after `after` (`(ms, id)` of the last one
    /// shown), newer millisecond first, then by id; and whether more
    /// follow. Like [`Self::list`], but only the page is copied out.
    pub fn page(
        &self,
        keep: &dyn Fn(&str, Option<&str>) -> bool,
        after: Option<(u128, &str)>,
        size: usize,
    ) -> (Vec<SessionSummary>, bool) {
        self.index.page(&self.dir, keep, after, size)
    }
}

/// Creates `dir` (0700), or tightens an existing one that others can read.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    crate::private::create_dir_all(dir)?;
    crate::private::tighten(dir)
}

/// Options for a log file: appended to, created 0600. On Windows a
/// writer's handle shares reading alone: that, not a lock, keeps a second
/// writer (and a deletion) out there ([`lock`]).
fn private_file() -> OpenOptions {
    let mut options = crate::private::options();
    options.append(true);
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        options.share_mode(windows_sys::Win32::Storage::FileSystem::FILE_SHARE_READ);
    }
    options
}

/// Whether opening or deleting a log failed because a writer holds it:
/// on Windows a sharing violation ([`private_file`]); never on unix,
/// where the lock tells.
fn held(err: &std::io::Error) -> bool {
    #[cfg(windows)]
    {
        err.raw_os_error() == Some(windows_sys::Win32::Foundation::ERROR_SHARING_VIOLATION as i32)
    }
    #[cfg(not(windows))]
    {
        let _ = err;
        false
    }
}

/// Takes the exclusive lock on a log, or says who holds it. A lock that
/// is busy is tried again for up to 100 ms: a child forked at the moment
/// this process closed the log holds a copy of its descriptor (and so the
/// `flock`) until its `exec` closes it.
#[cfg(unix)]
fn lock(file: &File, id: &str, path: &Path) -> Result<(), AgentError> {
    let mut tries = 0;
    let busy = loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if tries < 10 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => break other,
        }
    };
    match busy {
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
#[cfg(unix)]
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

/// Nothing on Windows: a lock there is mandatory (it would keep the
/// readers of a live log out), and the writer's open already keeps other
/// writers out ([`private_file`], [`held`]).
#[cfg(not(unix))]
fn lock(_file: &File, _id: &str, _path: &Path) -> Result<(), AgentError> {
    Ok(())
}

fn read_error(path: &Path, err: std::io::Error) -> AgentError {
    AgentError::Internal(format!("cannot read {}: {err}", path.display()))
}

/// A log read one line at a time: memory holds one line, not the log.
pub struct LogReader {
    reader: BufReader<std::io::Take<File>>,
    parser: LogParser,
    line: Vec<u8>,
    /// Where the complete lines read so far end (a torn tail starts here).
    valid_len: u64,
    offset: u64,
    done: bool,
    path: PathBuf,
    /// The log's header.
    pub header: SessionHeader,
}

impl LogReader {
    fn new(file: File, limit: u64, path: PathBuf) -> Result<LogReader, AgentError> {
        let mut reader = LogReader {
            reader: BufReader::with_capacity(64 * 1024, file.take(limit)),
            parser: LogParser::default(),
            line: Vec::new(),
            valid_len: 0,
            offset: 0,
            done: false,
            path,
            header: SessionHeader::new(
                dsh_protocol::SessionId::new(""),
                0,
                String::new(),
                Vec::new(),
            ),
        };
        loop {
            match reader.next_line()? {
                Some(LogLine::Header(header)) => {
                    reader.header = header;
                    return Ok(reader);
                }
                Some(LogLine::Skipped) => {}
                Some(LogLine::Event(_) | LogLine::Torn) | None => {
                    return Err(AgentError::Log(LogParser::no_header()))
                }
            }
        }
    }

    fn next_line(&mut self) -> Result<Option<LogLine>, AgentError> {
        if self.done {
            return Ok(None);
        }
        self.line.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.line)
            .map_err(|err| read_error(&self.path, err))?;
        if read == 0 {
            self.done = true;
            return Ok(None);
        }
        let terminated = self.line.last() == Some(&b'\n');
        if terminated {
            self.line.pop();
        }
        let last = self
            .reader
            .fill_buf()
            .map_err(|err| read_error(&self.path, err))?
            .is_empty();
        let parsed = self
            .parser
            .line(&self.line, last)
            .map_err(AgentError::Log)?;
        let blank = self.line.iter().all(u8::is_ascii_whitespace);
        self.offset += read as u64;
        match parsed {
            LogLine::Torn => self.done = true,
            // A complete value without its newline is used (every byte
            // arrived); the writer adds the missing newline before its next
            // append.
            _ if terminated || !blank => self.valid_len = self.offset,
            _ => {}
        }
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::new();
        }
        Ok(Some(parsed))
    }

    /// The next event, `None` at the end of the log.
    ///
    /// # Errors
    /// An unreadable file or a corrupt line that is not the last.
    pub fn next_event(&mut self) -> Result<Option<Event>, AgentError> {
        loop {
            match self.next_line()? {
                Some(LogLine::Event(event)) => return Ok(Some(event)),
                Some(LogLine::Header(_) | LogLine::Skipped) => {}
                Some(LogLine::Torn) | None => return Ok(None),
            }
        }
    }
}

impl Iterator for LogReader {
    type Item = Result<Event, AgentError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

impl LogReader {
    /// Below this many bytes left to read, [`Self::read_ahead`] reads
    /// inline.
    const AHEAD_FROM: u64 = 1 << 20;

    /// A batch of events read ahead ends at this many, or this many bytes
    /// of lines: at most [`Self::AHEAD_BATCHES`] + 2 batches are held.
    const AHEAD_EVENTS: usize = 256;
    const AHEAD_BYTES: u64 = 1 << 20;
    const AHEAD_BATCHES: usize = 2;

    /// Calls `each` with the log's events, read and parsed on a thread of
    /// their own while `each` takes them (a replay folds, converts and
    /// sends while the next lines are parsed); inline for a short log. The
    /// reader is left where the events ended, as if `each` had read them
    /// itself: when `each` stops early, at most a few batches further.
    pub fn read_ahead<R>(
        &mut self,
        each: impl FnOnce(&mut dyn Iterator<Item = Result<Event, AgentError>>) -> R,
    ) -> R {
        let left = self
            .reader
            .get_ref()
            .get_ref()
            .metadata()
            .map_or(0, |meta| meta.len())
            .saturating_sub(self.offset)
            .min(self.reader.get_ref().limit());
        if left < Self::AHEAD_FROM {
            return each(self);
        }
        let (batches, events) = std::sync::mpsc::sync_channel(Self::AHEAD_BATCHES);
        let mut each = Some(each);
        let ahead = std::thread::scope(|scope| {
            let reader = &mut *self;
            let reading = std::thread::Builder::new()
                .name("dsh-log-read".to_owned())
                .spawn_scoped(scope, move || reader.send_ahead(&batches));
            match reading {
                Ok(_) => each
                    .take()
                    .map(|each| each(&mut events.into_iter().flatten())),
                Err(err) => {
                    tracing::debug!(%err, "cannot start a thread to read the log ahead; reading it inline");
                    None
                }
            }
        });
        match (ahead, each) {
            (Some(ahead), _) => ahead,
            (None, Some(each)) => each(self),
            (None, None) => unreachable!("`each` is taken only when it runs"),
        }
    }

    /// Reads the events in batches into `batches` until the end, an
    /// error, or the taker stopping; a panic is sent as an error, so the
    /// taker never mistakes it for the end of the log.
    fn send_ahead(
        &mut self,
        batches: &std::sync::mpsc::SyncSender<Vec<Result<Event, AgentError>>>,
    ) {
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
            let start = self.offset;
            let mut batch = Vec::with_capacity(Self::AHEAD_EVENTS);
            let mut end = false;
            while batch.len() < Self::AHEAD_EVENTS && self.offset - start < Self::AHEAD_BYTES {
                match self.next() {
                    Some(event) => {
                        end = event.is_err();
                        batch.push(event);
                        if end {
                            break;
                        }
                    }
                    None => {
                        end = true;
                        break;
                    }
                }
            }
            // The taker stopped, or every event was sent.
            if batches.send(batch).is_err() || end {
                return;
            }
        }));
        if read.is_err() {
            self.done = true;
            let _ = batches.send(vec![Err(AgentError::Internal(format!(
                "reading {} failed",
                self.path.display()
            )))]);
        }
    }
}

/// A log locked for writing whose events are being read.
pub struct OpenLog {
    /// Its events.
    pub reader: LogReader,
    file: File,
    dir: Touch,
}

impl OpenLog {
    /// Reads what is left, repairs a torn tail and returns the writer.
    ///
    /// # Errors
    /// A corrupt line, or the file cannot be repaired.
    pub fn finish(mut self) -> Result<LogWriter, AgentError> {
        while self.reader.next_event()?.is_some() {}
        let path = self.reader.path.clone();
        let write_error = |source| AgentError::LogWrite {
            path: path.display().to_string(),
            source,
        };
        let file = &mut self.file;
        let valid_len = self.reader.valid_len;
        let len = file.metadata().map_err(write_error)?.len();
        if valid_len < len {
            tracing::warn!(
                path = %path.display(),
                dropped = len - valid_len,
                "cutting a torn last line from the session log"
            );
            let cut = file.set_len(valid_len);
            self.dir.touch();
            cut.map_err(write_error)?;
        }
        if valid_len > 0 {
            file.seek(SeekFrom::Start(valid_len - 1))
                .map_err(write_error)?;
            let mut last = [0u8; 1];
            file.read_exact(&mut last).map_err(write_error)?;
            if last[0] != b'\n' {
                file.seek(SeekFrom::End(0)).map_err(write_error)?;
                let written = file.write_all(b"\n");
                self.dir.touch();
                written.map_err(write_error)?;
            }
        }
        let len = file.seek(SeekFrom::End(0)).map_err(write_error)?;
        Ok(LogWriter {
            file: self.file,
            dir: self.dir,
            path,
            next_seq: self.reader.parser.last_seq + 1,
            len,
        })
    }
}

/// Appends events to one log; holds the log's lock until dropped.
#[derive(Debug)]
pub struct LogWriter {
    file: File,
    dir: Touch,
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
        self.write_line(&line, event.seq)?;
        Ok(event)
    }

    /// Appends a line another log holds, as it is (`seq` is its seq): a
    /// fork's copy of its parent's events. The line ends with `\n`.
    ///
    /// # Errors
    /// As [`Self::append`].
    pub fn append_line(&mut self, line: &[u8], seq: u64) -> Result<(), AgentError> {
        self.write_line(line, seq)
    }

    fn write_line(&mut self, line: &[u8], seq: u64) -> Result<(), AgentError> {
        if let Err(source) = self.file.write_all(line) {
            let cut = self
                .file
                .set_len(self.len)
                .and_then(|()| self.file.seek(SeekFrom::Start(self.len)).map(|_| ()));
            self.dir.touch();
            if let Err(err) = cut {
                tracing::error!(path = %self.path.display(), %err, "cannot cut a partly written line from the session log");
            }
            return Err(AgentError::LogWrite {
                path: self.path.display().to_string(),
                source,
            });
        }
        self.dir.touch();
        self.len += line.len() as u64;
        self.next_seq = seq + 1;
        Ok(())
    }

    /// The log's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The seq of the last event appended (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Bytes written: the log's complete lines.
    pub fn written(&self) -> u64 {
        self.len
    }

    /// Flushes to stable storage (end of a turn, close).
    pub fn sync(&self) {
        if let Err(err) = self.file.sync_data() {
            tracing::warn!(path = %self.path.display(), %err, "cannot sync the session log");
        }
    }
}

#[cfg(test)]
mod tests;
