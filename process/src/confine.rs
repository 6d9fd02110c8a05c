//! What every command the guard starts gets between `fork` and `exec`,
//! sandboxed or not:
//!
//! - **A session of its own** (`setsid`): no controlling terminal, so
//!   `/dev/tty` does not open and nothing can be typed into the terminal
//!   dsh was started from; a command's stdin is `/dev/null`, or, for a
//!   persistent terminal's shell, the pseudo-terminal dsh made for it
//!   (its controlling terminal: `crate::pty`), never dsh's own.
//! - **A seccomp filter** that refuses `ioctl(TIOCSTI)` (push input into a
//!   terminal) and `ioctl(TIOCLINUX)` (the console's selection and paste)
//!   with `EPERM`, for a terminal descriptor inherited some other way. The
//!   filter comes from `seccompiler` (rust-vmm's, as codex's Linux
//!   sandbox uses); it sets `no_new_privs`.
//! - **A bounding set without the dangerous capabilities**: a command run
//!   by root (or given a user namespace's full set) keeps only what
//!   ordinary file and process work needs — Docker's default set less
//!   `CAP_NET_RAW` and `CAP_MKNOD` — so it can never hold `CAP_SYS_MODULE`,
//!   `CAP_SYS_RAWIO`, `CAP_NET_ADMIN`, `CAP_SYS_ADMIN`, … after `exec`.
//!   Ambient capabilities are cleared.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Capabilities a command may keep (linux/capability.h numbers): CHOWN,
/// DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
/// NET_BIND_SERVICE, SYS_CHROOT, AUDIT_WRITE, SETFCAP.
pub const KEPT_CAPS: [u32; 12] = [0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31];

/// Everything the child needs, built before the fork (no allocation
/// after it).
pub struct Confinement {
    filter: Option<BpfProgram>,
    last_cap: u32,
}

impl Confinement {
    /// Builds the filter and reads the highest capability number.
    pub fn new() -> Confinement {
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(40);
        Confinement {
            filter: terminal_filter()
                .map_err(|err| eprintln!("dsh __guard: no seccomp filter ({err})"))
                .ok(),
            last_cap,
        }
    }

    /// Runs in the forked command, before exec: only system calls.
    ///
    /// # Errors
    /// The new session or the filter could not be set up.
    pub fn enter(&self) -> std::io::Result<()> {
        nix::unistd::setsid().map_err(std::io::Error::from)?;
        drop_capabilities(self.last_cap);
        if let Some(filter) = &self.filter {
            seccompiler::apply_filter(filter).map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

impl Default for Confinement {
    fn default() -> Self {
        Confinement::new()
    }
}

// The ioctl request constants are not u64 on every target.
#[allow(clippy::unnecessary_cast)]
fn terminal_filter() -> Result<BpfProgram, seccompiler::BackendError> {
    let arch = if cfg!(target_arch = "x86_64") {
        TargetArch::x86_64
    } else if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        TargetArch::riscv64
    };
    let request = |value: u64| -> Result<SeccompRule, seccompiler::BackendError> {
        SeccompRule::new(vec![SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            value,
        )?])
    };
    let rules = BTreeMap::from([(
        libc::SYS_ioctl,
        vec![
            request(libc::TIOCSTI as u64)?,
            request(libc::TIOCLINUX as u64)?,
        ],
    )]);
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?
    .try_into()
}

/// Drops every capability but [`KEPT_CAPS`] from the bounding set and
/// clears the ambient set. Without `CAP_SETPCAP` the drops fail, which is
/// fine: such a process has nothing to drop.
fn drop_capabilities(last_cap: u32) {
    for cap in (0..=last_cap).filter(|cap| !KEPT_CAPS.contains(cap)) {
        crate::child::drop_bounding(cap);
    }
    #[allow(unsafe_code)]
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forks `true` with `pty` as its controlling terminal; before exec it
    /// enters `confinement` (if any), then pushes a byte into the terminal.
    fn typed_into_terminal(confinement: Option<Confinement>) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let pty = nix::pty::openpty(None, None).expect("a pty");
        let slave = pty.slave.as_raw_fd();
        let mut command = std::process::Command::new("true");
        // SAFETY: system calls only between fork and exec.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                match &confinement {
                    Some(confinement) => confinement.enter()?,
                    None => {
                        nix::unistd::setsid()?;
                    }
                }
                if libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let byte = b'x';
                if libc::ioctl(slave, libc::TIOCSTI, &byte as *const u8) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command.status().map(drop)
    }

    #[test]
    fn the_filter_refuses_tiocsti() {
        let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
            .map(|text| text.trim() == "1")
            .unwrap_or(true);
        if legacy {
            // Where the kernel allows it at all, the plain child succeeds…
            typed_into_terminal(None).expect("TIOCSTI works without the filter");
        }
        // …and the confined one is refused.
        let refused = typed_into_terminal(Some(Confinement::new())).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
    }
}
