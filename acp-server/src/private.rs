//! Files only this user may read, and the checks that a file or directory
//! found on disk is this user's: the one place their platform differences
//! live.
//!
//! On unix, what dsh makes for itself (session logs, the index, spill
//! files, checkpoints, credentials, the SDK token, private temporary
//! directories) is created 0700 (directories) and 0600 (files), whatever
//! the umask; what it finds is trusted only when this process's effective
//! user owns it and the permission bits a caller names are clear (each
//! caller names its own: group and others may not read, or may not
//! write).
//!
//! On Windows no ACL is set or checked. What dsh makes lives under the
//! user's profile (`%USERPROFILE%`, `%LOCALAPPDATA%`, whose `Temp` is the
//! temporary directory), whose inherited ACL already gives it to the user,
//! SYSTEM and the Administrators alone; a file or directory made
//! elsewhere (a `DSH_HOME` somewhere shared) gets whatever its parent
//! hands down. The checks come down to "not a reparse point" (no
//! symbolic link or junction put in its place): ownership is not looked
//! at, and a directory others may write in is not detected. Links at
//! the last component are still never followed where unix uses
//! `O_NOFOLLOW`.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

/// Group's and others' permission bits: a file none of them is set on
/// is its owner's alone.
pub const GROUP_OTHER: u32 = 0o077;

/// Group's and others' write bits: a directory none of them is set on
/// only its owner can add to or remove from.
pub const GROUP_OTHER_WRITE: u32 = 0o022;

/// Creates `dir` and any missing parent, each one made 0700 (unix); an
/// existing one is left as it is.
///
/// # Errors
/// As [`std::fs::create_dir_all`].
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Creates `dir` itself, 0700 (unix), or fails: its parent must exist,
/// and anything already under the name, a link too, is `AlreadyExists`
/// (never followed nor reused).
///
/// # Errors
/// As [`std::fs::create_dir`].
pub fn create_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir(dir)
    }
}

/// Takes group's and others' permission bits off `path` when it has any
/// (the owner's stay as they are). Nothing on Windows.
///
/// # Errors
/// It cannot be `stat`ed or changed.
pub fn tighten(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & GROUP_OTHER != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Makes the directory `dir` 0700, whatever it was. Nothing on Windows.
///
/// # Errors
/// It cannot be changed.
pub fn set_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Options whose file, when they create one, is 0600 (unix); what it is
/// opened for is the caller's to say.
pub fn options() -> OpenOptions {
    #[allow(unused_mut)]
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Opens `path` with `options`, never through a link at its last
/// component: unix opens with `O_NOFOLLOW` (a link is `ELOOP`); Windows
/// opens the reparse point itself and refuses it.
///
/// # Errors
/// It cannot be opened, or is a link.
pub fn open_no_follow(options: &OpenOptions, path: &Path) -> io::Result<File> {
    let mut options = options.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
        options.open(path)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        options.custom_flags(windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OPEN_REPARSE_POINT);
        let file = options.open(path)?;
        if is_reparse_point(&file.metadata()?) {
            return Err(io::Error::other(format!(
                "{} is a link, not followed",
                path.display()
            )));
        }
        Ok(file)
    }
}

/// Whether `meta` (of a file or directory found on disk) is this user's
/// as a caller needs it: owned by this process's effective user with
/// none of the permission bits `forbidden` (0: any) set. On Windows:
/// not a reparse point (see the module docs).
pub fn is_owned(meta: &Metadata, forbidden: u32) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & forbidden == 0
    }
    #[cfg(windows)]
    {
        let _ = forbidden;
        !is_reparse_point(meta)
    }
}

/// Whether any of the permission `bits` is set on `meta` (unix); never
/// on Windows, which has no such bits.
pub fn grants(meta: &Metadata, bits: u32) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & bits != 0
    }
    #[cfg(not(unix))]
    {
        let _ = (meta, bits);
        false
    }
}

/// The permission bits of `meta` (`0o777` of the mode), for messages and
/// tests; `None` on Windows.
pub fn mode_of(meta: &Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Some(meta.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Whether the file `meta` describes may be run: an execute bit set
/// (unix); on Windows any file (there is no execute bit: starting it
/// decides).
pub fn is_runnable(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        grants(meta, 0o111)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        true
    }
}

/// A new file in `dir`, read and write, that no one else can open:
///
/// - Linux: it has no name and never will (`O_TMPFILE | O_EXCL`), 0600;
///   where the filesystem has no `O_TMPFILE`, as on other unixes;
/// - other unixes: a random name, 0600, created new and unlinked at once;
/// - Windows: a random hidden name until it is closed (then deleted),
///   opened sharing nothing.
///
/// # Errors
/// It cannot be created there.
pub fn nameless_in(dir: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_EXCL | libc::O_CLOEXEC)
            .open(dir)
        {
            Err(err) if matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
                tempfile::tempfile_in(dir)
            }
            opened => opened,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        tempfile::tempfile_in(dir)
    }
}

#[cfg(windows)]
fn is_reparse_point(meta: &Metadata) -> bool {
    use std::os::windows::fs::MetadataExt;
    meta.file_attributes() & windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_REPARSE_POINT
        != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is made is private whatever the umask; a link is neither
    /// followed nor taken for the file.
    #[test]
    fn made_private_and_links_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        let mut create = options();
        create.write(true).create_new(true);
        open_no_follow(&create, &file).unwrap();
        let meta = |p: &Path| std::fs::symlink_metadata(p).unwrap();
        assert!(is_owned(&meta(&dir), GROUP_OTHER));
        assert!(is_owned(&meta(&file), GROUP_OTHER));
        assert!(!grants(&meta(&file), GROUP_OTHER));
        if cfg!(unix) {
            assert_eq!(mode_of(&meta(&dir)), Some(0o700));
            assert_eq!(mode_of(&meta(&file)), Some(0o600));
        }
        assert_eq!(
            create_dir(&dir).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&file, dir.join("l")).unwrap();
            let mut append = options();
            append.append(true).create(true);
            assert!(open_no_follow(&append, &dir.join("l")).is_err());
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            assert!(is_owned(&meta(&dir), GROUP_OTHER_WRITE));
            assert!(!is_owned(&meta(&dir), GROUP_OTHER));
            tighten(&dir).unwrap();
            assert_eq!(mode_of(&meta(&dir)), Some(0o700));
        }
    }
}
