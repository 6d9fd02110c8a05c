//! Path resolution for tools: relative paths resolve against the session
//! cwd, then the result is canonicalized the way the OS would (`..` and
//! symlinks resolved), so the permission policy sees where a call really
//! lands and the tool operates on exactly that path.

use std::path::{Component, Path, PathBuf};

use dsh_protocol::ErrorCode;

use super::Refusal;

/// Resolves `raw` against `cwd` to the path a call really lands on:
/// canonicalized the way the OS resolves it, `..` and symlinks followed. A
/// path that does not exist (yet) is resolved the way the kernel would
/// create it: existing parts canonically, symlinks followed even when they
/// dangle (a link's target resolved against the link's directory), so
/// `notes.md → /elsewhere/missing` is `/elsewhere/missing`, not a file in
/// the workspace.
///
/// # Errors
/// An empty path, or a symlink loop.
pub fn resolve(cwd: &Path, raw: &str) -> Result<PathBuf, Refusal> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            "The path is empty.",
        ));
    }
    let raw = raw.strip_prefix("file://").unwrap_or(raw);
    // `\\?\C:\x` is `C:\x` (Windows; nothing elsewhere).
    let raw = dunce::simplified(Path::new(raw));
    let joined = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        cwd.join(raw)
    };
    // Windows: nothing is opened before the path and every link target on
    // the way are checked (merely opening a share sends the user's
    // credentials), so links are followed by dsh, not by the system.
    #[cfg(windows)]
    {
        windows::check_prefix(&joined, cwd)
            .and_then(|()| windows::check_names(raw))
            .map_err(|why| Refusal::new(ErrorCode::InvalidToolArgs, why))?;
    }
    #[cfg(not(windows))]
    if let Ok(canonical) = dunce::canonicalize(&joined) {
        return Ok(canonical);
    }
    follow(&joined, cwd).map_err(|why| {
        Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!("Cannot resolve the path {}: {why}.", joined.display()),
        )
    })
}

/// One step of a path still to resolve.
enum Part {
    /// A root: `/`; on Windows with its prefix (`C:\`, `\\server\share\`).
    Root(PathBuf),
    Parent,
    Name(std::ffi::OsString),
}

fn parts(path: &Path) -> Vec<Part> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => parts.push(Part::Root(PathBuf::from(prefix.as_os_str()))),
            Component::RootDir => match parts.last_mut() {
                Some(Part::Root(root)) => root.push(std::path::MAIN_SEPARATOR_STR),
                _ => parts.push(Part::Root(PathBuf::from(std::path::MAIN_SEPARATOR_STR))),
            },
            Component::CurDir => {}
            Component::ParentDir => parts.push(Part::Parent),
            Component::Normal(name) => parts.push(Part::Name(name.to_owned())),
        }
    }
    parts
}

/// Resolves an absolute path component by component, following every
/// symlink met on the way (dangling ones included). Like the kernel, it
/// refuses to climb (`..`) out of a directory that does not exist, and
/// gives up after 40 links.
fn follow(path: &Path, cwd: &Path) -> Result<PathBuf, String> {
    let _ = cwd;
    let mut resolved = PathBuf::from("/");
    // A stack: the next part is on top.
    let mut pending: Vec<Part> = parts(path).into_iter().rev().collect();
    let mut links = 0;
    let mut missing = false;
    while let Some(part) = pending.pop() {
        match part {
            Part::Root(root) => {
                resolved = root;
                missing = false;
            }
            Part::Parent if missing => {
                return Err("it climbs out of a directory that does not exist".to_owned())
            }
            Part::Parent => {
                resolved.pop();
            }
            Part::Name(name) => {
                let next = resolved.join(&name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > 40 {
                            return Err(
                                "it goes through too many symbolic links (a loop?)".to_owned()
                            );
                        }
                        let target = std::fs::read_link(&next)
                            .map_err(|_| "a symbolic link on the way cannot be read".to_owned())?;
                        #[cfg(windows)]
                        {
                            let target = dunce::simplified(&target);
                            windows::check_names(target)?;
                            if target.is_absolute() {
                                windows::check_prefix(target, cwd)?;
                            }
                        }
                        // A junction's target is a `\\?\` path on Windows.
                        pending.extend(parts(dunce::simplified(&target)).into_iter().rev());
                    }
                    // Where names ignore case (and Windows has short
                    // names), the name on disk: `.Git` is `.git`.
                    Ok(_) if cfg!(any(windows, target_os = "macos")) => {
                        resolved = dunce::canonicalize(&next).unwrap_or(next);
                    }
                    Ok(_) => resolved = next,
                    Err(_) => {
                        resolved = next;
                        missing = true;
                    }
                }
            }
        }
    }
    Ok(resolved)
}

/// Windows paths the model may not give: a file share or device
/// (`\\host\share\…`, `\\.\pipe\…`: merely opening one sends the user's
/// credentials to that host, or talks to a local service) unless the
/// session's own directory is on that share; and names the system reads
/// as another (`AGENTS.md.` and `AGENTS.md ` are `AGENTS.md`, `a:b` is a
/// stream of `a`, `CON` or `nul.txt` a device), which the protected paths
/// would not recognise.
#[cfg(windows)]
mod windows {
    use std::path::{Component, Path, Prefix};

    const DEVICES: &[&str] = &[
        "con",
        "prn",
        "aux",
        "nul",
        "conin$",
        "conout$",
        "com0",
        "com1",
        "com2",
        "com3",
        "com4",
        "com5",
        "com6",
        "com7",
        "com8",
        "com9",
        "com\u{b9}",
        "com\u{b2}",
        "com\u{b3}",
        "lpt0",
        "lpt1",
        "lpt2",
        "lpt3",
        "lpt4",
        "lpt5",
        "lpt6",
        "lpt7",
        "lpt8",
        "lpt9",
        "lpt\u{b9}",
        "lpt\u{b2}",
        "lpt\u{b3}",
    ];

    pub fn check_prefix(path: &Path, cwd: &Path) -> Result<(), String> {
        fn prefix(path: &Path) -> Option<Prefix<'_>> {
            match path.components().next() {
                Some(Component::Prefix(prefix)) => Some(prefix.kind()),
                _ => None,
            }
        }
        fn share(kind: Prefix<'_>) -> Option<(String, String)> {
            match kind {
                Prefix::UNC(server, share) | Prefix::VerbatimUNC(server, share) => Some((
                    server.to_string_lossy().to_lowercase(),
                    share.to_string_lossy().to_lowercase(),
                )),
                _ => None,
            }
        }
        match prefix(path) {
            Some(Prefix::Disk(_)) | None => {}
            Some(kind @ (Prefix::UNC(..) | Prefix::VerbatimUNC(..)))
                if share(kind).is_some() && share(kind) == prefix(cwd).and_then(share) => {}
            Some(_) => {
                return Err(format!(
                    "{} is on another machine or a device; only paths on this machine's drives (or the session's own share) are opened",
                    path.display()
                ))
            }
        }
        Ok(())
    }

    /// The names of `path` (as the model gave it, or a link's target).
    pub fn check_names(path: &Path) -> Result<(), String> {
        for part in path.components() {
            let Component::Normal(name) = part else {
                continue;
            };
            let name = name.to_string_lossy();
            let stem = name
                .split('.')
                .next()
                .unwrap_or("")
                .trim_end()
                .to_lowercase();
            if name.ends_with('.') || name.ends_with(' ') {
                return Err(format!("{name:?} ends with a dot or a space, which Windows drops: name the file as it is"));
            }
            if name.contains(':') {
                return Err(format!(
                    "{name:?} names a stream of a file (`:`), not a file"
                ));
            }
            if DEVICES.contains(&stem.as_str()) {
                return Err(format!("{name:?} is a device name on Windows, not a file"));
            }
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::{check_names, check_prefix};
        use std::path::Path;

        #[test]
        fn shares_devices_and_names_windows_rewrites_are_refused() {
            let cwd = Path::new(r"C:\work");
            let check = |path: &str| {
                let path = Path::new(path);
                check_prefix(path, cwd).and_then(|()| check_names(path))
            };
            assert!(check(r"C:\work\src\a.rs").is_ok());
            for bad in [
                r"\\attacker.example\s\x",
                r"//attacker.example/s/x",
                r"\\?\UNC\attacker\s\x",
                r"\\?\GLOBALROOT\Device\x",
                r"\\.\pipe\name",
                r"C:\work\AGENTS.md.",
                r"C:\work\AGENTS.md ",
                r"C:\work\a.txt:stream",
                r"C:\work\CON",
                r"C:\work\nul.txt",
                "C:\\work\\COM\u{b9}",
            ] {
                assert!(check(bad).is_err(), "{bad}");
            }
            let share = Path::new(r"\\server\team\proj");
            assert!(check_prefix(Path::new(r"\\SERVER\Team\proj\a.rs"), share).is_ok());
            assert!(check_prefix(Path::new(r"\\other\team\a.rs"), share).is_err());
        }
    }
}

/// Canonical forms of the session roots (cwd first).
pub fn canonical_roots(cwd: &str, roots: &[String]) -> Vec<PathBuf> {
    std::iter::once(cwd)
        .chain(roots.iter().map(String::as_str))
        .map(|root| dunce::canonicalize(Path::new(root)).unwrap_or_else(|_| PathBuf::from(root)))
        .collect()
}

/// A path for titles: relative to `cwd` when inside it.
pub fn display_path(path: &Path, cwd: &Path) -> String {
    let cwd = dunce::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    match path.strip_prefix(&cwd) {
        Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_missing_and_escaping_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        assert_eq!(
            resolve(&root, "sub/new.txt").unwrap(),
            root.join("sub/new.txt")
        );
        assert_eq!(resolve(&root, "a/b/c.txt").unwrap(), root.join("a/b/c.txt"));
        assert_eq!(
            resolve(&root, "../x").unwrap(),
            root.parent().unwrap().join("x")
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
            let escaped = resolve(&root, "link/hostname-new").unwrap();
            assert!(escaped.starts_with("/etc"), "{escaped:?}");
        }
    }

    /// Issue 10, item 2: a dangling link inside the workspace resolves to
    /// its target outside, relative links against their own directory, and
    /// chains and loops are handled.
    #[cfg(unix)]
    #[test]
    fn dangling_symlinks_resolve_to_their_targets() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(dir.path()).unwrap();
        let far = dunce::canonicalize(outside.path()).unwrap();
        std::os::unix::fs::symlink(far.join("missing.md"), root.join("notes.md")).unwrap();
        assert_eq!(resolve(&root, "notes.md").unwrap(), far.join("missing.md"));
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("../../escape/x", root.join("sub/rel")).unwrap();
        assert_eq!(
            resolve(&root, "sub/rel").unwrap(),
            root.parent().unwrap().join("escape/x")
        );
        assert!(resolve(&root, "missing/../../x").is_err());
        std::os::unix::fs::symlink("notes.md", root.join("chain")).unwrap();
        assert_eq!(resolve(&root, "chain").unwrap(), far.join("missing.md"));
        std::os::unix::fs::symlink("loop2", root.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", root.join("loop2")).unwrap();
        assert!(resolve(&root, "loop1").is_err());
        assert_eq!(
            resolve(&root, "new/dir/f.txt").unwrap(),
            root.join("new/dir/f.txt")
        );
    }
}
