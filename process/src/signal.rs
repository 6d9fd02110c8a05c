//! Stopping children by meaning ([`Signal`]), per system: Unix signals to
//! a process or its group; on Windows a forced end of the tree
//! (`crate::windows`).

/// What dsh asks of a child it stops, by meaning. On Unix each is its
/// signal (SIGINT, SIGTERM, SIGKILL); Windows has no signals a console
/// program can be sent reliably, so every stop there forcibly ends the
/// process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Interrupt (SIGINT).
    Interrupt,
    /// Ask to terminate (SIGTERM).
    Terminate,
    /// Kill (SIGKILL).
    Kill,
}

#[cfg(unix)]
impl From<Signal> for nix::sys::signal::Signal {
    fn from(signal: Signal) -> Self {
        match signal {
            Signal::Interrupt => nix::sys::signal::Signal::SIGINT,
            Signal::Terminate => nix::sys::signal::Signal::SIGTERM,
            Signal::Kill => nix::sys::signal::Signal::SIGKILL,
        }
    }
}

/// Sends a signal to a whole process group (dsh starts every child as
/// the leader of one; on Windows, the process and its descendants); a
/// group that is already gone is fine. Group 0 (unknown) is never
/// signalled.
pub fn signal_group(pgid: u32, signal: Signal) {
    if pgid == 0 {
        return;
    }
    #[cfg(unix)]
    if let Err(err) = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid as i32),
        nix::sys::signal::Signal::from(signal),
    ) {
        if err != nix::errno::Errno::ESRCH {
            tracing::debug!(pgid, %err, "cannot signal process group");
        }
    }
    #[cfg(windows)]
    {
        let _ = signal;
        crate::windows::kill_tree(pgid);
    }
}

/// Sends a signal to one process (on Windows: forcibly ends it; its job,
/// if it is a guard, takes its tree along). Pid 0 is never signalled.
pub fn signal_process(pid: u32, signal: Signal) {
    if pid == 0 {
        return;
    }
    #[cfg(unix)]
    if let Err(err) = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::from(signal),
    ) {
        if err != nix::errno::Errno::ESRCH {
            tracing::debug!(pid, %err, "cannot signal process");
        }
    }
    #[cfg(windows)]
    {
        let _ = signal;
        crate::windows::terminate(pid);
    }
}

/// Kills a whole process group.
pub fn kill_group(pgid: u32) {
    signal_group(pgid, Signal::Kill);
}

/// The signal that ended a process, if one did (always `None` on
/// Windows, where a forced end is exit code 1).
pub fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(status);
    #[cfg(windows)]
    {
        let _ = status;
        None
    }
}
