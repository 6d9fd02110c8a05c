//! Path resolution for tools: relative paths resolve against the session
//! cwd, then the result is canonicalized the way the OS would (`..` and
//! symlinks resolved), so the permission policy sees where a call really
//! lands and the tool operates on exactly that path.

use std::path::{Path, PathBuf};

use dsh_protocol::ErrorCode;

use super::Refusal;

/// Resolves `raw` against `cwd` and canonicalizes it. A path that does not
/// exist yet is its deepest existing ancestor, canonicalized, plus the rest.
///
/// # Errors
/// An empty path, or a path whose missing part contains `..`.
pub fn resolve(cwd: &Path, raw: &str) -> Result<PathBuf, Refusal> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            "The path is empty.",
        ));
    }
    let raw = raw.strip_prefix("file://").unwrap_or(raw);
    let joined = if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        cwd.join(raw)
    };
    if let Ok(canonical) = joined.canonicalize() {
        return Ok(canonical);
    }
    let mut existing = joined.clone();
    let mut rest = Vec::new();
    while let Some(name) = existing.file_name() {
        rest.push(name.to_owned());
        existing.pop();
        if let Ok(canonical) = existing.canonicalize() {
            let mut path = canonical;
            for part in rest.iter().rev() {
                path.push(part);
            }
            // The missing tail holds only plain names (`file_name` never
            // yields `..`), so it cannot climb out of the canonical ancestor.
            return Ok(path);
        }
        if existing.as_os_str().is_empty() || existing == Path::new("/") {
            break;
        }
    }
    Err(Refusal::new(
        ErrorCode::InvalidToolArgs,
        format!(
            "Cannot resolve the path {}: no part of it exists.",
            joined.display()
        ),
    ))
}

/// Canonical forms of the session roots (cwd first).
pub fn canonical_roots(cwd: &str, roots: &[String]) -> Vec<PathBuf> {
    std::iter::once(cwd)
        .chain(roots.iter().map(String::as_str))
        .map(|root| {
            Path::new(root)
                .canonicalize()
                .unwrap_or_else(|_| PathBuf::from(root))
        })
        .collect()
}

/// A path for titles: relative to `cwd` when inside it.
pub fn display_path(path: &Path, cwd: &Path) -> String {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
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
        let root = dir.path().canonicalize().unwrap();
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
}
