//! Windows: every directory on the way is opened as itself
//! (`FILE_FLAG_OPEN_REPARSE_POINT`: a junction or symbolic link is opened,
//! not followed), refused if it is a link, and held without
//! `FILE_SHARE_DELETE` until the operation is done, so none of them can be
//! renamed, deleted or swapped for a junction in between. The final file
//! is checked (and pinned) the same way; std has no handle-relative
//! rename or delete, so those are by path below the held directories.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use windows_sys::Win32::Foundation::{ERROR_INVALID_FUNCTION, ERROR_NOT_SUPPORTED};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_REPARSE_POINT, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_SHARE_READ, FILE_SHARE_WRITE,
};

use super::{canonical, exists, push_steps, split, FsError, Step, MAX_LINKS};

/// The entry at `path` opened as itself (a link is opened, not followed)
/// with `access`, and its metadata.
fn open_as_itself(path: &Path, access: u32) -> std::io::Result<(File, Metadata)> {
    let file = OpenOptions::new()
        .access_mode(access)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// The entry at `path` opened as itself and held: while the handle is open
/// the entry can be neither renamed nor deleted (no `FILE_SHARE_DELETE`),
/// so its name keeps meaning it. The handle reads (lists a directory):
/// Windows ignores the share mode of a handle that only reads attributes.
fn pin(path: &Path) -> std::io::Result<(File, Metadata)> {
    open_as_itself(path, FILE_READ_ATTRIBUTES | FILE_LIST_DIRECTORY)
}

/// What the entry at `path` is, not followed: attributes only, so a file
/// another program holds without sharing can still be looked at.
fn look(path: &Path) -> std::io::Result<Metadata> {
    open_as_itself(path, FILE_READ_ATTRIBUTES).map(|(_, meta)| meta)
}

/// Whether an entry sends its name elsewhere: a reparse point whose tag is
/// a name surrogate (symbolic link, junction, mount point), which std
/// calls a symlink. Data reparse points (OneDrive placeholders,
/// deduplicated files) are the file or folder itself.
fn is_link(meta: &Metadata) -> bool {
    meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 && meta.file_type().is_symlink()
}

fn io(path: &Path, err: std::io::Error) -> FsError {
    FsError::Io(path.to_path_buf(), err)
}

pub(super) fn kind_name(kind: std::fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// A link or anything but a regular file at `path` refused.
fn check_regular(path: &Path, meta: &Metadata) -> Result<(), FsError> {
    if is_link(meta) {
        Err(FsError::Symlink(path.to_path_buf()))
    } else if !meta.is_file() {
        Err(FsError::NotRegular(
            path.to_path_buf(),
            kind_name(meta.file_type()),
        ))
    } else {
        Ok(())
    }
}

/// Every directory of `path` below its drive or share, each opened in
/// turn and held: a link among them is refused. Missing ones are created
/// (inside the held one above) when `create` is set.
fn open_dir(path: &Path, create: bool) -> Result<Vec<File>, FsError> {
    canonical(path)?;
    let mut held = Vec::new();
    let mut so_far = PathBuf::new();
    for component in path.components() {
        so_far.push(component);
        if !matches!(component, Component::Normal(_)) {
            continue;
        }
        let pinned = match pin(&so_far) {
            Err(err) if create && err.kind() == ErrorKind::NotFound => {
                match std::fs::create_dir(&so_far) {
                    Err(err) if err.kind() != ErrorKind::AlreadyExists => {
                        return Err(io(&so_far, err))
                    }
                    _ => pin(&so_far),
                }
            }
            other => other,
        };
        let (file, meta) = pinned.map_err(|err| io(&so_far, err))?;
        if is_link(&meta) {
            return Err(FsError::Symlink(so_far));
        }
        if !meta.is_dir() {
            let err = std::io::Error::new(ErrorKind::NotADirectory, "not a directory");
            return Err(io(&so_far, err));
        }
        held.push(file);
    }
    Ok(held)
}

/// The regular file at `path` (pinned by `_pin`, so it is the file
/// checked) opened for reading.
fn read_pinned(path: &Path, _pin: File) -> Result<File, FsError> {
    File::open(path).map_err(|err| io(path, err))
}

pub(super) fn open_read(path: &Path) -> Result<File, FsError> {
    let (parent, _) = split(path)?;
    let _held = open_dir(parent, false)?;
    let (pin, meta) = pin(path).map_err(|err| io(path, err))?;
    check_regular(path, &meta)?;
    read_pinned(path, pin)
}

pub(super) fn metadata(path: &Path) -> Result<Option<Metadata>, FsError> {
    canonical(path)?;
    let held = match path.parent() {
        Some(parent) => open_dir(parent, false),
        None => Ok(Vec::new()),
    };
    let _held = match held {
        Err(err) if err.is_not_found() => return Ok(None),
        other => other?,
    };
    match look(path) {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(None),
        Err(err) => Err(io(path, err)),
        Ok(meta) if is_link(&meta) => Err(FsError::Symlink(path.to_path_buf())),
        Ok(meta) => Ok(Some(meta)),
    }
}

/// Walks `relative` below the held `root`, following a symbolic link only
/// when its target is relative and stays below `root` (at most
/// [`MAX_LINKS`]); a junction, an absolute link or a `..` above `root` is
/// [`FsError::Escapes`].
pub(super) fn open_beneath(root: &Path, relative: &Path) -> Result<(File, PathBuf), FsError> {
    let full = root.join(relative);
    let mut pending = Vec::new();
    if push_steps(&mut pending, relative).is_err() {
        return Err(FsError::Escapes(full));
    }
    let mut held = open_dir(root, false)?;
    let depth = held.len();
    let mut real = root.to_path_buf();
    let mut links = 0;
    while let Some(step) = pending.pop() {
        let name = match step {
            Step::Up if held.len() > depth => {
                held.pop();
                real.pop();
                continue;
            }
            Step::Up => return Err(FsError::Escapes(full)),
            Step::Name(name) => name,
        };
        let here = real.join(&name);
        let (file, meta) = pin(&here).map_err(|err| io(&here, err))?;
        if is_link(&meta) {
            links += 1;
            if links > MAX_LINKS {
                return Err(FsError::Symlink(full));
            }
            // The link is pinned: what is read is the link just opened.
            let target = std::fs::read_link(&here).map_err(|err| io(&here, err))?;
            if push_steps(&mut pending, &target).is_err() {
                return Err(FsError::Escapes(full));
            }
        } else if pending.is_empty() {
            check_regular(&here, &meta)?;
            return Ok((read_pinned(&here, file)?, here));
        } else if meta.is_dir() {
            held.push(file);
            real = here;
        } else {
            let err = std::io::Error::new(ErrorKind::NotADirectory, "not a directory");
            return Err(io(&here, err));
        }
    }
    // The walk ended on a directory (`relative` empty or ending in `..`).
    Err(FsError::NotRegular(real, "a directory"))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new file at `path`, or `AlreadyExists` when anything (a link
/// included) is there.
fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
}

/// Whether a hard link failed only because the file system has none.
fn no_hard_links(err: &std::io::Error) -> bool {
    err.raw_os_error()
        .and_then(|code| u32::try_from(code).ok())
        .is_some_and(|code| code == ERROR_INVALID_FUNCTION || code == ERROR_NOT_SUPPORTED)
}

/// Moves `temp` to `path` unless `path` exists (`AlreadyExists`): a hard
/// link (refused when `path` exists), then the temporary name removed; on
/// a file system without hard links, `path` created exclusively, then the
/// temporary file renamed over that empty file of ours.
fn rename_new(temp: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(temp, path) {
        Ok(()) => {
            let _ = std::fs::remove_file(temp);
            Ok(())
        }
        Err(err) if no_hard_links(&err) => {
            drop(create_new(path)?);
            std::fs::rename(temp, path)
        }
        Err(err) => Err(err),
    }
}

pub(super) fn write_with(
    path: &Path,
    bytes: &[u8],
    create_dirs: bool,
    replace: bool,
) -> Result<(), FsError> {
    let (parent, name) = split(path)?;
    let _held = open_dir(parent, create_dirs)?;
    match look(path) {
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(io(path, err)),
        Ok(_) if !replace => return Err(exists(path)),
        Ok(meta) => check_regular(path, &meta)?,
    }
    let mut temp_name = OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(
        ".dsh-{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = parent.join(temp_name);
    let mut file = create_new(&temp).map_err(|err| io(path, err))?;
    let written = file.write_all(bytes).and_then(|()| {
        drop(file);
        if replace {
            std::fs::rename(&temp, path)
        } else {
            rename_new(&temp, path)
        }
    });
    if let Err(err) = written {
        let _ = std::fs::remove_file(&temp);
        if err.kind() == ErrorKind::AlreadyExists {
            return Err(exists(path));
        }
        return Err(io(path, err));
    }
    Ok(())
}

pub(super) fn remove(path: &Path) -> Result<(), FsError> {
    let (parent, _) = split(path)?;
    let _held = match open_dir(parent, false) {
        Err(err) if err.is_not_found() => return Ok(()),
        other => other?,
    };
    match look(path) {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
        Err(err) => Err(io(path, err)),
        Ok(meta) => {
            check_regular(path, &meta)?;
            // By path: a link put in its place since the look is deleted
            // itself, never followed.
            std::fs::remove_file(path).map_err(|err| io(path, err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{lexical, open_read, remove, write, write_new};
    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf) {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(work.path()).unwrap();
        let far = dunce::canonicalize(outside.path()).unwrap();
        (work, root, outside, far)
    }

    /// A link from `link` to the directory `target`: a symbolic link where
    /// this account may make one, else a junction; `false` when neither.
    /// (Wine 8 reports success making a symbolic link and makes none.)
    fn link_dir(target: &Path, link: &Path) -> bool {
        let made = |link: &Path| std::fs::symlink_metadata(link).is_ok();
        if std::os::windows::fs::symlink_dir(target, link).is_ok() && made(link) {
            return true;
        }
        std::process::Command::new("cmd")
            .args(["/C", "mklink", "/J"])
            .arg(link)
            .arg(target)
            .output()
            .is_ok_and(|out| out.status.success())
            && made(link)
    }

    #[test]
    fn writes_read_back_replace_and_remove_on_windows() {
        let (_w, root, _o, far) = tree();
        let path = root.join("a").join("b").join("c.txt");
        write(&path, b"one", true).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut open_read(&path).unwrap(), &mut text).unwrap();
        assert_eq!(text, "one");
        write(&path, b"two", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let meta = super::metadata(&path).unwrap().unwrap();
        assert_eq!(meta.len(), 3);
        assert!(super::metadata(&root.join("missing")).unwrap().is_none());
        let err = write_new(&path, b"again", false).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        write_new(&root.join("a").join("new.txt"), b"new", false).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("a").join("new.txt")).unwrap(),
            "new"
        );
        let leftovers: Vec<_> = std::fs::read_dir(root.join("a").join("b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["c.txt"], "no temporary file left");
        // A hard link to a file elsewhere is split, not written through.
        std::fs::write(far.join("shared"), "outside").unwrap();
        if std::fs::hard_link(far.join("shared"), root.join("linked")).is_ok() {
            write(&root.join("linked"), b"inside", false).unwrap();
            assert_eq!(
                std::fs::read_to_string(far.join("shared")).unwrap(),
                "outside"
            );
        }
        assert!(matches!(
            open_read(&root.join("a")),
            Err(FsError::NotRegular(_, "a directory"))
        ));
        assert!(matches!(
            open_read(Path::new("relative.txt")),
            Err(FsError::NotCanonical(_))
        ));
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert!(!path.exists());
        assert_eq!(
            lexical(Path::new(r"C:\a\.\b\..\c")),
            PathBuf::from(r"C:\a\c")
        );
    }

    #[test]
    fn a_held_directory_cannot_be_renamed_away() {
        let (_w, root, _o, _far) = tree();
        std::fs::create_dir(root.join("d")).unwrap();
        let held = open_dir(&root.join("d"), false).unwrap();
        assert!(std::fs::rename(root.join("d"), root.join("e")).is_err());
        drop(held);
        std::fs::rename(root.join("d"), root.join("e")).unwrap();
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn a_junction_or_link_on_the_way_is_refused_not_followed() {
        let (_w, root, _o, far) = tree();
        std::fs::write(far.join("secret"), "far away").unwrap();
        if !link_dir(&far, &root.join("d")) {
            eprintln!("skipped: this account can make neither a symbolic link nor a junction");
            return;
        }
        let target = root.join("d").join("secret");
        assert!(matches!(open_read(&target), Err(FsError::Symlink(_))));
        assert!(matches!(super::metadata(&target), Err(FsError::Symlink(_))));
        assert!(matches!(
            write(&root.join("d").join("new"), b"x", true),
            Err(FsError::Symlink(_))
        ));
        assert!(!far.join("new").exists());
        assert!(matches!(remove(&target), Err(FsError::Symlink(_))));
        assert!(far.join("secret").exists());
        assert!(matches!(
            open_beneath(&root, Path::new("d/secret")),
            Err(FsError::Escapes(_))
        ));
        assert_eq!(
            std::fs::read_to_string(far.join("secret")).unwrap(),
            "far away"
        );
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn file_links_are_refused_and_followed_beneath_only_inside_the_root() {
        use std::os::windows::fs::symlink_file;
        let (_w, root, _o, far) = tree();
        std::fs::write(root.join("AGENTS.md"), "inside").unwrap();
        std::fs::write(far.join("id_rsa"), "secret").unwrap();
        let made = symlink_file("AGENTS.md", root.join("CLAUDE.md")).is_ok()
            && std::fs::symlink_metadata(root.join("CLAUDE.md")).is_ok();
        if !made {
            eprintln!("skipped: this account cannot make symbolic links");
            return;
        }
        symlink_file(far.join("id_rsa"), root.join("EVIL.md")).unwrap();
        let (_, real) = open_beneath(&root, Path::new("CLAUDE.md")).unwrap();
        assert_eq!(real, root.join("AGENTS.md"));
        assert!(matches!(
            open_beneath(&root, Path::new("EVIL.md")),
            Err(FsError::Escapes(_))
        ));
        let evil = root.join("EVIL.md");
        assert!(matches!(open_read(&evil), Err(FsError::Symlink(_))));
        assert!(matches!(
            write(&evil, b"workspace text", false),
            Err(FsError::Symlink(_))
        ));
        assert!(matches!(remove(&evil), Err(FsError::Symlink(_))));
        assert_eq!(
            std::fs::read_to_string(far.join("id_rsa")).unwrap(),
            "secret"
        );
    }
}
