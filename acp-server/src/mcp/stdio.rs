//! A stdio server's process. It runs under the command guard (`dsh
//! __guard`, a child subreaper, like shell commands), so everything the
//! server starts — the real server behind an `npx` or `uvx` launcher, its
//! helpers, `setsid` daemons in sessions of their own — stays below the
//! guard and is killed when the server exits (before a restart), when the
//! session closes or dsh exits, and when dsh dies (the guard's death
//! signal). It is contained like a hook (`Spawner::contained`): it keeps
//! the user's rights but cannot signal anything outside itself, so it
//! cannot kill its guard to leave its children behind. The transport is the server's stdin and stdout; rmcp caps one
//! incoming message at 16 MiB.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::{ChildStdin, ChildStdout};

/// How long a server whose stdin was closed may take to exit by itself.
const EOF_GRACE: Duration = Duration::from_millis(300);
/// How long the guard may take to sweep after SIGTERM before its group
/// is killed.
const SWEEP_GRACE: Duration = Duration::from_secs(2);

/// The guard and the server under it. Dropped while it runs, the guard
/// gets SIGTERM (and sweeps); [`Process::stop`] also waits for it.
pub struct Process {
    child: tokio::process::Child,
    pgid: u32,
}

/// What a started server gives: its process and its stdio.
pub struct Started {
    /// The process, to stop.
    pub process: Process,
    /// The server's stdout.
    pub stdout: ChildStdout,
    /// The server's stdin.
    pub stdin: ChildStdin,
}

/// Starts `command args…` in `cwd` under the guard, its stdin and stdout
/// piped, stderr discarded, `env` over the scrubbed environment.
pub fn start(
    spawner: &dsh_process::Spawner,
    command: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: &Path,
) -> Result<Started, String> {
    // The guard would only exit 127: say here what is missing.
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    let program = resolve(command, &path, cwd)
        .ok_or_else(|| format!("cannot start {command}: no such program"))?;
    let program = program.to_string_lossy().into_owned();
    // Contained: it cannot signal its guard away and leave its children.
    let mut cmd = spawner.contained(&program, args);
    cmd.current_dir(cwd)
        .envs(env.iter().cloned())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        // SIGKILL would leave the guard no time to sweep: Drop sends SIGTERM.
        .kill_on_drop(false);
    let mut child = cmd
        .spawn()
        .map_err(|err| format!("cannot start {command}: {err}"))?;
    let pgid = child.id().unwrap_or(0);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(format!("cannot start {command}: no pipes"));
    };
    Ok(Started {
        process: Process { child, pgid },
        stdout,
        stdin,
    })
}

/// The executable `command` names: a path (relative to `cwd`) or a name
/// on `path`.
fn resolve(command: &str, path: &str, cwd: &Path) -> Option<PathBuf> {
    let runnable = |candidate: &Path| {
        std::fs::metadata(candidate)
            .is_ok_and(|meta| meta.is_file() && crate::private::is_runnable(&meta))
    };
    let separator = |c: char| c == '/' || (cfg!(windows) && c == '\\');
    if command.contains(separator) {
        let candidate = cwd.join(command);
        return executable_names(&candidate).find(|candidate| runnable(candidate));
    }
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .flat_map(|dir| executable_names(&dir.join(command)).collect::<Vec<_>>())
        .find(|candidate| runnable(candidate))
}

/// The files `candidate` may name as a program: itself; on Windows, when
/// it has no extension, it with each of `PATHEXT`'s instead (`node` is
/// `node.exe`, `npx` is `npx.cmd`).
fn executable_names(candidate: &Path) -> impl Iterator<Item = PathBuf> {
    // Windows runs only what has an extension: an extensionless `npx`
    // beside `npx.cmd` is a shell script CreateProcess cannot start.
    let bare = !cfg!(windows) || candidate.extension().is_some();
    let mut names = if bare {
        vec![candidate.to_path_buf()]
    } else {
        Vec::new()
    };
    if cfg!(windows) && candidate.extension().is_none() {
        let extensions =
            std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".to_owned());
        names.extend(
            extensions
                .split(';')
                .filter(|extension| extension.starts_with('.') && extension.len() > 1)
                .map(|extension| {
                    let mut name = candidate.as_os_str().to_owned();
                    name.push(extension.to_ascii_lowercase());
                    PathBuf::from(name)
                }),
        );
    }
    names.into_iter()
}

impl Process {
    /// Stops the server and everything it started. Its stdin is closed
    /// first (the transport was dropped): a server that exits on EOF gets
    /// [`EOF_GRACE`]; then the guard gets SIGTERM and kills the tree.
    pub async fn stop(mut self) {
        if tokio::time::timeout(EOF_GRACE, self.child.wait())
            .await
            .is_err()
        {
            dsh_process::stop_guarded(&mut self.child, self.pgid, SWEEP_GRACE).await;
        }
        // Without a guard, the group is all there is to clean up.
        dsh_process::kill_group(self.pgid);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Still unreaped (or running), so the pid is still the guard's.
        if let (Ok(None), Some(pid)) = (self.child.try_wait(), self.child.id()) {
            dsh_process::signal_process(pid, dsh_process::Signal::Terminate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn programs_are_found_on_the_path_or_by_path() {
        let cwd = Path::new("/");
        assert_eq!(
            resolve("sh", "relative:/usr/bin:/bin", cwd).map(|p| p.is_absolute()),
            Some(true)
        );
        assert_eq!(resolve("no-such-program-here", "/usr/bin:/bin", cwd), None);
        assert_eq!(resolve("bin/sh", "", cwd), Some(PathBuf::from("/bin/sh")));
        assert_eq!(resolve("/nonexistent/mcp-server", "/bin", cwd), None);
    }

    /// Windows: a name without an extension is found with `PATHEXT`'s
    /// (`node` → `node.exe`, `npx` → `npx.cmd`), on the path or by path.
    #[test]
    #[cfg(windows)]
    fn programs_are_found_with_their_windows_extensions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tool.exe"), "").unwrap();
        std::fs::write(dir.path().join("server.cmd"), "").unwrap();
        let path = dir.path().to_str().unwrap();
        let found = |name: &str| resolve(name, path, Path::new("C:\\"));
        assert_eq!(found("tool"), Some(dir.path().join("tool.exe")));
        assert_eq!(found("server"), Some(dir.path().join("server.cmd")));
        assert_eq!(found("missing"), None);
        let by_path = dir.path().join("tool");
        assert_eq!(
            resolve(by_path.to_str().unwrap(), "", Path::new("C:\\")),
            Some(dir.path().join("tool.exe"))
        );
    }
}
