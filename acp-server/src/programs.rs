//! Where this system's shells are: what the shell tools and hooks run.
//! Unix has `sh` and `bash` on `PATH`; Windows has none of them by name,
//! so each is looked for where its installer puts it, and only on
//! absolute `PATH` entries — never `bash.exe` on `PATH` (System32's is
//! WSL's, which runs in another machine's file system).

use std::path::PathBuf;

/// The POSIX shell hooks run with (`sh -c`): `sh` on Unix; Git for
/// Windows' `bash.exe` on Windows, where there may be none.
pub fn posix_shell() -> Option<PathBuf> {
    #[cfg(unix)]
    return Some(PathBuf::from("sh"));
    #[cfg(windows)]
    windows::git_bash()
}

#[cfg(windows)]
pub use windows::{cmd, git_bash, powershell};

#[cfg(windows)]
mod windows {
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    /// PowerShell 7, else Windows PowerShell 5.1.
    pub fn powershell() -> Option<PathBuf> {
        static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                on_path("pwsh.exe")
                    .or_else(|| under("ProgramFiles", r"PowerShell\7\pwsh.exe"))
                    .or_else(|| on_path("powershell.exe"))
                    .or_else(|| {
                        under(
                            "SystemRoot",
                            r"System32\WindowsPowerShell\v1.0\powershell.exe",
                        )
                    })
            })
            .clone()
    }

    /// Git for Windows' `bin\bash.exe` (which sets up its `PATH`, unlike
    /// `usr\bin\bash.exe`): two levels above `cmd\git.exe`, or in an
    /// installer's directory.
    /// Looked for once per process (hooks ask at every event).
    pub fn git_bash() -> Option<PathBuf> {
        static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                on_path("git.exe")
                    .and_then(|git| Some(git.parent()?.parent()?.join(r"bin\bash.exe")))
                    .filter(|bash| bash.is_file())
                    .or_else(|| under("ProgramFiles", r"Git\bin\bash.exe"))
                    .or_else(|| under("ProgramW6432", r"Git\bin\bash.exe"))
                    .or_else(|| under("ProgramFiles(x86)", r"Git\bin\bash.exe"))
                    .or_else(|| under("LOCALAPPDATA", r"Programs\Git\bin\bash.exe"))
            })
            .clone()
    }

    /// cmd.exe: `%ComSpec%`, else System32's.
    pub fn cmd() -> PathBuf {
        std::env::var_os("ComSpec")
            .map(PathBuf::from)
            .filter(|cmd| cmd.is_file())
            .or_else(|| under("SystemRoot", r"System32\cmd.exe"))
            .unwrap_or_else(|| PathBuf::from("cmd.exe"))
    }

    /// `name` in the first directory of `PATH` that has it.
    fn on_path(name: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    }

    /// `relative` under the directory the variable `dir` names, if it is
    /// a file.
    fn under(dir: &str, relative: &str) -> Option<PathBuf> {
        let dir = std::env::var_os(dir)?;
        Some(Path::new(&dir).join(relative)).filter(|file| file.is_file())
    }
}
