//! Child processes: a scrubbed environment and process-group handling,
//! shared by language servers here and by dsh's shell tool (and MCP
//! servers).

/// Whether an environment variable name looks like it holds a secret.
pub fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASSWORD"]
        .iter()
        .any(|word| upper.contains(word))
}

/// dsh's environment without secrets (`*KEY*`, `*SECRET*`, `*TOKEN*`,
/// `*PASSWORD*`), for children.
pub fn scrubbed_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(name, _)| !is_secret(name))
        .collect()
}

/// Sends a signal to a whole process group; a group that is already gone
/// is fine. Group 0 (unknown) is never signalled.
pub fn signal_group(pgid: u32, signal: nix::sys::signal::Signal) {
    if pgid == 0 {
        return;
    }
    if let Err(err) = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid as i32), signal) {
        if err != nix::errno::Errno::ESRCH {
            tracing::debug!(pgid, %err, "cannot signal process group");
        }
    }
}

/// Asks the kernel to kill the child when dsh dies, even by SIGKILL
/// (Linux `PR_SET_PDEATHSIG`; it survives `exec`). Only the direct child is
/// covered: its own children keep running in its process group until the
/// group is killed, which dsh does on every orderly exit.
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut tokio::process::Command) {
    // SAFETY: `pre_exec` runs in the forked child before exec; `prctl` is
    // async-signal-safe and touches no memory of the parent.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

/// Not available off Linux; children are still killed on orderly exits.
#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut tokio::process::Command) {}

/// Sends SIGKILL to a whole process group.
pub fn kill_group(pgid: u32) {
    signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_are_recognised() {
        for name in [
            "DEEPSEEK_API_KEY",
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "DB_PASSWORD",
            "KEYRING",
        ] {
            assert!(super::is_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "CARGO_HOME"] {
            assert!(!super::is_secret(name), "{name}");
        }
    }
}
