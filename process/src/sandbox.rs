//! The kernel sandbox for shell commands: one policy, one enforcement per
//! system.
//!
//! dsh describes what a command may do as a [`Sandbox`]: the paths it may
//! write, the paths it may not even read, and whether it may use the
//! network. The command guard (`dsh __guard`, see [`crate::guard`]) applies
//! it before it starts the command, so the command and everything it
//! starts inherit it. **macOS** runs the command under Seatbelt
//! (`sandbox-exec` with a profile generated from the policy,
//! [`seatbelt`]); **Windows** has none ([`probe`] says so, and dsh
//! asks instead). **Linux** (`sandbox/linux.rs`):
//!
//! - **Files: Landlock.** Everything is readable and executable except the
//!   hidden paths; only the writable paths (and a few devices such as
//!   `/dev/null`) can be written — and of those, not the read-only paths
//!   beneath them, which the mount namespace (`mounts.rs`) holds.
//!   Landlock only grants, so "all but `~/.ssh`" is built from the
//!   siblings of each hidden path and of its ancestors; an entry created
//!   after the command starts in one of those ancestors (a new file
//!   directly in `$HOME`) is not readable by it.
//! - **Network: a network namespace,** a new empty one (only a loopback
//!   that reaches itself), entered through an unprivileged user namespace
//!   that maps the caller's own uid and gid. That stops TCP, UDP (DNS) and
//!   abstract Unix sockets alike. Where user namespaces are not allowed,
//!   Landlock's network rules (ABI 4+) stop TCP `connect` and `bind`, and
//!   its scopes (ABI 6+) abstract Unix sockets; UDP then still works.
//! - **Signals:** (ABI 6+) a command cannot signal processes outside its
//!   sandbox — dsh, the editor, the user's other programs.
//!
//! [`probe`] tells dsh whether the kernel can do this at all, so it can say
//! so once and let the configuration decide.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

#[cfg(target_os = "linux")]
#[path = "sandbox/linux.rs"]
mod platform;
#[path = "sandbox/seatbelt.rs"]
pub mod seatbelt;
#[cfg(target_os = "linux")]
pub(crate) use platform::signal_scope;
#[cfg(target_os = "linux")]
pub use platform::Prepared;

/// macOS: Seatbelt (`sandbox-exec`, [`seatbelt`]), applied by the
/// guard around the command.
#[cfg(target_os = "macos")]
mod platform {
    pub(super) fn probe() -> super::Support {
        let files = std::path::Path::new(super::seatbelt::SANDBOX_EXEC).exists();
        super::Support {
            files,
            network: files,
        }
    }
}

/// Elsewhere (Windows) dsh has no sandbox: commands in modes that would be
/// sandboxed ask instead (docs/platforms.md).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod platform {
    pub(super) fn probe() -> super::Support {
        super::Support {
            files: false,
            network: false,
        }
    }
}

/// What a sandboxed command may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Paths it may write (and everything beneath them).
    pub writable: Vec<PathBuf>,
    /// Paths it may not read or write, even beneath a writable path.
    pub hidden: Vec<PathBuf>,
    /// Paths beneath a writable path it may read but not change, where
    /// they exist when it starts (each bound read-only onto itself: no
    /// write, no new entry inside, no rename or delete); a link is
    /// followed to what it names inside a writable path. Held by the
    /// mount namespace: where there is none, they stay writable.
    pub read_only: Vec<PathBuf>,
    /// Whether it may use the network.
    pub network: bool,
}

/// What the running kernel can enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Landlock can restrict files.
    pub files: bool,
    /// Commands can be kept off the network (a network namespace, or at
    /// least Landlock's TCP rules).
    pub network: bool,
}

impl Support {
    /// A one-line description, for the user.
    pub fn describe(self) -> &'static str {
        match (self.files, self.network) {
            (true, true) => "files and network",
            (true, false) => "files only (this kernel cannot keep commands off the network)",
            (false, _) if cfg!(target_os = "linux") => "none (this kernel has no usable Landlock)",
            (false, _) if cfg!(target_os = "macos") => "none (no /usr/bin/sandbox-exec)",
            (false, _) => "none (dsh has no sandbox on this system)",
        }
    }
}

/// What this system can enforce, checked once (nothing is restricted).
pub fn probe() -> Support {
    static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
    *SUPPORT.get_or_init(platform::probe)
}

impl Sandbox {
    /// The guard's arguments that carry this sandbox (before `--`).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        for path in &self.writable {
            args.push(OsString::from("--write"));
            args.push(path.as_os_str().to_owned());
        }
        for path in &self.hidden {
            args.push(OsString::from("--hide"));
            args.push(path.as_os_str().to_owned());
        }
        for path in &self.read_only {
            args.push(OsString::from("--read-only"));
            args.push(path.as_os_str().to_owned());
        }
        if !self.network {
            args.push(OsString::from("--no-network"));
        }
        args
    }

    /// Reads the arguments [`Sandbox::to_args`] wrote from the front of
    /// `args`; `None` when there are none (no sandbox).
    ///
    /// # Errors
    /// An option without its value.
    pub fn from_args(args: &mut Vec<OsString>) -> Result<Option<Sandbox>, String> {
        let mut sandbox = Sandbox {
            network: true,
            ..Sandbox::default()
        };
        let mut seen = false;
        let mut at = 0;
        while at < args.len() {
            let flag = args[at].clone();
            let value = |at: usize| {
                args.get(at + 1)
                    .map(PathBuf::from)
                    .ok_or_else(|| format!("{} needs a path", flag.to_string_lossy()))
            };
            if flag == OsStr::new("--write") {
                sandbox.writable.push(value(at)?);
                at += 2;
            } else if flag == OsStr::new("--hide") {
                sandbox.hidden.push(value(at)?);
                at += 2;
            } else if flag == OsStr::new("--read-only") {
                sandbox.read_only.push(value(at)?);
                at += 2;
            } else if flag == OsStr::new("--no-network") {
                sandbox.network = false;
                at += 1;
            } else {
                break;
            }
            seen = true;
        }
        args.drain(..at);
        Ok(seen.then_some(sandbox))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_and_stop_at_the_command() {
        let sandbox = Sandbox {
            writable: vec!["/w 1".into(), "/tmp/x".into()],
            hidden: vec!["/home/u/.ssh".into()],
            read_only: vec!["/w 1/.git/hooks".into(), "/w 1/AGENTS.md".into()],
            network: false,
        };
        let mut args = sandbox.to_args();
        args.push("--".into());
        args.push("bash".into());
        assert_eq!(Sandbox::from_args(&mut args).unwrap(), Some(sandbox));
        assert_eq!(args, vec![OsString::from("--"), "bash".into()]);
        let mut none = vec![OsString::from("--"), "bash".into()];
        assert_eq!(Sandbox::from_args(&mut none).unwrap(), None);
        let mut broken = vec![OsString::from("--write")];
        assert!(Sandbox::from_args(&mut broken).is_err());
    }
}
