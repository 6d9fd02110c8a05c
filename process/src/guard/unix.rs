//! The guard on Linux and macOS: a process group it leads, the signals it
//! waits for, the sweep of the command's tree. Linux adds the subreaper,
//! the namespaces and Landlock; macOS runs a sandboxed command under
//! Seatbelt (`sandbox-exec`) and, having no subreaper, sweeps the tree and
//! the group as they are when the command ends (a `setsid` process whose
//! parent already exited has left both).

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::CONTAIN;
use crate::sandbox::Sandbox;

/// The guard on Linux and macOS (see the parent module).
pub(super) fn main(sandbox: Option<Sandbox>, mut args: Vec<OsString>) -> i32 {
    let contain = args.first().is_some_and(|arg| arg == CONTAIN);
    if contain {
        args.remove(0);
    }
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|arg| arg == "--") {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!("dsh __guard: usage: dsh __guard -- PROGRAM [ARGS…]");
        return 2;
    };
    // Lead a process group of our own, so "the group" below is this guard
    // and what it starts, never whoever started the guard (dsh starts it as
    // a group leader already; run by hand it may not be one).
    let me = nix::unistd::getpid();
    if nix::unistd::getpgrp() != me {
        if let Err(err) = nix::unistd::setpgid(me, me) {
            eprintln!("dsh __guard: cannot lead a process group ({err}); only direct descendants will be cleaned up");
        }
    }
    #[cfg(target_os = "linux")]
    {
        if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
            eprintln!("dsh __guard: cannot become a subreaper ({err}); background processes may outlive the command");
        }
    }
    // Fail closed: a command that asked for a sandbox never runs without.
    #[cfg(target_os = "linux")]
    let (sandboxed, mut command) =
        match linux::command(sandbox.as_ref(), contain, program.clone(), args) {
            Ok(ready) => ready,
            Err(code) => return code,
        };
    #[cfg(target_os = "macos")]
    let (sandboxed, mut command) = macos::command(sandbox.as_ref(), program.clone(), args);
    let mut handled = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        handled.add(signal);
    }
    if let Err(err) = handled.thread_block() {
        eprintln!("dsh __guard: cannot block signals: {err}");
        return 125;
    }
    // The command must not inherit that mask (std keeps it across exec):
    // it is cleared in the child (`reset_signals`, in the pre-exec hook).
    #[cfg(target_os = "macos")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: the guard is single-threaded, so the forked child may
        // allocate; it only makes system calls (sigaction, sigprocmask,
        // setsid) before exec.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(|| {
                crate::child::reset_signals()?;
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                crate::pty::adopt_stdin_terminal();
                Ok(())
            });
        }
    }
    let main_pid = match command.spawn() {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(err) if sandboxed && err.kind() != std::io::ErrorKind::NotFound => {
            eprintln!("dsh: the command was not run: its sandbox could not be applied ({err})");
            return 125;
        }
        Err(err) => {
            eprintln!("dsh: cannot run {}: {err}", program.to_string_lossy());
            return 127;
        }
    };
    let status = loop {
        let signal = match handled.wait() {
            Ok(signal) => signal,
            Err(_) => continue,
        };
        if signal != Signal::SIGCHLD {
            // Stopped from outside: take everything down.
            kill_descendants();
            return 128 + signal as i32;
        }
        if let Some(status) = reap_exited()
            .into_iter()
            .find(|status| status.pid() == Some(main_pid))
        {
            break status;
        }
    };
    kill_descendants();
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, signal, _) => {
            // Die the same way, so dsh reports the signal, not a code.
            let _ = handled.thread_unblock();
            let _ = nix::sys::signal::raise(signal);
            128 + signal as i32
        }
        _ => 1,
    }
}

/// Reaps every child that has exited (or was killed); returns their
/// statuses.
fn reap_exited() -> Vec<WaitStatus> {
    let mut reaped = Vec::new();
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return reaped,
            Ok(status @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => reaped.push(status),
            Ok(_) => {}
        }
    }
}

/// Kills every live descendant — the whole tree below the guard (found by
/// parent links in one scan of `/proc`, so a chain of `setsid` processes
/// goes in one round, not one generation per round) and the other members
/// of the process group it leads — until none is left and every child is
/// reaped. Orphans land here (the guard is a subreaper), so membership is
/// the tree; only a time budget ends the sweep early.
fn kill_descendants() {
    let me = std::process::id() as i32;
    // Only a group this guard leads is its own to empty.
    let group = Some(nix::unistd::getpgrp().as_raw()).filter(|group| *group == me);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let table = processes();
        let mut tree = vec![me];
        let mut at = 0;
        while at < tree.len() {
            let parent = tree[at];
            let children: Vec<i32> = table
                .iter()
                .filter(|p| p.ppid == parent && p.pid != me && !tree.contains(&p.pid))
                .map(|p| p.pid)
                .collect();
            tree.extend(children);
            at += 1;
        }
        let targets: Vec<i32> = table
            .iter()
            .filter(|p| p.pid != me && p.state != 'Z')
            .filter(|p| tree.contains(&p.pid) || Some(p.pgrp) == group)
            .map(|p| p.pid)
            .collect();
        reap_exited();
        if targets.is_empty() {
            if matches!(
                waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)),
                Err(nix::errno::Errno::ECHILD)
            ) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for pid in targets {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("dsh __guard: processes were still starting after 30 s of cleanup; gave up");
}

/// One line of `/proc/<pid>/stat`.
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    state: char,
}

#[cfg(target_os = "linux")]
/// Every process, from `/proc/<pid>/stat`.
fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) state ppid pgrp …"; comm may hold spaces and ')'.
            let rest = &stat[stat.rfind(')')? + 1..];
            let mut fields = rest.split_whitespace();
            let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
            let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            let pgrp = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            Some(Proc {
                pid,
                ppid,
                pgrp,
                state,
            })
        })
        .collect()
}

/// Every process, from the kernel's process list (libproc).
#[cfg(target_os = "macos")]
fn processes() -> Vec<Proc> {
    // SAFETY: the buffers are sized as the calls are told; a short read
    // (processes came and went) is truncated to what was written.
    #[allow(unsafe_code)]
    unsafe {
        let count = libc::proc_listallpids(std::ptr::null_mut(), 0);
        if count <= 0 {
            return Vec::new();
        }
        let mut pids = vec![0 as libc::pid_t; count as usize + 64];
        let bytes = (pids.len() * std::mem::size_of::<libc::pid_t>()) as libc::c_int;
        let listed = libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes);
        pids.truncate(listed.max(0) as usize);
        pids.into_iter()
            .filter(|pid| *pid > 0)
            .filter_map(|pid| {
                let mut info: libc::proc_bsdinfo = std::mem::zeroed();
                let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
                let got = libc::proc_pidinfo(
                    pid,
                    libc::PROC_PIDTBSDINFO,
                    0,
                    (&raw mut info).cast(),
                    size,
                );
                (got == size).then_some(Proc {
                    pid,
                    ppid: info.pbi_ppid as i32,
                    pgrp: info.pbi_pgid as i32,
                    state: if info.pbi_status == libc::SZOMB {
                        'Z'
                    } else {
                        'R'
                    },
                })
            })
            .collect()
    }
}

/// Linux: the namespaces and the Landlock ruleset prepared in the guard,
/// entered by the command after the fork; the signal scope for contained
/// commands; the death signal.
#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;

    use nix::sys::signal::Signal;

    use crate::sandbox::Sandbox;

    /// The command, ready to spawn, and whether it is sandboxed; `Err`
    /// holds the guard's exit code when the sandbox cannot be applied.
    pub(super) fn command(
        sandbox: Option<&Sandbox>,
        contain: bool,
        program: OsString,
        args: impl Iterator<Item = OsString>,
    ) -> Result<(bool, std::process::Command), i32> {
        // The guard enters the namespaces; only the command enters Landlock.
        let mut prepared = match sandbox.map(Sandbox::prepare) {
            None => None,
            Some(Ok(prepared)) => Some(prepared),
            Some(Err(err)) => {
                eprintln!("dsh: the command was not run: its sandbox could not be applied ({err})");
                return Err(125);
            }
        };
        let sandboxed = prepared.is_some();
        let confinement = sandboxed.then(crate::confine::Confinement::new);
        // A contained command without a sandbox: the signal scope alone keeps
        // it from killing this guard (a sandbox has it already). Where the
        // kernel has none, it runs as a plain guarded command.
        let mut scope = (contain && !sandboxed)
            .then(crate::sandbox::signal_scope)
            .flatten();
        // After the sandbox: a new user namespace starts with every capability.
        crate::child::drop_inspection_capabilities();
        let mut command = std::process::Command::new(&program);
        command.args(args);
        if prepared.as_ref().is_some_and(|prepared| prepared.mounts) {
            // dsh said how the command is sandboxed; the guard knows one more
            // thing: the mount namespace is in place.
            let said = std::env::var("DSH_SANDBOX").unwrap_or_else(|_| "files".to_owned());
            command.env("DSH_SANDBOX", format!("{said},mounts"));
        }
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the guard is single-threaded, so the forked child may
            // allocate; it only makes system calls (setsid, prctl,
            // rt_sigaction, sigprocmask, seccomp, landlock) before exec.
            #[allow(unsafe_code)]
            unsafe {
                command.pre_exec(move || {
                    // It dies with the guard, whoever kills the guard.
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                        .map_err(std::io::Error::from)?;
                    // Signals blocked for the guard's sigwait are the guard's.
                    crate::child::reset_signals()?;
                    match &confinement {
                        Some(confinement) => confinement.enter()?,
                        None => {
                            nix::unistd::setsid().map_err(std::io::Error::from)?;
                        }
                    }
                    // A terminal's shell (`crate::pty`): its controlling terminal.
                    crate::pty::adopt_stdin_terminal();
                    if let Some(prepared) = prepared.as_mut().or(scope.as_mut()) {
                        prepared.restrict()?;
                    }
                    Ok(())
                });
            }
        }
        Ok((sandboxed, command))
    }
}

/// macOS: a sandboxed command runs under Seatbelt, `sandbox-exec` with
/// the profile generated from the same policy ([`crate::sandbox::seatbelt`]).
#[cfg(target_os = "macos")]
mod macos {
    use std::ffi::OsString;

    use crate::sandbox::Sandbox;

    /// The command, ready to spawn, and whether it is sandboxed.
    pub(super) fn command(
        sandbox: Option<&Sandbox>,
        program: OsString,
        args: impl Iterator<Item = OsString>,
    ) -> (bool, std::process::Command) {
        let args: Vec<OsString> = args.collect();
        match sandbox {
            Some(sandbox) => {
                // Seatbelt matches resolved paths: each is given canonical.
                // Read-only paths that do not exist are left out, as the
                // Linux mounts hold only what exists when the command starts.
                let canonical = |path: &std::path::PathBuf| path.canonicalize().ok();
                let resolved = Sandbox {
                    writable: sandbox
                        .writable
                        .iter()
                        .map(|path| canonical(path).unwrap_or_else(|| path.clone()))
                        .collect(),
                    hidden: sandbox
                        .hidden
                        .iter()
                        .map(|path| canonical(path).unwrap_or_else(|| path.clone()))
                        .collect(),
                    read_only: sandbox.read_only.iter().filter_map(canonical).collect(),
                    network: sandbox.network,
                };
                let mut command =
                    std::process::Command::new(crate::sandbox::seatbelt::SANDBOX_EXEC);
                command.args(crate::sandbox::seatbelt::command_args(
                    &resolved, &program, &args,
                ));
                (true, command)
            }
            None => {
                let mut command = std::process::Command::new(&program);
                command.args(args);
                (false, command)
            }
        }
    }
}
