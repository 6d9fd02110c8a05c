//! The Linux sandbox: Landlock for files (and TCP where there is no
//! network namespace), a user + mount (+ network) namespace, the signal
//! scope. See the parent module for the policy.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use super::{Sandbox, Support};

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

/// What the kernel supports (a ruleset is created and dropped; nothing
/// is restricted).
pub(super) fn probe() -> Support {
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
}

impl Sandbox {
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
        if !self.network && !in_own_network && !super::probe().network {
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
