//! Unix: the directory handles, temporary files, renames and deletes every
//! Unix shares; how a path is opened without links is the kernel's
//! (`super::linux`) or a walk of its components (`super::macos`).

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

pub(super) use super::resolve::{metadata, open_beneath};
use super::resolve::{open_dir, open_file};
use super::{exists, split, FsError};

pub(super) fn error(path: &Path, errno: Errno) -> FsError {
    match errno {
        Errno::LOOP => FsError::Symlink(path.to_path_buf()),
        Errno::XDEV => FsError::Escapes(path.to_path_buf()),
        errno => FsError::Io(path.to_path_buf(), errno.into()),
    }
}

/// What a file type is, for refusals.
fn kind_of(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "a named pipe (FIFO)",
        FileType::Socket => "a socket",
        FileType::BlockDevice | FileType::CharacterDevice => "a device",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

pub(super) fn kind_name(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    kind_of(if kind.is_fifo() {
        FileType::Fifo
    } else if kind.is_socket() {
        FileType::Socket
    } else if kind.is_block_device() {
        FileType::BlockDevice
    } else if kind.is_char_device() {
        FileType::CharacterDevice
    } else if kind.is_dir() {
        FileType::Directory
    } else if kind.is_symlink() {
        FileType::Symlink
    } else {
        FileType::Unknown
    })
}

pub(super) fn open_read(path: &Path) -> Result<File, FsError> {
    let fd = open_file(path)?;
    regular(path, fd)
}

pub(super) fn regular(path: &Path, fd: OwnedFd) -> Result<File, FsError> {
    let stat = rustix::fs::fstat(&fd).map_err(|errno| error(path, errno))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(FsError::NotRegular(path.to_path_buf(), kind_of(kind)));
    }
    Ok(File::from(fd))
}

/// The entry `name` in `dir`, not followed: `None` when missing.
pub(super) fn entry(
    dir: &OwnedFd,
    name: &OsStr,
    path: &Path,
) -> Result<Option<rustix::fs::Stat>, FsError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(error(path, errno)),
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Whether a rename with `RENAME_NOREPLACE` failed only because the file
/// system lacks it (macOS says `ENOTSUP`, which is not `EOPNOTSUPP` there).
fn unsupported(errno: Errno) -> bool {
    #[cfg(not(target_os = "linux"))]
    if errno == Errno::NOTSUP {
        return true;
    }
    matches!(errno, Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP)
}

/// Moves `temp` to `name` in `dir` unless `name` exists (`EEXIST`).
pub(super) fn rename_new(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    use rustix::fs::RenameFlags;
    match rustix::fs::renameat_with(dir, temp, dir, name, RenameFlags::NOREPLACE) {
        Err(errno) if unsupported(errno) => link_new(dir, temp, name),
        other => other,
    }
}

/// The fallback of [`rename_new`]: a hard link (refused when `name`
/// exists), then the temporary name removed (a temporary name that stays
/// is no failure: the file is written). On a file system without hard
/// links: `name` created exclusively (refused when it exists), then the
/// temporary file renamed over that empty file of ours.
pub(super) fn link_new(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> Result<(), Errno> {
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
pub(super) fn claim_new(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    drop(rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?);
    rustix::fs::renameat(dir, temp, dir, name)
}

pub(super) fn write_with(
    path: &Path,
    bytes: &[u8],
    create_dirs: bool,
    replace: bool,
) -> Result<(), FsError> {
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
                kind => return Err(FsError::NotRegular(path.to_path_buf(), kind_of(kind))),
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

pub(super) fn remove(path: &Path) -> Result<(), FsError> {
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
            kind => Err(FsError::NotRegular(path.to_path_buf(), kind_of(kind))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beneath::{write, write_new};
    #[cfg(target_os = "linux")]
    use rustix::fs::CWD;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::PathBuf;

    fn tree() -> (tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf) {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(work.path()).unwrap();
        let far = dunce::canonicalize(outside.path()).unwrap();
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
        // rustix has no `mknodat` on macOS.
        #[cfg(not(target_os = "linux"))]
        nix::unistd::mkfifo(
            &root.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        #[cfg(target_os = "linux")]
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

    /// Both ways of resolving (the kernel's on Linux, dsh's own walk
    /// elsewhere) agree on links inside the root.
    #[test]
    fn beneath_follows_relative_links_through_directories_and_stops_loops() {
        let (_w, root, _o, _far) = tree();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("AGENTS.md"), "top").unwrap();
        std::fs::write(root.join("sub/real.md"), "deep").unwrap();
        symlink("sub", root.join("dir")).unwrap();
        symlink("../AGENTS.md", root.join("sub/back.md")).unwrap();
        symlink("sub/../dir/real.md", root.join("round.md")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();
        let real = |relative: &str| open_beneath(&root, Path::new(relative)).map(|(_, real)| real);
        assert_eq!(real("dir/real.md").unwrap(), root.join("sub/real.md"));
        assert_eq!(real("sub/back.md").unwrap(), root.join("AGENTS.md"));
        assert_eq!(real("round.md").unwrap(), root.join("sub/real.md"));
        assert_eq!(real("sub/../AGENTS.md").unwrap(), root.join("AGENTS.md"));
        assert!(matches!(real("../x"), Err(FsError::Escapes(_))));
        assert!(matches!(real("loop1"), Err(FsError::Symlink(_))));
        assert!(matches!(
            real("sub"),
            Err(FsError::NotRegular(_, "a directory"))
        ));
        assert!(real("missing.md").unwrap_err().is_not_found());
    }
}
