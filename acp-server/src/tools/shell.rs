//! The programs behind the shell tools: what runs a `bash` or `pwsh`
//! call's command line on this machine, and which of the two a session
//! offers without `[tools] enable`. The platforms differ here and only
//! here:
//!
//! - Linux and macOS offer `bash` (`bash -c LINE`); `pwsh` (`pwsh
//!   -Command LINE`, found on `PATH` when it runs) only when enabled.
//! - Windows offers `pwsh` where PowerShell is: PowerShell 7 (`pwsh.exe`
//!   on `PATH`, else in `%ProgramFiles%\PowerShell\7`), else Windows
//!   PowerShell 5.1 (`powershell.exe`). Without it, it offers `bash`:
//!   Git for Windows' `bash.exe` (beside `git.exe` on `PATH`, or where its
//!   installer puts it), else `cmd.exe /D /S /C LINE`, whose description
//!   then says that it is cmd. `bash.exe` is never looked up on `PATH`:
//!   System32's is WSL's, which runs in another machine's file system.
//!
//! What is found is looked up once per process.

use std::sync::OnceLock;

use super::Tool;
use crate::permission::Shell;

/// How a shell tool's command lines run.
#[derive(Debug)]
pub struct Launch {
    /// The tool.
    pub tool: Tool,
    /// The shell that reads the lines.
    pub shell: Shell,
    /// The program: a path, or a name looked up on `PATH`.
    pub program: String,
    /// Its arguments before the command line.
    pub args: &'static [&'static str],
}

/// PowerShell's arguments: no profile (a profile is the user's
/// interactive setup, and slow), no prompts (nothing answers them), the
/// machine's execution policy left as it is.
const POWERSHELL_ARGS: &[&str] = &["-NoLogo", "-NoProfile", "-NonInteractive", "-Command"];

impl Launch {
    /// Whether the editor's terminal may run its lines: ACP's
    /// `terminal/create` runs them with the client's `bash -c`, which is
    /// this launch only for Unix's `bash`.
    pub fn in_client_terminal(&self) -> bool {
        cfg!(unix) && self.shell == Shell::Bash
    }

    /// The language of a code block showing its lines.
    pub fn fence(&self) -> &'static str {
        match self.shell {
            Shell::Bash => "sh",
            Shell::PowerShell => "powershell",
            Shell::Cmd => "bat",
            Shell::Unknown => "",
        }
    }

    /// The variables that name the directory for temporary files.
    pub fn temp_variables(&self) -> &'static [&'static str] {
        if cfg!(windows) {
            &["TMPDIR", "TEMP", "TMP"]
        } else {
            &["TMPDIR"]
        }
    }
}

/// How `tool` (`bash`, or else `pwsh`) runs here.
pub fn launch(tool: Tool) -> &'static Launch {
    static BASH: OnceLock<Launch> = OnceLock::new();
    static PWSH: OnceLock<Launch> = OnceLock::new();
    if tool == Tool::Bash {
        BASH.get_or_init(platform::bash)
    } else {
        PWSH.get_or_init(|| Launch {
            tool: Tool::Pwsh,
            shell: Shell::PowerShell,
            program: platform::powershell().unwrap_or_else(|| "pwsh".to_owned()),
            args: POWERSHELL_ARGS,
        })
    }
}

/// Whether `tool` is the shell tool a session offers without `[tools]
/// enable`: Unix offers `bash`; Windows `pwsh` where PowerShell is, else
/// `bash`.
pub fn by_default(tool: Tool) -> bool {
    let powershell = cfg!(windows) && platform::powershell().is_some();
    match tool {
        Tool::Bash => !powershell,
        Tool::Pwsh => powershell,
        _ => false,
    }
}

#[cfg(unix)]
mod platform {
    use super::{Launch, Shell, Tool};

    pub fn bash() -> Launch {
        Launch {
            tool: Tool::Bash,
            shell: Shell::Bash,
            program: "bash".to_owned(),
            args: &["-c"],
        }
    }

    /// Not looked for: `pwsh` is found on `PATH` when a call runs.
    pub fn powershell() -> Option<String> {
        None
    }
}

#[cfg(windows)]
mod platform {
    use super::{Launch, Shell, Tool};
    use crate::programs;

    /// Git Bash, else cmd.
    pub fn bash() -> Launch {
        match programs::git_bash() {
            Some(bash) => Launch {
                tool: Tool::Bash,
                shell: Shell::Bash,
                program: bash.to_string_lossy().into_owned(),
                args: &["-c"],
            },
            None => Launch {
                tool: Tool::Bash,
                shell: Shell::Cmd,
                program: programs::cmd().to_string_lossy().into_owned(),
                // No AutoRun commands; the line taken as it is between
                // the quotes the spawn puts around it.
                args: &["/D", "/S", "/C"],
            },
        }
    }

    /// PowerShell 7, else Windows PowerShell 5.1.
    pub fn powershell() -> Option<String> {
        programs::powershell().map(|path| path.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shell_tool_is_the_default_and_each_launch_is_its_own() {
        assert_ne!(by_default(Tool::Bash), by_default(Tool::Pwsh));
        assert!(!by_default(Tool::Read));
        for tool in [Tool::Bash, Tool::Pwsh] {
            assert_eq!(launch(tool).tool, tool);
        }
        assert_eq!(launch(Tool::Pwsh).shell, Shell::PowerShell);
    }

    #[cfg(unix)]
    #[test]
    fn unix_runs_bash_c_and_offers_pwsh_only_when_enabled() {
        let bash = launch(Tool::Bash);
        assert_eq!((bash.program.as_str(), bash.args), ("bash", &["-c"][..]));
        assert_eq!(bash.shell, Shell::Bash);
        assert!(bash.in_client_terminal());
        let pwsh = launch(Tool::Pwsh);
        assert_eq!(pwsh.shell, Shell::PowerShell);
        assert_eq!(pwsh.args.last(), Some(&"-Command"));
        assert!(!pwsh.in_client_terminal());
        assert_eq!(pwsh.fence(), "powershell");
        assert!(by_default(Tool::Bash) && !by_default(Tool::Pwsh));
    }
}
