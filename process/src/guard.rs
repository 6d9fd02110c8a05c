//! The command guard: `dsh __guard [SANDBOX OPTIONS] -- PROGRAM ARGS…`.
//!
//! dsh runs each shell command under this small process instead of
//! directly. The guard marks itself a *child subreaper*, so every process
//! the command starts stays its descendant even when the command's shell
//! exits or a process calls `setsid` and leaves the process group. When the
//! command ends — or the guard gets SIGTERM, because the turn was cancelled,
//! the command timed out or dsh died — the guard kills every descendant,
//! reaps them, and exits with the command's status.
//!
//! What can still outlive a command: a process handed to another service
//! (cron, `at`, systemd, a D-Bus activated daemon, `ssh host …`), which is
//! not a descendant at all; and descendants of a guard killed with SIGKILL
//! before it could clean up (dsh sends SIGTERM first and SIGKILL only after
//! a grace period).
//!
//! The guard is synchronous and single-threaded: it blocks the signals it
//! handles and waits for them with `sigwait`, so no signal handler runs.

use std::ffi::OsString;

/// The hidden subcommand that runs the guard.
pub const ARG: &str = "__guard";

/// The guard's option (after the sandbox's, before `--`) for a command
/// run without a sandbox that must still not signal the guard: it enters
/// a Landlock domain of its own with the signal scope alone (see
/// [`crate::Spawner::contained`]).
pub const CONTAIN: &str = "--contain";

/// Runs the guard with the arguments after [`ARG`]; returns the exit code
/// for the process (on Unix a command killed by a signal is re-raised
/// instead).
pub fn main(mut args: Vec<OsString>) -> i32 {
    let sandbox = match crate::sandbox::Sandbox::from_args(&mut args) {
        Ok(sandbox) => sandbox,
        Err(err) => {
            eprintln!("dsh __guard: {err}");
            return 2;
        }
    };
    #[cfg(unix)]
    return unix::main(sandbox, args);
    #[cfg(windows)]
    {
        // Fail closed: dsh never asks for a sandbox here (probe says none).
        if sandbox.is_some() {
            eprintln!("dsh: the command was not run: dsh has no sandbox on Windows");
            return 125;
        }
        windows::main(args)
    }
}

#[cfg(unix)]
#[path = "guard/unix.rs"]
mod unix;
#[cfg(windows)]
#[path = "guard/windows.rs"]
mod windows;
