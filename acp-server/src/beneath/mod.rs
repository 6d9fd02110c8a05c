//! dsh's own file operations on the user's tree — the file tools' reads and
//! writes, checkpoint reads, `/undo`'s restores and deletes, instruction
//! files — through handles that cannot be redirected between the check and
//! the use.
//!
//! The permission policy decides on a *canonical* path (every symlink
//! already followed, see `tools::paths::resolve`). Every operation here
//! opens exactly that path with `openat2(RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`: if any component became a symlink since the
//! check (a command or a background job swapped `d` for a link to another
//! directory), the kernel refuses it ([`FsError::Symlink`]) instead of
//! following it. Writes go to a temporary file created (`O_EXCL`,
//! `O_NOFOLLOW`) in the target's directory, opened once as a handle, then
//! renamed over the target inside that same directory handle — a rename
//! replaces a link rather than writing through it, and a hard link to a
//! file elsewhere is split instead of written through. Deletes are
//! `unlinkat` in the directory handle, refusing a link.
//!
//! Files found *beneath* a root that may hold links inside it (instruction
//! files: `CLAUDE.md -> AGENTS.md` is common) are opened with
//! [`open_beneath`]: `RESOLVE_BENEATH` lets links resolve only while they
//! stay below the root.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

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

fn error(path: &Path, errno: Errno) -> FsError {
    match errno {
        Errno::LOOP => FsError::Symlink(path.to_path_buf()),
        Errno::XDEV => FsError::Escapes(path.to_path_buf()),
        errno => FsError::Io(path.to_path_buf(), errno.into()),
    }
}

const NO_LINKS: ResolveFlags = ResolveFlags::NO_SYMLINKS.union(ResolveFlags::NO_MAGICLINKS);

fn canonical(path: &Path) -> Result<(), FsError> {
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if plain {
        Ok(())
    } else {
        Err(FsError::NotCanonical(path.to_path_buf()))
    }
}

/// What a file type is, for refusals.
pub fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "a named pipe (FIFO)",
        FileType::Socket => "a socket",
        FileType::BlockDevice | FileType::CharacterDevice => "a device",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

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

/// Opens a regular file for reading: no link anywhere on the way, never
/// blocking on a FIFO in its place.
///
/// # Errors
/// See [`FsError`].
pub fn open_read(path: &Path) -> Result<File, FsError> {
    let fd = open_with(path, OFlags::RDONLY | OFlags::NONBLOCK, NO_LINKS)?;
    regular(path, fd)
}

fn regular(path: &Path, fd: OwnedFd) -> Result<File, FsError> {
    let stat = rustix::fs::fstat(&fd).map_err(|errno| error(path, errno))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(FsError::NotRegular(path.to_path_buf(), kind_name(kind)));
    }
    Ok(File::from(fd))
}

/// What is at a path, without following a link anywhere: `None` when
/// nothing is there.
///
/// # Errors
/// A link on the way, or the system's error.
pub fn metadata(path: &Path) -> Result<Option<std::fs::Metadata>, FsError> {
    match open_with(path, OFlags::PATH, NO_LINKS) {
        Ok(fd) => File::from(fd)
            .metadata()
            .map(Some)
            .map_err(|err| FsError::Io(path.to_path_buf(), err)),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(err),
    }
}

/// Opens `relative` below the directory `root` for reading: links may
/// resolve only while they stay below `root`, the final file must be
/// regular. Returns the file and the path the kernel actually opened
/// (for checks on the real location, such as hidden paths).
///
/// # Errors
/// See [`FsError`]; a way out of `root` is [`FsError::Escapes`].
pub fn open_beneath(root: &Path, relative: &Path) -> Result<(File, PathBuf), FsError> {
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
fn open_dir(path: &Path, create: bool) -> Result<OwnedFd, FsError> {
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

fn split(path: &Path) -> Result<(&Path, &OsStr), FsError> {
    canonical(path)?;
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(FsError::NotCanonical(path.to_path_buf())),
    }
}

/// The entry `name` in `dir`, not followed: `None` when missing.
fn entry(dir: &OwnedFd, name: &OsStr, path: &Path) -> Result<Option<rustix::fs::Stat>, FsError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(error(path, errno)),
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces (or creates) the regular file at `path` with `bytes`: a
/// temporary file in the same directory handle, then a rename. A link or
/// anything but a regular file at `path` is refused; missing directories
/// are created when `create_dirs` is set. An existing file keeps its
/// permission bits, and its owner and group where dsh may set them (dsh
/// run as root editing another user's file).
///
/// # Errors
/// See [`FsError`].
pub fn write(path: &Path, bytes: &[u8], create_dirs: bool) -> Result<(), FsError> {
    write_with(path, bytes, create_dirs, true)
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
    write_with(path, bytes, create_dirs, false)
}

fn exists(path: &Path) -> FsError {
    FsError::Io(
        path.to_path_buf(),
        std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it already exists"),
    )
}

/// Moves `temp` to `name` in `dir` unless `name` exists (`EEXIST`).
fn rename_new(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    use rustix::fs::RenameFlags;
    match rustix::fs::renameat_with(dir, temp, dir, name, RenameFlags::NOREPLACE) {
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => link_new(dir, temp, name),
        other => other,
    }
}

/// The fallback of [`rename_new`]: a hard link (refused when `name`
/// exists), then the temporary name removed (a temporary name that stays
/// is no failure: the file is written). On a file system without hard
/// links: `name` created exclusively (refused when it exists), then the
/// temporary file renamed over that empty file of ours.
fn link_new(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    match rustix::fs::linkat(dir, temp, dir, name, AtFlags::empty()) {
        Ok(()) => {
            let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
            Ok(())
        }
        Err(Errno::PERM | Errno::OPNOTSUPP | Errno::NOSYS | Errno::MLINK) => {
            claim_new(dir, temp, name)
        }
        Err(errno) => Err(errno),
    }
}

/// `name` created exclusively (`EEXIST` when it exists), then `temp`
/// renamed over that empty file of ours.
fn claim_new(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    drop(rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?);
    rustix::fs::renameat(dir, temp, dir, name)
}

fn write_with(path: &Path, bytes: &[u8], create_dirs: bool, replace: bool) -> Result<(), FsError> {
    use std::io::Write as _;
    let (parent, name) = split(path)?;
    let dir = open_dir(parent, create_dirs)?;
    let keep = match entry(&dir, name, path)? {
        None => None,
        Some(_) if !replace => return Err(exists(path)),
        Some(stat) => {
            let kind = FileType::from_raw_mode(stat.st_mode);
            match kind {
                FileType::RegularFile => Some(stat),
                FileType::Symlink => return Err(FsError::Symlink(path.to_path_buf())),
                kind => return Err(FsError::NotRegular(path.to_path_buf(), kind_name(kind))),
            }
        }
    };
    let mut temp_name = b".".to_vec();
    temp_name.extend_from_slice(name.as_bytes());
    temp_name.extend_from_slice(
        format!(
            ".dsh-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        )
        .as_bytes(),
    );
    let temp_name = OsStr::from_bytes(&temp_name);
    let fd = rustix::fs::openat(
        &dir,
        temp_name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )
    .map_err(|errno| error(path, errno))?;
    let written = (|| -> std::io::Result<()> {
        if let Some(stat) = &keep {
            // The owner first: a chown clears the setuid and setgid bits.
            let (uid, gid) = (
                rustix::fs::Uid::from_raw(stat.st_uid),
                rustix::fs::Gid::from_raw(stat.st_gid),
            );
            if rustix::fs::fstat(&fd)
                .is_ok_and(|now| now.st_uid != stat.st_uid || now.st_gid != stat.st_gid)
            {
                // Only root (or the owner, for a group it is in) may; a
                // file that keeps dsh's owner is still written.
                let _ = rustix::fs::fchown(&fd, Some(uid), Some(gid));
            }
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(stat.st_mode & 0o7777))?;
        }
        File::from(fd).write_all(bytes)?;
        if replace {
            Ok(rustix::fs::renameat(&dir, temp_name, &dir, name)?)
        } else {
            Ok(rename_new(&dir, temp_name, name)?)
        }
    })();
    if let Err(err) = written {
        let _ = rustix::fs::unlinkat(&dir, temp_name, AtFlags::empty());
        if err.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(exists(path));
        }
        return Err(FsError::Io(path.to_path_buf(), err));
    }
    Ok(())
}

/// Removes the regular file at `path`; nothing there is fine. A link
/// there (or on the way) is refused, never followed or removed.
///
/// # Errors
/// See [`FsError`].
pub fn remove(path: &Path) -> Result<(), FsError> {
    let (parent, name) = split(path)?;
    let dir = match open_dir(parent, false) {
        Ok(dir) => dir,
        Err(err) if err.is_not_found() => return Ok(()),
        Err(err) => return Err(err),
    };
    match entry(&dir, name, path)? {
        None => Ok(()),
        Some(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => rustix::fs::unlinkat(&dir, name, AtFlags::empty())
                .map_err(|errno| error(path, errno)),
            FileType::Symlink => Err(FsError::Symlink(path.to_path_buf())),
            kind => Err(FsError::NotRegular(path.to_path_buf(), kind_name(kind))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn tree() -> (tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf) {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = work.path().canonicalize().unwrap();
        let far = outside.path().canonicalize().unwrap();
        (work, root, outside, far)
    }

    #[test]
    fn a_link_anywhere_on_the_way_is_refused_not_followed() {
        let (_w, root, _o, far) = tree();
        std::fs::write(far.join("secret"), "far away").unwrap();
        // A directory swapped for a link to another one.
        symlink(&far, root.join("d")).unwrap();
        let target = root.join("d/secret");
        assert!(matches!(open_read(&target), Err(FsError::Symlink(_))));
        assert!(matches!(metadata(&target), Err(FsError::Symlink(_))));
        assert!(matches!(
            write(&root.join("d/new"), b"x", true),
            Err(FsError::Symlink(_))
        ));
        assert!(!far.join("new").exists());
        assert!(matches!(remove(&target), Err(FsError::Symlink(_))));
        assert!(far.join("secret").exists());
        // A file swapped for a link.
        symlink(far.join("secret"), root.join("notes.txt")).unwrap();
        let notes = root.join("notes.txt");
        assert!(matches!(open_read(&notes), Err(FsError::Symlink(_))));
        assert!(matches!(
            write(&notes, b"workspace text", false),
            Err(FsError::Symlink(_))
        ));
        assert!(matches!(remove(&notes), Err(FsError::Symlink(_))));
        assert_eq!(
            std::fs::read_to_string(far.join("secret")).unwrap(),
            "far away"
        );
        // A dangling link to a file that does not exist yet.
        symlink(far.join("authorized_keys"), root.join("keys")).unwrap();
        assert!(write(&root.join("keys"), b"ssh-ed25519 AAAA", true).is_err());
        assert!(!far.join("authorized_keys").exists());
    }

    #[test]
    fn writes_replace_the_file_keep_its_mode_and_split_hard_links() {
        let (_w, root, _o, far) = tree();
        let path = root.join("a/b/c.txt");
        write(&path, b"one", true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        write(&path, b"two", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o751
        );
        std::fs::write(far.join("shared"), "outside").unwrap();
        std::fs::hard_link(far.join("shared"), root.join("linked")).unwrap();
        write(&root.join("linked"), b"inside", false).unwrap();
        assert_eq!(
            std::fs::read_to_string(far.join("shared")).unwrap(),
            "outside"
        );
        let leftovers: Vec<_> = std::fs::read_dir(root.join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["c.txt"], "no temporary file left");
        assert!(write(&root.join("a"), b"x", false).is_err(), "a directory");
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert!(!path.exists());
    }

    /// A file that appears between `create`'s check and its write is kept,
    /// not replaced: the rename itself refuses to replace it, as does the
    /// hard-link fallback.
    #[test]
    fn without_hard_links_a_new_file_is_claimed_exclusively() {
        let dir = tempfile::tempdir().unwrap();
        let fd = rustix::fs::open(
            dir.path(),
            OFlags::DIRECTORY | OFlags::RDONLY,
            Mode::empty(),
        )
        .unwrap();
        std::fs::write(dir.path().join(".t1"), "new").unwrap();
        claim_new(&fd, OsStr::new(".t1"), OsStr::new("a")).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a")).unwrap(),
            "new"
        );
        assert!(!dir.path().join(".t1").exists());
        std::fs::write(dir.path().join(".t2"), "other").unwrap();
        assert_eq!(
            claim_new(&fd, OsStr::new(".t2"), OsStr::new("a")),
            Err(Errno::EXIST)
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a")).unwrap(),
            "new"
        );
    }

    #[test]
    fn writes_of_new_files_never_replace_one_that_appeared() {
        let (_w, root, _o, _far) = tree();
        let path = root.join("d/new.txt");
        write_new(&path, b"mine", true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
        let err = write_new(&path, b"again", false).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        let dir = open_dir(&root.join("d"), false).unwrap();
        std::fs::write(root.join("d/.temp"), "temp").unwrap();
        // The file appeared after the check: the rename refuses it.
        let name = OsStr::new("new.txt");
        assert_eq!(
            rename_new(&dir, OsStr::new(".temp"), name),
            Err(Errno::EXIST)
        );
        assert_eq!(link_new(&dir, OsStr::new(".temp"), name), Err(Errno::EXIST));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
        link_new(&dir, OsStr::new(".temp"), OsStr::new("other.txt")).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("d/other.txt")).unwrap(),
            "temp"
        );
        assert!(!root.join("d/.temp").exists());
        let leftovers = std::fs::read_dir(root.join("d")).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary file left");
    }

    #[test]
    fn a_rewritten_file_keeps_its_owner_where_dsh_may_set_it() {
        use std::os::unix::fs::MetadataExt;
        let (_w, root, _o, _far) = tree();
        let path = root.join("theirs.txt");
        std::fs::write(&path, "one").unwrap();
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        }
        let before = std::fs::metadata(&path).unwrap();
        write(&path, b"two", false).unwrap();
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
    }

    #[test]
    fn special_files_and_relative_paths_are_refused() {
        let (_w, root, _o, _far) = tree();
        rustix::fs::mknodat(
            CWD,
            root.join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(matches!(
            open_read(&root.join("fifo")),
            Err(FsError::NotRegular(_, "a named pipe (FIFO)"))
        ));
        assert!(matches!(
            open_read(Path::new("relative.txt")),
            Err(FsError::NotCanonical(_))
        ));
        assert!(matches!(
            open_read(&root.join("x/../y")),
            Err(FsError::NotCanonical(_))
        ));
        assert!(metadata(&root.join("missing")).unwrap().is_none());
    }

    #[test]
    fn beneath_lets_links_resolve_only_inside_the_root() {
        let (_w, root, _o, far) = tree();
        std::fs::write(root.join("AGENTS.md"), "inside").unwrap();
        std::fs::write(far.join("id_rsa"), "secret").unwrap();
        symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
        symlink(far.join("id_rsa"), root.join("EVIL.md")).unwrap();
        symlink("../../../../../../../../etc/hostname", root.join("UP.md")).unwrap();
        let (_, real) = open_beneath(&root, Path::new("CLAUDE.md")).unwrap();
        assert_eq!(real, root.join("AGENTS.md"));
        assert!(matches!(
            open_beneath(&root, Path::new("EVIL.md")),
            Err(FsError::Escapes(_))
        ));
        assert!(matches!(
            open_beneath(&root, Path::new("UP.md")),
            Err(FsError::Escapes(_))
        ));
    }
}
