//! What runs in a child between `fork` and `exec`: the death signal, the
//! loss of `CAP_SYS_PTRACE`, and a clean signal state. Only raw system
//! calls here — no allocation, no locks — because dsh is multi-threaded and
//! the child is a copy of it with one thread.

/// Capabilities that let a process read another process's memory and
/// `/proc/<pid>/environ` even when it is non-dumpable: `CAP_SYS_PTRACE`,
/// and on current kernels also `CAP_SYS_ADMIN` and `CAP_PERFMON`
/// (linux/capability.h numbers).
#[cfg(target_os = "linux")]
const INSPECTION_CAPS: [u32; 3] = [19, 21, 38];

/// What a child gets when dsh dies (Linux's death signal; elsewhere the
/// child is still ended: see [`harden`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Death {
    /// SIGKILL: a plain child.
    Kill,
    /// SIGTERM: the guard, which then sweeps its command's tree.
    Terminate,
}

/// Prepares `command`'s child: it leads a process group of its own (on
/// Windows: a new console process group, no window), dies with dsh —
/// Linux: `death` as its death signal; Windows: dsh's kill-on-close job
/// ([`crate::windows`]); macOS has no such thing: children are ended on
/// dsh's orderly exits and the guard's sweeps only — cannot inspect dsh
/// (Linux: see [`drop_inspection_capabilities`]) and starts with no signal
/// blocked or ignored ([`reset_signals`]).
pub(crate) fn harden(command: &mut tokio::process::Command, death: Death) {
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(target_os = "linux")]
    linux_pre_exec(command, death);
    #[cfg(windows)]
    {
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        const CREATE_NO_WINDOW: u32 = 0x0800_0000;
        command.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW);
        crate::windows::die_with_dsh();
    }
    let _ = death;
}

#[cfg(target_os = "linux")]
fn linux_pre_exec(command: &mut tokio::process::Command, death: Death) {
    let death = match death {
        Death::Kill => nix::sys::signal::Signal::SIGKILL,
        Death::Terminate => nix::sys::signal::Signal::SIGTERM,
    };
    // SAFETY: the closure runs in the forked child before exec and only
    // makes async-signal-safe system calls (prctl, capget, capset,
    // getrlimit, setrlimit, rt_sigaction, sigprocmask);
    // it touches no memory shared with other threads of the parent.
    let nofile = crate::inherited_fd_limit();
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(death).map_err(std::io::Error::from)?;
            drop_inspection_capabilities();
            reset_signals()?;
            if let Some(soft) = nofile {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur > soft {
                    limit.rlim_cur = soft;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
            }
            Ok(())
        });
    }
}

/// Gives the process about to exec the signal state a program expects at
/// its start: every signal's action the default one (an ignored signal
/// would stay ignored across exec) and none blocked. The signal mask is
/// inherited across `fork` and `exec`, and std's `Command` does not clear
/// it: the guard blocks SIGHUP, SIGINT, SIGTERM and SIGCHLD to wait for
/// them, and without this its command could not be stopped by `kill`,
/// `timeout` or Ctrl-C. Call it between `fork` and `exec` only: it drops
/// the handlers of the process it runs in.
///
/// # Errors
/// The mask could not be set.
#[cfg(target_os = "linux")]
pub(crate) fn reset_signals() -> std::io::Result<()> {
    // The raw system call, because the C library refuses the signals it
    // keeps for its threads (32, 33), and those can be ignored too. An
    // all-zero kernel `struct sigaction` is the default action with no
    // flags and an empty mask whatever the architecture's field order;
    // the buffer is larger than any of them.
    let default = [0u64; 8];
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction reads a valid, zeroed buffer and writes
        // nothing (no old action asked for); it is async-signal-safe.
        // Signals the kernel does not have fail harmlessly (EINVAL).
        #[allow(unsafe_code)]
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                default.as_ptr(),
                std::ptr::null_mut::<u64>(),
                std::mem::size_of::<u64>(),
            );
        }
    }
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    )
    .map_err(std::io::Error::from)?;
    Ok(())
}

/// macOS: every catchable signal back to its default action, and none
/// blocked (the C library's `sigaction`; no hidden signals there).
#[cfg(target_os = "macos")]
pub(crate) fn reset_signals() -> std::io::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for signal in Signal::iterator() {
        if signal == Signal::SIGKILL || signal == Signal::SIGSTOP {
            continue;
        }
        // SAFETY: installs the default action; no handler runs.
        #[allow(unsafe_code)]
        unsafe {
            let _ = sigaction(signal, &default);
        }
    }
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&SigSet::empty()),
        None,
    )
    .map_err(std::io::Error::from)
}

/// Removes the [`INSPECTION_CAPS`] from this process's bounding, ambient
/// and inheritable sets, so nothing it executes can hold them. A child
/// running as root would otherwise read dsh's `/proc/<pid>/environ` (the
/// API key) although dsh is non-dumpable. Without privileges the calls fail
/// harmlessly: such a process cannot gain the capabilities anyway.
#[cfg(target_os = "linux")]
pub(crate) fn drop_inspection_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: plain system calls with valid pointers to local structs of
    // the layout the kernel expects (linux/capability.h, version 3).
    #[allow(unsafe_code)]
    unsafe {
        for cap in INSPECTION_CAPS {
            drop_bounding(cap);
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_LOWER as libc::c_ulong,
                cap as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            );
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        ) == 0
        {
            let mut changed = false;
            for cap in INSPECTION_CAPS {
                let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
                if data[word].inheritable & bit != 0 {
                    data[word].inheritable &= !bit;
                    changed = true;
                }
            }
            if changed {
                libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr());
            }
        }
    }
}

/// Removes `cap` from this process's bounding set, so nothing it executes
/// can hold it. Without `CAP_SETPCAP` it fails harmlessly: such a process
/// cannot gain the capability anyway.
#[cfg(target_os = "linux")]
pub(crate) fn drop_bounding(cap: u32) {
    // SAFETY: prctl with integer arguments only.
    #[allow(unsafe_code)]
    unsafe {
        libc::prctl(
            libc::PR_CAPBSET_DROP,
            cap as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}
