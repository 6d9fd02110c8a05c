//! macOS (and any Unix without `openat2`): the path is walked from `/`,
//! one component at a time, each opened `O_NOFOLLOW` in the handle of the
//! one before, so the kernel refuses a link where it appears.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;

use super::unix::{entry, error, regular};
use super::{canonical, push_steps, split, FsError, Step, MAX_LINKS};

/// A link is refused at the component opened (`O_NOFOLLOW`) and, where the
/// system has it, anywhere in the name given (`O_NOFOLLOW_ANY`, macOS 11).
#[cfg(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "tvos",
    target_os = "watchos",
    target_os = "visionos"
))]
const NO_LINKS: OFlags = OFlags::NOFOLLOW.union(OFlags::NOFOLLOW_ANY);
#[cfg(not(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "tvos",
    target_os = "watchos",
    target_os = "visionos"
)))]
const NO_LINKS: OFlags = OFlags::NOFOLLOW;

/// A directory on the way (read access: there is no `O_PATH` here).
const DIR: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY);

/// A file opened for reading: never blocking on a FIFO in its place.
const FILE: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::NOCTTY);

fn is_link(dir: &OwnedFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

/// `name` in `dir` opened with `flags`, never through a link.
fn open_in(dir: &OwnedFd, name: &OsStr, flags: OFlags) -> Result<OwnedFd, Errno> {
    match rustix::fs::openat(dir, name, flags | NO_LINKS | OFlags::CLOEXEC, Mode::empty()) {
        // `O_DIRECTORY` on a link may say `ENOTDIR` rather than `ELOOP`.
        Err(Errno::NOTDIR) if is_link(dir, name) => Err(Errno::LOOP),
        other => other,
    }
}

/// The directory `path` as a handle, walked from `/`; each missing
/// component created in the handle of the one above it when `create` is
/// set.
pub(super) fn open_dir(path: &Path, create: bool) -> Result<OwnedFd, FsError> {
    canonical(path)?;
    let root = Path::new("/");
    let mut dir = rustix::fs::openat(CWD, root, DIR | OFlags::CLOEXEC, Mode::empty())
        .map_err(|errno| error(root, errno))?;
    let mut so_far = root.to_path_buf();
    for component in path.components().skip(1) {
        let name = component.as_os_str();
        so_far.push(name);
        dir = match open_in(&dir, name, DIR) {
            Ok(next) => next,
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(errno) => return Err(error(&so_far, errno)),
                }
                open_in(&dir, name, DIR).map_err(|errno| error(&so_far, errno))?
            }
            Err(errno) => return Err(error(&so_far, errno)),
        };
    }
    Ok(dir)
}

/// `path` opened for reading, no link anywhere on the way, never blocking
/// on a FIFO in its place.
pub(super) fn open_file(path: &Path) -> Result<OwnedFd, FsError> {
    let (parent, name) = split(path)?;
    let dir = open_dir(parent, false)?;
    open_in(&dir, name, FILE).map_err(|errno| error(path, errno))
}

/// The entry is checked in its directory handle; the metadata is the
/// system's by path, kept only if it is the same file (device and inode),
/// so nothing is opened (no device wakes, no read permission is needed).
pub(super) fn metadata(path: &Path) -> Result<Option<std::fs::Metadata>, FsError> {
    use std::os::unix::fs::MetadataExt;
    canonical(path)?;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        // `/` itself: no link can be on the way.
        return std::fs::symlink_metadata(path)
            .map(Some)
            .map_err(|err| FsError::Io(path.to_path_buf(), err));
    };
    let dir = match open_dir(parent, false) {
        Ok(dir) => dir,
        Err(err) if err.is_not_found() => return Ok(None),
        Err(err) => return Err(err),
    };
    let Some(stat) = entry(&dir, name, path)? else {
        return Ok(None);
    };
    if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
        return Err(FsError::Symlink(path.to_path_buf()));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(FsError::Io(path.to_path_buf(), err)),
    };
    #[allow(clippy::unnecessary_cast, clippy::cast_sign_loss)]
    let same = meta.dev() == stat.st_dev as u64 && meta.ino() == stat.st_ino as u64;
    if !same {
        // Something on the way changed between the walk and the look.
        return Err(FsError::Symlink(path.to_path_buf()));
    }
    Ok(Some(meta))
}

/// Walks `relative` from the handle of `root`, following a link only when
/// its target is relative and stays below `root` (at most [`MAX_LINKS`]);
/// an absolute link or a `..` above `root` is [`FsError::Escapes`].
pub(super) fn open_beneath(root: &Path, relative: &Path) -> Result<(File, PathBuf), FsError> {
    let full = root.join(relative);
    let mut pending = Vec::new();
    if push_steps(&mut pending, relative).is_err() {
        return Err(FsError::Escapes(full));
    }
    let mut dirs = vec![open_dir(root, false)?];
    let mut real = root.to_path_buf();
    let mut links = 0;
    while let Some(step) = pending.pop() {
        let name = match step {
            Step::Up if dirs.len() > 1 => {
                dirs.pop();
                real.pop();
                continue;
            }
            Step::Up => return Err(FsError::Escapes(full)),
            Step::Name(name) => name,
        };
        let last = pending.is_empty();
        let dir = dirs.last().expect("the root's handle stays");
        let here = real.join(&name);
        match open_in(dir, &name, if last { FILE } else { DIR }) {
            Ok(fd) if last => return Ok((regular(&here, fd)?, here)),
            Ok(fd) => {
                dirs.push(fd);
                real = here;
            }
            Err(Errno::LOOP) => {
                let target = rustix::fs::readlinkat(dir, &name, Vec::new())
                    .map_err(|errno| error(&here, errno))?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(FsError::Symlink(full));
                }
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if push_steps(&mut pending, &target).is_err() {
                    return Err(FsError::Escapes(full));
                }
            }
            Err(errno) => return Err(error(&here, errno)),
        }
    }
    // The walk ended on a directory (`relative` empty or ending in `..`).
    Err(FsError::NotRegular(real, "a directory"))
}
