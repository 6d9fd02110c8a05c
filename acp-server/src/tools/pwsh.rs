//! `pwsh`: one fresh PowerShell (`pwsh -Command`) per call, no PTY — the
//! PowerShell side of `bash` (the catalog's `dsh-tool-pwsh`). Windows
//! offers it where PowerShell is found; elsewhere it is opt-in (`[tools]
//! enable = ["pwsh"]`). Calls run through `bash`'s executor (command
//! guard, timeouts, background jobs, output tail and spill file); what
//! differs is the program ([`super::shell`]), the descriptions here, and
//! the permission policy, which cannot parse PowerShell and so asks about
//! every line below full-access ([`crate::permission::Shell`]).

/// What every description says, before its platform's paths.
macro_rules! head {
    () => {
        "Execute a PowerShell command (pwsh -Command) and return its stdout/stderr. Each call runs in a fresh pwsh process: no state (cwd, variables, functions) persists between calls, so pass workdir instead of using cd. "
    };
}

/// What every description says after its platform's paths.
macro_rules! tail {
    () => {
        "A non-zero exit is reported as [exit code: N]. The current harness environment is exposed through managed $env:DSH_* variables; check them when needed. Commands may run in a file sandbox; a blocked file operation is reported as [sandbox: file access denied under <mode> mode], which is a policy denial, not a defect of the command: do not retry it another way. Long output is truncated, keeping only its tail; when available, the full output is saved to a file and its path is reported."
    };
}

/// Windows: the seed's words.
#[cfg(windows)]
macro_rules! paths {
    () => {
        "Paths are in native Windows form (C:\\...); read environment variables with $env:NAME. "
    };
}

#[cfg(not(windows))]
macro_rules! paths {
    () => {
        "Paths are this system's native paths (/...); read environment variables with $env:NAME. "
    };
}

/// A forced stop on Windows leaves exit code 1 and no signal.
#[cfg(windows)]
macro_rules! killed {
    () => {
        " On Windows, a command that is forcibly stopped settles as [exit code: 1] with no signal marker: treat it as an interruption, not a failure of the command."
    };
}

#[cfg(not(windows))]
macro_rules! killed {
    () => {
        ""
    };
}

/// With background jobs.
pub const DESCRIPTION: &str = concat!(
    head!(),
    paths!(),
    tail!(),
    killed!(),
    " For long-running commands set run_in_background: true: the call returns a job id immediately; read its output with job_output and stop it with job_kill."
);

/// Without background jobs (`[jobs] enabled = false`): the parameter is
/// not offered, and the description does not mention it.
pub const DESCRIPTION_NO_JOBS: &str = concat!(head!(), paths!(), tail!(), killed!());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptions_differ_in_the_background_jobs_alone() {
        assert!(DESCRIPTION.starts_with(DESCRIPTION_NO_JOBS));
        assert!(
            DESCRIPTION.contains("run_in_background")
                && !DESCRIPTION_NO_JOBS.contains("run_in_background")
        );
        assert!(DESCRIPTION.contains("$env:NAME"));
    }
}
