//! The kernel sandbox for shell commands (Linux).
//!
//! dsh describes what a command may do as a [`Sandbox`]: the paths it may
//! write, the paths it may not even read, and whether it may use the
//! network. The command guard (`dsh __guard`, see [`crate::guard`]) applies
//! it to itself before it starts the command, so the command and
//! everything it starts inherit it:
//!
//! - **Files: Landlock.** Everything is readable and executable except the
//!   hidden paths; only the writable paths (and a few devices such as
//!   `/dev/null`) can be written — and of those, not the read-only paths
//!   beneath them, which the mount namespace ([`crate::mounts`]) holds.
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

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

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

/// Devices every command may write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// The Landlock ABI the sandbox is written for; newer kernels get this, an
/// older one what it supports (see [`probe`]).
const ABI_TARGET: ABI = ABI::V6;

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
            (false, _) => "none (this kernel has no usable Landlock)",
        }
    }
}

/// What the kernel supports, checked once (a ruleset is created and
/// dropped; nothing is restricted).
pub fn probe() -> Support {
    static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let hard = |abi: ABI, net: bool| {
            let ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
            let ruleset = match ruleset.handle_access(AccessFs::from_all(abi)) {
                Ok(ruleset) => ruleset,
                Err(_) => return false,
            };
            let ruleset = if net {
                match ruleset.handle_access(AccessNet::from_all(abi)) {
                    Ok(ruleset) => ruleset,
                    Err(_) => return false,
                }
            } else {
                ruleset
            };
            ruleset.create().is_ok()
        };
        let files = hard(ABI::V1, false);
        Support {
            files,
            network: files && hard(ABI::V4, true),
        }
    })
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

    /// Prepares the sandbox in the guard, before the command is forked:
    /// enters the namespaces (the guard and the command share them) and
    /// builds the Landlock ruleset. Only the command enters the Landlock
    /// domain ([`Prepared::restrict`], after the fork), so its signal
    /// scope keeps it from signalling — or killing — the guard that
    /// cleans up after it.
    ///
    /// # Errors
    /// The sandbox could not be enforced as described; the command must
    /// not run.
    pub fn prepare(&self) -> Result<Prepared, String> {
        // A user namespace with a mount namespace (and, without network, a
        // network namespace); where the kernel refuses one, what it allows.
        let mut mounts = false;
        let in_own_network = match enter_namespaces(true, !self.network) {
            Ok(()) => {
                match crate::mounts::confine(&self.writable, &self.hidden, &self.read_only) {
                    Ok(()) => mounts = true,
                    Err(err) => eprintln!(
                        "dsh: {err}; metadata outside the writable paths is not protected"
                    ),
                }
                !self.network
            }
            Err(_) => !self.network && enter_namespaces(false, true).is_ok(),
        };
        let mut ruleset = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI_TARGET))
            .map_err(|err| err.to_string())?;
        if !self.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI_TARGET))
                .map_err(|err| err.to_string())?
                .scope(Scope::AbstractUnixSocket)
                .map_err(|err| err.to_string())?;
        }
        ruleset = ruleset
            .scope(Scope::Signal)
            .map_err(|err| err.to_string())?;
        let read = AccessFs::from_read(ABI_TARGET);
        let write = AccessFs::from_all(ABI_TARGET);
        let hidden: Vec<PathBuf> = self
            .hidden
            .iter()
            .filter_map(|path| path.canonicalize().ok())
            .collect();
        // Everything but the hidden paths is readable — and of /dev only
        // the devices every command may use (not disks, not the user's
        // terminals).
        let mut readable = Vec::new();
        let mut unreadable = hidden.clone();
        unreadable.push(PathBuf::from("/dev"));
        grant(Path::new("/"), &unreadable, &mut readable);
        readable.extend(
            DEVICES
                .iter()
                .map(Path::new)
                .filter_map(|path| path.canonicalize().ok()),
        );
        let mut writable = Vec::new();
        for path in self
            .writable
            .iter()
            .map(PathBuf::as_path)
            .chain(DEVICES.iter().map(Path::new))
        {
            if let Ok(path) = path.canonicalize() {
                grant(&path, &hidden, &mut writable);
            }
        }
        let ruleset = ruleset
            .create()
            .map_err(|err| err.to_string())?
            .add_rules(path_beneath_rules(&readable, read))
            .map_err(|err| err.to_string())?
            .add_rules(path_beneath_rules(&writable, write))
            .map_err(|err| err.to_string())?;
        if !self.network && !in_own_network && !probe().network {
            return Err("this kernel cannot keep the command off the network".to_owned());
        }
        Ok(Prepared {
            ruleset: Some(ruleset),
            mounts,
        })
    }
}

/// The Landlock domain of a command that keeps the user's rights but must
/// not signal — or kill — the guard above it (a hook, an MCP server):
/// Landlock's signal scope alone (ABI 6+), no rule on files or the
/// network. Built in the guard, entered by the command after the fork
/// ([`Prepared::restrict`]); `None` where the kernel has no signal scope.
pub(crate) fn signal_scope() -> Option<Prepared> {
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::Signal)
        .ok()?
        .create()
        .ok()?;
    Some(Prepared {
        ruleset: Some(ruleset),
        mounts: false,
    })
}

/// A sandbox ready to be entered by the command, after the fork.
pub struct Prepared {
    ruleset: Option<landlock::RulesetCreated>,
    /// The mount namespace is in place (metadata, `/dev/shm`, `/dev/pts`).
    pub mounts: bool,
}

impl Prepared {
    /// Enters the Landlock domain (and sets `no_new_privs`). Runs in the
    /// forked command before exec; the guard is single-threaded, so this
    /// may allocate.
    ///
    /// # Errors
    /// The kernel did not enforce it.
    pub fn restrict(&mut self) -> std::io::Result<()> {
        let ruleset = self
            .ruleset
            .take()
            .ok_or_else(|| std::io::Error::other("the sandbox was entered already"))?;
        let status = ruleset.restrict_self().map_err(std::io::Error::other)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(std::io::Error::other(
                "this kernel does not enforce Landlock",
            ));
        }
        Ok(())
    }
}

/// The rules that grant `path` without any of `hidden`: `path` itself
/// when no hidden path is at or beneath it, else its entries, recursively
/// (Landlock rules always cover a whole subtree).
fn grant(path: &Path, hidden: &[PathBuf], rules: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| path.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(path)) {
        rules.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let children: BTreeSet<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    for child in children {
        grant(&child, hidden, rules);
    }
}

/// Moves this process into a new user namespace (mapping its own uid and
/// gid) and, as asked, a new mount namespace and a new, empty network
/// namespace.
fn enter_namespaces(mounts: bool, network: bool) -> Result<(), String> {
    use nix::sched::{unshare, CloneFlags};
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if mounts {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| e.to_string())?;
    std::fs::write("/proc/self/setgroups", "deny").map_err(|e| e.to_string())?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).map_err(|e| e.to_string())?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).map_err(|e| e.to_string())?;
    Ok(())
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

    #[test]
    fn a_hidden_path_is_granted_around() {
        let root = tempfile_dir();
        for dir in ["a/.ssh", "a/b", "c"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("a/f"), "").unwrap();
        let mut rules = Vec::new();
        grant(&root, &[root.join("a/.ssh")], &mut rules);
        let mut got: Vec<String> = rules
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["a/b", "a/f", "c"]);
        let mut whole = Vec::new();
        grant(&root.join("c"), &[root.join("a/.ssh")], &mut whole);
        assert_eq!(whole, [root.join("c")]);
        let mut inside = Vec::new();
        grant(&root.join("a/.ssh"), &[root.join("a")], &mut inside);
        assert!(inside.is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "dsh-sandbox-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
