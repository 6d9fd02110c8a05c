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
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| format!("{}: {err}", dir.display()))?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|err| format!("{}: {err}", path.display()))
}

/// [`create`] off the async workers, as a Tokio file.
pub async fn open(path: &Path) -> Result<tokio::fs::File, String> {
    let owned = path.to_path_buf();
    let file = tokio::task::spawn_blocking(move || create(&owned))
        .await
        .map_err(|err| err.to_string())??;
    Ok(tokio::fs::File::from_std(file))
}
