//! The one maker of spill files, background jobs' (`job-<n>.log`) and
//! tool calls' (`crate::tools::spill`): the session's spill directory is
//! created 0700 if needed, the file 0600 and only if it does not exist
//! (never through a planted file or link).

use std::path::{Path, PathBuf};

/// Job `number`'s spill file in `dir`.
pub fn job_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("job-{number}.log"))
}

/// Creates the spill file `path` (blocking).
pub fn create(path: &Path) -> Result<std::fs::File, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::private::create_dir_all(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
    let open = || {
        crate::private::options()
            .write(true)
            .create_new(true)
            .open(path)
    };
    match open() {
        // The start-up sweep removed the emptied directory just now.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            crate::private::create_dir_all(dir).and_then(|()| open())
        }
        opened => opened,
    }
    .map_err(|err| format!("{}: {err}", path.display()))
}

/// [`create`], or — when the name is taken (a job of the same number in an
/// earlier process of the session) — the first free `<stem>.<k>.<ext>`:
/// the file and its path.
pub fn create_fresh(path: &Path) -> Result<(std::fs::File, PathBuf), String> {
    let mut first_error = None;
    for k in 1..=64u32 {
        let candidate = if k == 1 {
            path.to_path_buf()
        } else {
            let stem = path.file_stem().unwrap_or_default().to_string_lossy();
            let ext = path.extension().unwrap_or_default().to_string_lossy();
            path.with_file_name(format!("{stem}.{k}.{ext}"))
        };
        match create(&candidate) {
            Ok(file) => return Ok((file, candidate)),
            Err(err) => {
                let taken = std::fs::symlink_metadata(&candidate).is_ok();
                first_error.get_or_insert(err);
                if !taken {
                    break;
                }
            }
        }
    }
    Err(first_error.unwrap_or_default())
}

/// [`create_fresh`] off the async workers, as a Tokio file.
pub async fn open(path: &Path) -> Result<(tokio::fs::File, PathBuf), String> {
    let owned = path.to_path_buf();
    let (file, path) = tokio::task::spawn_blocking(move || create_fresh(&owned))
        .await
        .map_err(|err| err.to_string())??;
    Ok((tokio::fs::File::from_std(file), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's number restarts in a new process of the session: its file
    /// from an earlier run is left and the new one gets the next name.
    #[test]
    fn a_taken_job_name_gets_the_next_free_one() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("s1");
        let path = job_path(&spill, 1);
        let (_, first) = create_fresh(&path).unwrap();
        let (_, second) = create_fresh(&path).unwrap();
        assert_eq!(first, path);
        assert_eq!(second, spill.join("job-1.2.log"));
        // Not through a link either: a planted one is passed over.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/passwd", spill.join("job-2.log")).unwrap();
            let (_, third) = create_fresh(&job_path(&spill, 2)).unwrap();
            assert_eq!(third, spill.join("job-2.2.log"));
        }
    }
}
