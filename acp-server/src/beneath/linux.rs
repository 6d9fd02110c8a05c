//! Linux: the kernel refuses the links (`openat2` with
//! `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, and `RESOLVE_BENEATH`
//! for [`open_beneath`]).

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

use super::unix::{error, regular};
use super::{canonical, FsError};

const NO_LINKS: ResolveFlags = ResolveFlags::NO_SYMLINKS.union(ResolveFlags::NO_MAGICLINKS);

fn open_with(path: &Path, flags: OFlags, resolve: ResolveFlags) -> Result<OwnedFd, FsError> {
    canonical(path)?;
    // openat2 refuses flags that mean nothing with O_PATH (EINVAL).
    let extra = if flags.contains(OFlags::PATH) {
        OFlags::CLOEXEC
    } else {
        OFlags::CLOEXEC | OFlags::NOCTTY
    };
    rustix::fs::openat2(CWD, path, flags | extra, Mode::empty(), resolve)
        .map_err(|errno| error(path, errno))
}

/// `path` opened for reading, no link anywhere on the way, never blocking
/// on a FIFO in its place.
pub(super) fn open_file(path: &Path) -> Result<OwnedFd, FsError> {
    open_with(path, OFlags::RDONLY | OFlags::NONBLOCK, NO_LINKS)
}

pub(super) fn metadata(path: &Path) -> Result<Option<std::fs::Metadata>, FsError> {
    match open_with(path, OFlags::PATH, NO_LINKS) {
        Ok(fd) => File::from(fd)
            .metadata()
            .map(Some)
            .map_err(|err| FsError::Io(path.to_path_buf(), err)),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(err),
    }
}

pub(super) fn open_beneath(root: &Path, relative: &Path) -> Result<(File, PathBuf), FsError> {
    let full = root.join(relative);
    if relative.is_absolute() {
        return Err(FsError::Escapes(full));
    }
    let dir = open_with(root, OFlags::PATH | OFlags::DIRECTORY, NO_LINKS)?;
    let fd = rustix::fs::openat2(
        &dir,
        relative,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|errno| error(&full, errno))?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd_number(&fd)))
        .map_err(|err| FsError::Io(full.clone(), err))?;
    Ok((regular(&full, fd)?, real))
}

fn fd_number(fd: &OwnedFd) -> i32 {
    use std::os::fd::AsRawFd;
    fd.as_raw_fd()
}

/// The directory `path` as a handle, created (each missing component in
/// the handle of the one above it) when `create` is set.
pub(super) fn open_dir(path: &Path, create: bool) -> Result<OwnedFd, FsError> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    match open_with(path, flags, NO_LINKS) {
        Err(err) if create && err.is_not_found() => {}
        other => return other,
    }
    let mut dir = open_with(Path::new("/"), flags, NO_LINKS)?;
    let mut so_far = PathBuf::from("/");
    for component in path.components().skip(1) {
        let name = component.as_os_str();
        so_far.push(name);
        let open = |dir: &OwnedFd| {
            rustix::fs::openat2(
                dir,
                name,
                flags | OFlags::CLOEXEC,
                Mode::empty(),
                NO_LINKS | ResolveFlags::BENEATH,
            )
        };
        dir = match open(&dir) {
            Ok(next) => next,
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(errno) => return Err(error(&so_far, errno)),
                }
                open(&dir).map_err(|errno| error(&so_far, errno))?
            }
            Err(errno) => return Err(error(&so_far, errno)),
        };
    }
    Ok(dir)
}
