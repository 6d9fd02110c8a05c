//! The sessions directory as the index reads it and the log writers touch
//! it: the one place its platform differences live.
//!
//! Unix works in it by handle: its entries are listed, `stat`ed and
//! opened relative to the open directory, and its inode and change time
//! are the stamp that lets the index trust itself while nothing changed
//! ([`super::index`]); the writers touch it so that a write changes that
//! time.
//!
//! Windows works in it by path. std gives no change time there, so no
//! stamp is taken and the index never trusts itself: every listing reads
//! the directory and the metadata of every log, and reads again the logs
//! whose size or time changed (slower, never stale); the writers need not
//! touch it.

use std::ffi::{CStr, CString};
use std::path::Path;

pub(super) use imp::{open, open_log, regular, remove, stamp, stat, Dir, Touch};

/// What the directory says an entry is, before it is `stat`ed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Regular,
    /// The directory does not say.
    Unknown,
    Other,
}

/// A file's size and modification time (ns since the epoch); `None` when
/// it is gone or not a regular file.
pub(super) type Stat = std::io::Result<Option<(u64, u128)>>;

/// A file time (modification, change) in nanoseconds since the epoch;
/// before 1970 counts as 1970, as it did through `SystemTime`.
#[cfg(unix)]
fn epoch_ns(secs: i64, nanos: u32) -> u128 {
    u128::try_from(secs).map_or(0, |secs| secs * 1_000_000_000 + u128::from(nanos))
}

/// The names of the logs (`*.jsonl`) in the directory, with their kind
/// as the directory knows it; and whether the whole directory was read.
pub(super) fn log_names(dir: &Dir) -> (Vec<(CString, Kind)>, bool) {
    imp::log_names(dir)
}

/// Whether `err` (of [`open_log`]) says the log is not there to read:
/// gone since the directory was read, or a link.
pub(super) fn is_gone(err: &std::io::Error) -> bool {
    imp::is_gone(err)
}

#[cfg(unix)]
mod imp {
    use super::{epoch_ns, CStr, CString, Kind, Path, Stat};
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use rustix::io::Errno;
    use std::path::PathBuf;

    pub type Dir = std::os::fd::OwnedFd;

    /// Opens a directory to work in by handle (the listing's reads, a
    /// writer's touches).
    pub fn open(dir: &Path) -> rustix::io::Result<Dir> {
        rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    }

    /// Removes the file `name` in `dir`, if it can.
    pub fn remove(dir: &Dir, name: &str) {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }

    /// The directory's inode and change time (ns).
    pub fn stamp(dir: &Dir) -> Option<(u64, u128)> {
        let stat = rustix::fs::fstat(dir).ok()?;
        let ctime_ns = epoch_ns(stat.st_ctime, u32::try_from(stat.st_ctime_nsec).ok()?);
        Some((stat.st_ino, ctime_ns))
    }

    pub fn log_names(dir: &Dir) -> (Vec<(CString, Kind)>, bool) {
        let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
            return (Vec::new(), false);
        };
        let mut complete = true;
        let names = listing
            .filter_map(|entry| {
                complete &= entry.is_ok();
                entry.ok()
            })
            .filter(|entry| entry.file_name().to_bytes().ends_with(b".jsonl"))
            .map(|entry| {
                let kind = match entry.file_type() {
                    FileType::RegularFile => Kind::Regular,
                    FileType::Unknown => Kind::Unknown,
                    _ => Kind::Other,
                };
                (entry.file_name().to_owned(), kind)
            })
            .collect();
        (names, complete)
    }

    /// `name` in `dir`, not followed if a link.
    pub fn stat(dir: &Dir, name: &CStr) -> Stat {
        #[cfg(target_os = "linux")]
        let (mode, len, mtime_ns) = {
            use rustix::fs::StatxFlags;
            let stat = match rustix::fs::statx(
                dir,
                name,
                AtFlags::SYMLINK_NOFOLLOW,
                StatxFlags::TYPE | StatxFlags::SIZE | StatxFlags::MTIME,
            ) {
                Ok(stat) => stat,
                Err(Errno::NOENT) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
            let mtime_ns = epoch_ns(stat.stx_mtime.tv_sec, stat.stx_mtime.tv_nsec);
            let mode = rustix::fs::RawMode::from(stat.stx_mode);
            (mode, stat.stx_size, mtime_ns)
        };
        #[cfg(not(target_os = "linux"))]
        let (mode, len, mtime_ns) = {
            let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(Errno::NOENT) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
            let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
            let len = u64::try_from(stat.st_size).unwrap_or(0);
            (stat.st_mode, len, epoch_ns(stat.st_mtime, nanos))
        };
        // Only regular files are logs: a FIFO or a link named `*.jsonl` in
        // the sessions directory would block or lead elsewhere.
        if FileType::from_raw_mode(mode) != FileType::RegularFile {
            return Ok(None);
        }
        Ok(Some((len, mtime_ns)))
    }

    /// Opens a log to read it. Never follows a link, never blocks and
    /// never takes a terminal (something other than a regular file
    /// swapped in after the directory was read); [`regular`] checks the
    /// open file is a regular file.
    pub fn open_log(dir: &Dir, name: &CStr) -> std::io::Result<std::fs::File> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        Ok(std::fs::File::from(fd))
    }

    pub fn is_gone(err: &std::io::Error) -> bool {
        matches!(Errno::from_io_error(err), Some(Errno::NOENT | Errno::LOOP))
    }

    /// An open log's size and mtime, when it is a regular file.
    pub fn regular(file: &std::fs::File) -> Option<(u64, u128)> {
        let stat = rustix::fs::fstat(file).ok()?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return None;
        }
        let len = u64::try_from(stat.st_size).unwrap_or(0);
        let mtime_ns = epoch_ns(
            stat.st_mtime,
            u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
        );
        Some((len, mtime_ns))
    }

    /// The sessions directory as a log writer holds it: touched after its
    /// writes, so that its change time tells a listing a log was written
    /// (the index trusts itself while that time stays as it was, and only
    /// once it is two seconds old). A write less than a second after this
    /// writer's last touch needs none: the directory's change time is then
    /// at most a second old, newer than any stamp a listing could have
    /// trusted before the write (a crash between a write and its touch
    /// leaves that one write unseen until the directory next changes).
    #[derive(Debug)]
    pub struct Touch {
        dir: PathBuf,
        /// Opened once; by path when it could not be.
        fd: Option<Dir>,
        last: Option<std::time::Instant>,
    }

    impl Touch {
        /// Touches needed at most this often (see above).
        const EVERY: std::time::Duration = std::time::Duration::from_secs(1);

        pub fn open(dir: &Path) -> Touch {
            Touch {
                dir: dir.to_owned(),
                fd: open(dir).ok(),
                last: None,
            }
        }

        /// Sets the directory's times to now (which sets its change time):
        /// both to now, which the directory's write permission allows.
        pub fn touch(&mut self) {
            if self.last.is_some_and(|last| last.elapsed() < Self::EVERY) {
                return;
            }
            let now = rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            };
            let times = rustix::fs::Timestamps {
                last_access: now,
                last_modification: now,
            };
            let touched = match &self.fd {
                Some(fd) => rustix::fs::futimens(fd, &times),
                None => rustix::fs::utimensat(
                    rustix::fs::CWD,
                    &self.dir,
                    &times,
                    rustix::fs::AtFlags::empty(),
                ),
            };
            match touched {
                Ok(()) => self.last = Some(std::time::Instant::now()),
                Err(err) => {
                    tracing::warn!(dir = %self.dir.display(), %err, "cannot touch the sessions directory: listings may not see a log's writes");
                }
            }
        }
    }
}

#[cfg(windows)]
mod imp {
    use super::{CStr, CString, Kind, Path, Stat};
    use std::path::PathBuf;
    use std::time::UNIX_EPOCH;

    /// The directory's path (Windows works by path: see the module docs).
    pub type Dir = PathBuf;

    pub fn open(dir: &Path) -> std::io::Result<Dir> {
        let meta = std::fs::metadata(dir)?;
        if !meta.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        Ok(dir.to_path_buf())
    }

    pub fn remove(dir: &Dir, name: &str) {
        let _ = std::fs::remove_file(dir.join(name));
    }

    /// None: std has no change time on Windows (see the module docs).
    pub fn stamp(_dir: &Dir) -> Option<(u64, u128)> {
        None
    }

    pub fn log_names(dir: &Dir) -> (Vec<(CString, Kind)>, bool) {
        let Ok(listing) = std::fs::read_dir(dir) else {
            return (Vec::new(), false);
        };
        let mut complete = true;
        let names = listing
            .filter_map(|entry| {
                complete &= entry.is_ok();
                entry.ok()
            })
            .filter_map(|entry| {
                // A name that is not UTF-8 is no log (as on unix, where
                // it is skipped when `stat`ed).
                let name = CString::new(entry.file_name().to_str()?).ok()?;
                if !name.to_bytes().ends_with(b".jsonl") {
                    return None;
                }
                let kind = match entry.file_type() {
                    Ok(kind) if kind.is_file() => Kind::Regular,
                    Ok(_) => Kind::Other,
                    Err(_) => Kind::Unknown,
                };
                Some((name, kind))
            })
            .collect();
        (names, complete)
    }

    fn path_of(dir: &Dir, name: &CStr) -> std::io::Result<PathBuf> {
        let name = name
            .to_str()
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        Ok(dir.join(name))
    }

    fn times(meta: &std::fs::Metadata) -> (u64, u128) {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |at| at.as_nanos());
        (meta.len(), mtime_ns)
    }

    /// `name` in `dir`, not followed if a link (std's `is_file` is false
    /// for a link or junction).
    pub fn stat(dir: &Dir, name: &CStr) -> Stat {
        match std::fs::symlink_metadata(path_of(dir, name)?) {
            Ok(meta) if meta.is_file() => Ok(Some(times(&meta))),
            Ok(_) => Ok(None),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Opens a log to read it, never through a link
    /// ([`crate::private::open_no_follow`]).
    pub fn open_log(dir: &Dir, name: &CStr) -> std::io::Result<std::fs::File> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        crate::private::open_no_follow(&options, &path_of(dir, name)?)
    }

    pub fn is_gone(err: &std::io::Error) -> bool {
        err.kind() == std::io::ErrorKind::NotFound
    }

    pub fn regular(file: &std::fs::File) -> Option<(u64, u128)> {
        let meta = file.metadata().ok()?;
        meta.is_file().then(|| times(&meta))
    }

    /// Nothing to touch: the index takes no stamp on Windows.
    #[derive(Debug)]
    pub struct Touch;

    impl Touch {
        pub fn open(_dir: &Path) -> Touch {
            Touch
        }

        pub fn touch(&mut self) {}
    }
}
