//! The mount namespace of a sandboxed command: what Landlock does not
//! cover — metadata (`chmod`, `utime`, `setxattr`, the setuid bit) and the
//! user's other terminals and shared memory.
//!
//! In the guard's own user and mount namespace, before the command starts:
//!
//! 1. mount propagation is made private (nothing reaches the user's mounts);
//! 2. each writable path is bind-mounted onto itself;
//! 3. every other mount is remounted read-only (keeping the flags the
//!    kernel locks: `nosuid`, `nodev`, `noexec`, atime), so a metadata
//!    change outside the writable paths fails with `EROFS`;
//! 4. `/dev/shm` gets a fresh tmpfs and `/dev/pts` a new devpts instance:
//!    the command sees no other program's shared memory and none of the
//!    user's terminals (it can still open new ptys through `/dev/ptmx`);
//! 5. hidden paths are bound read-only onto themselves, also inside
//!    writable roots (Landlock keeps them unreadable);
//! 6. the read-only paths (a workspace root's protected paths: `.git/hooks`,
//!    `.git/config`, `.dsh`, `AGENTS.md`, …) that exist now are bound
//!    read-only onto themselves: the command can read and run them but not
//!    write them, create entries in them, or rename or delete them (a mount
//!    point is busy). A link is followed to what it names when that lies
//!    inside a writable path (and is not one of them, nor holds one).
//!    Before that, every directory between the writable path and a held
//!    one (`.git`, `.vscode`, …) is bound onto itself, read-write: a mount
//!    point too, it cannot be renamed or removed (so no fresh `.git` takes
//!    its place), while what is inside stays writable (git's lock files).
//!
//! The command then holds no `CAP_SYS_ADMIN` (`confine` drops it from the
//! bounding set), so it cannot undo any of this.

use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};
use nix::sys::statvfs::{statvfs, FsFlags};

const NONE: Option<&str> = None;

/// Sets the namespace up; the guard has entered a new user and mount
/// namespace. `writable` are the paths the command may change, `hidden`
/// those it may not read, `held` those beneath `writable` it may not
/// change (where they exist).
///
/// # Errors
/// A step that the sandbox depends on failed (then nothing runs).
pub fn confine(writable: &[PathBuf], hidden: &[PathBuf], held: &[PathBuf]) -> Result<(), String> {
    let fail = |what: &str, path: &Path, err: nix::Error| {
        format!("mount namespace: {what} {}: {err}", path.display())
    };
    let here = std::env::current_dir().map_err(|err| err.to_string())?;
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE)
        .map_err(|err| fail("private propagation of", Path::new("/"), err))?;
    let writable: Vec<PathBuf> = writable
        .iter()
        .filter_map(|path| path.canonicalize().ok())
        .filter(|path| path.is_dir())
        .collect();
    for path in &writable {
        bind_in_place(path).map_err(|err| fail("bind", path, err))?;
    }
    for point in mount_points() {
        if writable.iter().any(|path| point.starts_with(path)) {
            continue;
        }
        if let Err(err) = read_only(&point) {
            // The root must be read-only; a special mount that refuses
            // (a locked /proc entry, say) stays as it was.
            if point == Path::new("/") {
                return Err(fail("read-only remount of", &point, err));
            }
        }
    }
    // Fresh instances of what programs share through /dev.
    for (kind, point, flags, options, what) in [
        (
            "tmpfs",
            "/dev/shm",
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            "mode=1777",
            "a private tmpfs on",
        ),
        (
            "devpts",
            "/dev/pts",
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            "newinstance,ptmxmode=0666,mode=0620",
            "a new devpts instance on",
        ),
    ] {
        let point = Path::new(point);
        if point.is_dir() {
            mount(Some(kind), point, Some(kind), flags, Some(options))
                .map_err(|err| fail(what, point, err))?;
        }
    }
    for path in hidden {
        let Ok(path) = path.canonicalize() else {
            continue;
        };
        // Read-only in place (Landlock keeps them unreadable, with
        // EACCES): no chmod, no new files, even inside a writable root.
        bind_in_place(&path).map_err(|err| fail("cover", &path, err))?;
        read_only(&path).map_err(|err| fail("cover", &path, err))?;
    }
    let held = hold(&writable, held).map_err(|(path, err)| fail("hold", &path, err));
    // The working directory was resolved before the binds: enter it again,
    // on the writable mount now in its place.
    std::env::set_current_dir(&here).map_err(|err| err.to_string())?;
    held
}

/// Step 6: binds each of `paths` that exists (and lies inside a writable
/// path) read-only onto itself, after binding the directories between
/// the innermost writable path holding it and it onto themselves
/// (read-write), so none of them can be renamed away. One gone meanwhile
/// is skipped.
fn hold(writable: &[PathBuf], paths: &[PathBuf]) -> Result<(), (PathBuf, nix::Error)> {
    let mut held: Vec<PathBuf> = Vec::new();
    // Directories bound read-write onto themselves, each once.
    let mut pinned: Vec<PathBuf> = Vec::new();
    for path in paths {
        let Ok(path) = path.canonicalize() else {
            continue;
        };
        // The innermost writable path holding it (not it).
        let root = writable
            .iter()
            .filter(|root| path.starts_with(root) && path != **root)
            .max_by_key(|root| root.components().count());
        let holds_one = writable.iter().any(|root| root.starts_with(&path));
        let Some(root) = root else {
            continue;
        };
        if holds_one || held.contains(&path) {
            continue;
        }
        match pin_between(root, &path, &held, &mut pinned)
            .and_then(|()| bind_in_place(&path))
            .and_then(|()| read_only(&path))
        {
            Ok(()) => held.push(path),
            Err(nix::Error::ENOENT) => {}
            Err(err) => return Err((path, err)),
        }
    }
    Ok(())
}

/// Binds each directory strictly between `root` and `path` (canonical,
/// `path` below `root`) onto itself, read-write: a mount point cannot be
/// renamed or removed (`EBUSY`). A held one or one already pinned is
/// left as it is (none is writable: `root` is the innermost writable path
/// holding `path`).
fn pin_between(
    root: &Path,
    path: &Path,
    held: &[PathBuf],
    pinned: &mut Vec<PathBuf>,
) -> nix::Result<()> {
    let mut between: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .take_while(|dir| *dir != root)
        .collect();
    between.reverse();
    for dir in between {
        let done = |list: &[PathBuf]| list.iter().any(|known| known == dir);
        if done(held) || done(pinned) {
            continue;
        }
        bind_in_place(dir)?;
        pinned.push(dir.to_path_buf());
    }
    Ok(())
}

/// Binds `path` onto itself (with what is mounted below it): a mount of
/// its own, whose flags can differ from its parent's.
fn bind_in_place(path: &Path) -> nix::Result<()> {
    mount(
        Some(path),
        path,
        NONE,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        NONE,
    )
}

/// Remounts the mount at `point` read-only, keeping its locked flags.
fn read_only(point: &Path) -> nix::Result<()> {
    let now = statvfs(point)?.flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (has, keep) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if now.contains(has) {
            flags |= keep;
        }
    }
    mount(NONE, point, NONE, flags, NONE)
}

/// The mount points of this namespace, from `/proc/self/mountinfo`.
fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect();
    points.sort();
    points.dedup();
    points
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let octal = bytes
            .get(at + 1..at + 4)
            .filter(|digits| digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        if let (b'\\', Some(digits)) = (bytes[at], octal) {
            let code = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
            out.push(code as u8);
            at += 4;
            continue;
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(super::unescape(r"/a\040b\011c\134d"), "/a b\tc\\d");
        assert_eq!(super::unescape("/plain"), "/plain");
    }
}
