//! Project roots: walk up from a file to the nearest marker (`Cargo.toml`,
//! `go.mod`, `pyproject.toml`, `tsconfig.json`, …), never above the session
//! roots. A Cargo workspace root wins over a member crate.

use std::path::{Path, PathBuf};

/// The root for `file`: the nearest ancestor (up to the session root that
/// contains the file) holding one of `markers`; the session root otherwise.
/// Files outside every session root use their own directory.
pub fn find_root(file: &Path, markers: &[String], session_roots: &[PathBuf]) -> PathBuf {
    let start = file.parent().unwrap_or(file);
    let Some(limit) = session_roots
        .iter()
        .filter(|root| file.starts_with(root))
        .max_by_key(|root| root.as_os_str().len())
    else {
        return start.to_path_buf();
    };
    let mut found: Option<PathBuf> = None;
    let mut dir = Some(start);
    while let Some(current) = dir {
        if markers.iter().any(|marker| current.join(marker).exists()) {
            let is_cargo_member = found.is_some()
                && current.join("Cargo.toml").exists()
                && is_cargo_workspace(&current.join("Cargo.toml"));
            if found.is_none() || is_cargo_member {
                found = Some(current.to_path_buf());
            }
            if found.is_some() && !current.join("Cargo.toml").exists() {
                break;
            }
        }
        if current == limit.as_path() {
            break;
        }
        dir = current.parent();
    }
    found.unwrap_or_else(|| limit.clone())
}

fn is_cargo_workspace(manifest: &Path) -> bool {
    std::fs::read_to_string(manifest)
        .is_ok_and(|text| text.lines().any(|line| line.trim() == "[workspace]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_up_to_markers_but_not_above_the_session_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("ws/crates/a/src")).unwrap();
        std::fs::write(
            root.join("ws/Cargo.toml"),
            "[workspace]\nmembers = [\"crates/a\"]\n",
        )
        .unwrap();
        std::fs::write(
            root.join("ws/crates/a/Cargo.toml"),
            "[package]\nname = \"a\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("py/pkg")).unwrap();
        std::fs::write(root.join("py/pyproject.toml"), "").unwrap();
        let markers = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let session = vec![root.clone()];
        assert_eq!(
            find_root(
                &root.join("ws/crates/a/src/lib.rs"),
                &markers(&["Cargo.toml"]),
                &session
            ),
            root.join("ws")
        );
        assert_eq!(
            find_root(
                &root.join("py/pkg/m.py"),
                &markers(&["pyproject.toml"]),
                &session
            ),
            root.join("py")
        );
        assert_eq!(
            find_root(
                &root.join("other/x.py"),
                &markers(&["pyproject.toml"]),
                &session
            ),
            root
        );
        // A marker above the session root is not used.
        std::fs::write(root.join("pyproject.toml"), "").unwrap();
        let inner = vec![root.join("py/pkg")];
        assert_eq!(
            find_root(&root.join("py/pkg/m.py"), &markers(&["setup.py"]), &inner),
            root.join("py/pkg")
        );
    }
}
