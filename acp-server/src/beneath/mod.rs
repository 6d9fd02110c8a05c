//! dsh's own file operations on the user's tree — the file tools' reads and
//! writes, checkpoint reads, `/undo`'s restores and deletes, instruction
//! files — through handles that cannot be redirected between the check and
//! the use.
//!
//! The permission policy decides on a *canonical* path (every symlink
//! already followed, see `tools::paths::resolve`). Every operation here
//! opens exactly that path refusing any link on the way: if a component
//! became a link since the check (a command or a background job swapped
//! `d` for a link to another directory), the operation is refused
//! ([`FsError::Symlink`]) instead of following it. Writes go to a
//! temporary file created exclusively in the target's directory, then
//! renamed over the target — a rename replaces a link rather than writing
//! through it, and a hard link to a file elsewhere is split instead of
//! written through. Deletes refuse a link rather than remove it.
//!
//! Files found *beneath* a root that may hold links inside it (instruction
//! files: `CLAUDE.md -> AGENTS.md` is common) are opened with
//! [`open_beneath`]: links resolve only while they stay below the root; an
//! absolute link, or one whose `..` climbs out, is [`FsError::Escapes`].
//!
//! Per platform (the one seam: `linux.rs`, `macos.rs`, `unix.rs`,
//! `windows.rs` here; callers see the same API everywhere):
//!
//! - **Linux**: the kernel resolves the whole path and refuses links
//!   (`openat2` with `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`;
//!   `RESOLVE_BENEATH` for [`open_beneath`]). Writes are `O_EXCL |
//!   O_NOFOLLOW` temporary files in a directory handle, `renameat` (and
//!   `RENAME_NOREPLACE`, or a hard link, for [`write_new`]); the file's
//!   mode, owner and group are kept. Deletes are `unlinkat` in the
//!   directory handle.
//! - **macOS** (and any Unix without `openat2`): the path is walked from
//!   `/` one component at a time, each opened `O_NOFOLLOW` (plus
//!   `O_NOFOLLOW_ANY`) in the handle of the one before, so a link is
//!   refused by the kernel at the component where it appears. Every
//!   directory on the way must be readable (there is no `O_PATH`): one
//!   that is only searchable fails with "permission denied" rather than
//!   being passed. [`metadata`] checks the entry in its directory handle,
//!   then takes the system's metadata by path and refuses it unless it is
//!   the same file (device and inode). [`open_beneath`] resolves relative
//!   links itself, one component at a time, at most 40 of them, refusing
//!   absolute links and climbs out of the root. Writes, modes, owners and
//!   `RENAME_NOREPLACE` (`renameatx_np(RENAME_EXCL)`) are as on Linux.
//! - **Windows**: every directory on the way is opened as itself
//!   (`FILE_FLAG_OPEN_REPARSE_POINT`: a junction or symbolic link is
//!   opened, not followed) and refused if it is a link — a reparse point
//!   whose tag is a name surrogate (symbolic links, junctions, mount
//!   points); OneDrive placeholders and other data reparse points are
//!   ordinary files and folders. Those handles list the directory (a
//!   handle that only reads attributes would not count: Windows ignores
//!   its share mode) and are held without `FILE_SHARE_DELETE` for the
//!   whole operation, so no directory on the way can be renamed, deleted
//!   or replaced by a junction until it is done; a file being read is
//!   pinned the same way between its check and its opening. Each such
//!   directory must be listable by dsh ("access denied" otherwise). The
//!   final rename or delete is by path below the held directories (std
//!   has no handle-relative one): a link put in the file's place after the
//!   check is replaced or deleted itself, never followed or written
//!   through. Writes create the temporary file with `CREATE_NEW` and
//!   rename it over the target (replacing, which splits hard links as on
//!   Unix); [`write_new`] hard-links it to the target (refused when the
//!   target exists), or on a file system without hard links creates the
//!   target exclusively first. Not kept on a rewrite: the file's own ACL
//!   (the new file inherits its directory's) and its attributes; a
//!   read-only file, or one another program holds open without sharing
//!   deletion, cannot be replaced at all ("access denied", "used by
//!   another process").
//!   [`open_beneath`] follows relative symbolic links as macOS does;
//!   junctions and absolute links are [`FsError::Escapes`]. Wine 8 makes
//!   no links at all, so only the link-free paths are tested there.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as resolve;
#[cfg(all(unix, not(target_os = "linux")))]
mod macos;
#[cfg(all(unix, not(target_os = "linux")))]
use macos as resolve;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

/// Why an operation was refused.
#[derive(Debug)]
pub enum FsError {
    /// A symbolic link is on the way (it was not there when the path was
    /// checked, or the path was never canonical).
    Symlink(PathBuf),
    /// The path leaves the root it must stay beneath.
    Escapes(PathBuf),
    /// Not a regular file: what it is.
    NotRegular(PathBuf, &'static str),
    /// Not an absolute path without `.` or `..`.
    NotCanonical(PathBuf),
    /// The operating system's error.
    Io(PathBuf, std::io::Error),
}

impl FsError {
    /// Whether the path (or a directory on it) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::Io(_, err) if err.kind() == std::io::ErrorKind::NotFound)
    }
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::Symlink(path) => write!(
                f,
                "{}: a symbolic link is on the way to it (dsh does not follow links it has not checked)",
                path.display()
            ),
            FsError::Escapes(path) => write!(f, "{}: it leads out of its root", path.display()),
            FsError::NotRegular(path, kind) => write!(
                f,
                "{} is {kind}; only regular files can be read or written.",
                path.display()
            ),
            FsError::NotCanonical(path) => {
                write!(f, "{}: not an absolute, resolved path", path.display())
            }
            FsError::Io(path, err) => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for FsError {}

impl From<FsError> for String {
    fn from(err: FsError) -> String {
        err.to_string()
    }
}

/// `path` without `.` and with each `..` taking the component before it:
/// the path as written, no link followed (the words of a command that has
/// not run, a path a person gave; links are the opening's business).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// An absolute path of plain names (a Windows drive or share prefix
/// included), or [`FsError::NotCanonical`].
fn canonical(path: &Path) -> Result<(), FsError> {
    let plain = path.is_absolute()
        && path.components().all(|c| {
            matches!(
                c,
                Component::Prefix(_) | Component::RootDir | Component::Normal(_)
            )
        });
    if plain {
        Ok(())
    } else {
        Err(FsError::NotCanonical(path.to_path_buf()))
    }
}

/// A canonical path's directory and name.
fn split(path: &Path) -> Result<(&Path, &OsStr), FsError> {
    canonical(path)?;
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(FsError::NotCanonical(path.to_path_buf())),
    }
}

fn exists(path: &Path) -> FsError {
    FsError::Io(
        path.to_path_buf(),
        std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it already exists"),
    )
}

/// The most links [`open_beneath`] follows where dsh resolves them itself
/// (Linux's limit).
#[cfg(not(target_os = "linux"))]
const MAX_LINKS: usize = 40;

/// One step of a path below the root, where dsh resolves links itself.
#[cfg(not(target_os = "linux"))]
enum Step {
    Up,
    Name(std::ffi::OsString),
}

/// `path`'s steps pushed so the first is popped first; `Err` for an
/// absolute path.
#[cfg(not(target_os = "linux"))]
fn push_steps(pending: &mut Vec<Step>, path: &Path) -> Result<(), ()> {
    let mut steps = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => steps.push(Step::Up),
            Component::Normal(name) => steps.push(Step::Name(name.to_os_string())),
            Component::RootDir | Component::Prefix(_) => return Err(()),
        }
    }
    pending.extend(steps.into_iter().rev());
    Ok(())
}

/// What a file type is, for refusals ("a named pipe (FIFO)", "a
/// directory", …).
pub fn kind_name(kind: std::fs::FileType) -> &'static str {
    imp::kind_name(kind)
}

/// Opens a regular file for reading: no link anywhere on the way, never
/// blocking on a FIFO in its place.
///
/// # Errors
/// See [`FsError`].
pub fn open_read(path: &Path) -> Result<File, FsError> {
    imp::open_read(path)
}

/// What is at a path, without following a link anywhere: `None` when
/// nothing is there.
///
/// # Errors
/// A link on the way, or the system's error.
pub fn metadata(path: &Path) -> Result<Option<std::fs::Metadata>, FsError> {
    imp::metadata(path)
}

/// Opens `relative` below the directory `root` for reading: links may
/// resolve only while they stay below `root`, the final file must be
/// regular. Returns the file and the path actually opened (for checks on
/// the real location, such as hidden paths).
///
/// # Errors
/// See [`FsError`]; a way out of `root` is [`FsError::Escapes`].
pub fn open_beneath(root: &Path, relative: &Path) -> Result<(File, PathBuf), FsError> {
    imp::open_beneath(root, relative)
}

/// Replaces (or creates) the regular file at `path` with `bytes`: a
/// temporary file in the same directory, then a rename. A link or
/// anything but a regular file at `path` is refused; missing directories
/// are created when `create_dirs` is set. On Unix an existing file keeps
/// its permission bits, and its owner and group where dsh may set them
/// (dsh run as root editing another user's file).
///
/// # Errors
/// See [`FsError`].
pub fn write(path: &Path, bytes: &[u8], create_dirs: bool) -> Result<(), FsError> {
    imp::write_with(path, bytes, create_dirs, true)
}

/// Creates the regular file at `path` with `bytes`, as [`write`] does, but
/// never replaces anything: a file (or anything else) that is there, or
/// that appears between the check and the rename, is refused with
/// [`std::io::ErrorKind::AlreadyExists`] (`RENAME_NOREPLACE`, or a hard
/// link where the file system lacks it).
///
/// # Errors
/// See [`FsError`].
pub fn write_new(path: &Path, bytes: &[u8], create_dirs: bool) -> Result<(), FsError> {
    imp::write_with(path, bytes, create_dirs, false)
}

/// Removes the regular file at `path`; nothing there is fine. A link
/// there (or on the way) is refused, never followed or removed.
///
/// # Errors
/// See [`FsError`].
pub fn remove(path: &Path) -> Result<(), FsError> {
    imp::remove(path)
}
