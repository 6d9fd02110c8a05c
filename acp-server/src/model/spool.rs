//! A session's spool: a file of its messages as the provider reads them,
//! from which each request's body is sent. A message is written to it
//! once, the first time a request carries it (the place is kept with the
//! message, [`Message::place`]); a request then holds ranges of the file,
//! not the conversation. Twenty sessions sending at once hold page cache,
//! not twenty conversations on the heap, and the budget of histories in
//! memory binds while they send (a history a request carries can leave
//! memory: the request reads the file). Writing a message once also spares
//! each request serializing the whole conversation again.
//!
//! The file has no name (`O_TMPFILE | O_EXCL`: it can never be given one;
//! where the filesystem has no `O_TMPFILE`, created under a random name
//! and unlinked at once; on Windows a hidden random name no one else can
//! open, deleted when closed: [`crate::private::nameless_in`]) and is
//! 0600, in the directory of session logs:
//! like the log it holds code and prompts; it is gone when the last
//! request and the session let it go (a session lets it go with its
//! history: a history folded again is new messages, written anew). It
//! only grows: a spool mostly of messages no request carries any longer
//! (after a compaction) is retired, and the next request starts a new one.
//!
//! Its writes are made on a blocking thread (a write may wait for the disk
//! when dirty pages are throttled); its reads, of what was written moments
//! before, are copies from the page cache, made as the request is sent.
//!
//! [`Message::place`]: dsh_protocol::model::Message::place

use std::fs::File;
use std::io;
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Spools are numbered from 1 in the process: a message's key names its
/// spool.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Past this much written, a spool whose garbage outweighs what the last
/// request read of it is retired.
const SLACK: u64 = 1 << 20;

/// One spool file.
#[derive(Debug)]
pub struct Spool {
    id: u64,
    file: File,
    /// Bytes written (appends are serialized by it).
    end: Mutex<u64>,
    retired: AtomicBool,
}

impl Spool {
    /// A new, empty spool in `dir`.
    ///
    /// # Errors
    /// The file cannot be created there.
    pub fn new_in(dir: &Path) -> io::Result<Spool> {
        Ok(Spool {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            file: crate::private::nameless_in(dir)?,
            end: Mutex::new(0),
            retired: AtomicBool::new(false),
        })
    }

    /// Its number (never 0).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Appends `bytes`; returns their offset.
    ///
    /// # Errors
    /// The write fails (a full disk); nothing is counted as written.
    pub fn append(&self, bytes: &[u8]) -> io::Result<u64> {
        let mut end = self
            .end
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let offset = *end;
        self.file.write_all_at(bytes, offset)?;
        *end += bytes.len() as u64;
        Ok(offset)
    }

    /// Fills `buf` from `offset`.
    ///
    /// # Errors
    /// The read fails or the file is shorter.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// Bytes written.
    pub fn len(&self) -> u64 {
        *self
            .end
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A request read `live` bytes of it: when the rest (garbage, for the
    /// most part) outweighs them, it is retired.
    pub fn read_live(&self, live: u64) {
        if self.len() > live.saturating_mul(2).saturating_add(SLACK) {
            self.retired.store(true, Ordering::Relaxed);
        }
    }

    /// Empties the file (a test's broken disk).
    #[cfg(test)]
    pub(crate) fn cut_short(&self) {
        self.file.set_len(0).unwrap();
    }

    /// Whether its session should start a new one.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }
}

/// A session's spool, made when a request first needs it — on the
/// blocking thread that writes the request, not the turn's — and again
/// once it was retired or let go with the history.
#[derive(Debug)]
pub struct SpoolSlot {
    /// Where its spools are made (the directory of logs).
    dir: PathBuf,
    current: Mutex<Option<Arc<Spool>>>,
}

impl SpoolSlot {
    /// A slot whose spools are made in `dir`.
    pub fn new(dir: PathBuf) -> SpoolSlot {
        SpoolSlot {
            dir,
            current: Mutex::new(None),
        }
    }

    /// The spool to write the next request to: the current one, or a new
    /// one (blocking: it may make the file). In the temp directory when
    /// none can be made beside the logs (said once).
    ///
    /// # Errors
    /// Neither directory can take one.
    pub fn get(&self) -> io::Result<Arc<Spool>> {
        let mut current = self.locked();
        if let Some(spool) = current.as_ref().filter(|spool| !spool.is_retired()) {
            return Ok(spool.clone());
        }
        let made = Spool::new_in(&self.dir).or_else(|err| {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(dir = %self.dir.display(), "cannot make a spool for the model requests beside the logs ({err}); using the temp directory");
            });
            Spool::new_in(&std::env::temp_dir())
        })?;
        let made = Arc::new(made);
        *current = Some(made.clone());
        Ok(made)
    }

    /// The spool the last request was written to, if it is still held.
    pub fn current(&self) -> Option<Arc<Spool>> {
        self.locked().clone()
    }

    /// Lets the spool go (with the history): the next request makes a
    /// new one; a request that holds this one keeps it until it is sent.
    pub fn clear(&self) {
        *self.locked() = None;
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, Option<Arc<Spool>>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Windows' std has only the one-call positional `seek_read` and
/// `seek_write` (each may do less than asked): the whole-buffer ones unix
/// has, made of them.
#[cfg(windows)]
trait FileExt {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

#[cfg(windows)]
impl FileExt for File {
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        use std::os::windows::fs::FileExt as _;
        while !buf.is_empty() {
            match self.seek_write(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        use std::os::windows::fs::FileExt as _;
        while !buf.is_empty() {
            match self.seek_read(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spool_has_no_name_reads_back_its_appends_and_is_retired_when_wasteful() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new_in(dir.path()).unwrap();
        let other = Spool::new_in(dir.path()).unwrap();
        assert_ne!(spool.id(), other.id());
        assert!(spool.is_empty());
        // Nameless: nothing is left in the directory; only its owner may
        // read it (whatever the umask). Windows names it until it is
        // closed.
        if cfg!(unix) {
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
            let mode = crate::private::mode_of(&spool.file.metadata().unwrap());
            assert_eq!(mode, Some(0o600), "{mode:?}");
        }
        assert_eq!(spool.append(b"hello").unwrap(), 0);
        assert_eq!(spool.append(b", world").unwrap(), 5);
        let mut buf = [0; 5];
        spool.read_at(&mut buf, 7).unwrap();
        assert_eq!(&buf, b"world");
        assert!(spool.read_at(&mut buf, 10).is_err());
        spool.read_live(0);
        assert!(!spool.is_retired());
        spool.append(&vec![b' '; SLACK as usize]).unwrap();
        spool.read_live(SLACK / 2);
        assert!(!spool.is_retired());
        spool.read_live(5);
        assert!(spool.is_retired());
    }
}
