//! Which kernel sandbox a command runs in: derived from the session's mode
//! and `[sandbox]` in config.toml, enforced by the command guard
//! (`dsh_process::sandbox`).
//!
//! | mode                 | reads                  | writes                          | network      |
//! |----------------------|------------------------|---------------------------------|--------------|
//! | read-only, plan      | all but hidden paths   | private temp dir                | `network`    |
//! | ask, accept-edits    | all but hidden paths   | roots, private temp dir, extras | `network`    |
//! | full-access          | everything             | everything                      | yes          |
//!
//! Hidden paths are secret locations (`~/.ssh`, `~/.aws`, …, and
//! `$DSH_HOME`), extended by `[sandbox] hidden`. Where the roots are
//! writable, the protected paths at each root (`.git/hooks`, `.dsh`,
//! `AGENTS.md`, …: the policy's table) stay read-only. "Allow once, with
//! network" lifts the network rule for one command.

use std::path::{Path, PathBuf};

use dsh_process::sandbox::{Sandbox, Support};
use serde::Deserialize;

use dsh_protocol::Mode;

/// Secret locations under `$HOME` no sandboxed command may read.
pub const DEFAULT_HIDDEN: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    ".dsh",
    ".npmrc",
    ".yarnrc",
    ".pgpass",
    ".my.cnf",
    ".config/git/credentials",
    ".vault-token",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".local/share/fish/fish_history",
    ".terraform.d/credentials.tfrc.json",
    ".terraformrc",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".config/rclone",
    ".config/hub",
    ".kaggle",
    ".s3cfg",
    ".boto",
    ".oci",
    ".config/op",
    ".config/doctl",
    ".gem/credentials",
    ".config/containers/auth.json",
];

/// `[sandbox]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// Commands may use the network below full-access.
    #[serde(default)]
    pub network: bool,
    /// Refuse commands (below full-access) where the kernel cannot sandbox
    /// them; by default they run with the permission prompt as the only
    /// guard.
    #[serde(default)]
    pub required: bool,
    /// Run commands locally, in the sandbox, even when the editor offers a
    /// terminal (which the sandbox cannot reach).
    #[serde(default = "yes")]
    pub prefer_local: bool,
    /// More paths no command may read (`~/` is the user's home).
    #[serde(default)]
    pub hidden: Vec<String>,
    /// More paths commands may write in `ask` and `accept-edits` (a
    /// package cache, say).
    #[serde(default)]
    pub writable: Vec<String>,
}

fn yes() -> bool {
    true
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            network: false,
            required: false,
            prefer_local: true,
            hidden: Vec::new(),
            writable: Vec::new(),
        }
    }
}

/// How commands are guarded in a session, besides the permission prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// In the kernel sandbox; `network`: the configuration lets them use
    /// the network.
    Kernel {
        /// Commands may use the network (`[sandbox] network`).
        network: bool,
    },
    /// No sandbox here; the prompt is the only guard (said once per
    /// session).
    PromptOnly,
    /// No sandbox here and `[sandbox] required`: refused below full-access.
    Refused,
}

/// `~/x` as a path under the user's home.
fn expand_home(path: &str) -> PathBuf {
    match (
        path.strip_prefix("~/"),
        crate::credentials::process_user_home(),
    ) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}

impl SandboxSettings {
    /// The secret locations nothing below full-access reads — not a
    /// sandboxed command, not a file tool, not an instruction file: the
    /// defaults under `$HOME`, `[sandbox] hidden`, and `$DSH_HOME`. Each
    /// is given as written and, where it resolves elsewhere, canonical.
    pub fn hidden_paths(&self, dsh_home: &Path) -> Vec<PathBuf> {
        let user_home = crate::credentials::process_user_home();
        let mut hidden: Vec<PathBuf> = user_home
            .iter()
            .flat_map(|home| DEFAULT_HIDDEN.iter().map(move |path| home.join(path)))
            .chain(self.hidden.iter().map(|path| expand_home(path)))
            .chain(std::iter::once(dsh_home.to_path_buf()))
            .collect();
        let canonical: Vec<PathBuf> = hidden
            .iter()
            .filter_map(|path| dunce::canonicalize(path).ok())
            .filter(|path| !hidden.contains(path))
            .collect();
        hidden.extend(canonical);
        hidden
    }

    /// How commands are guarded on this machine.
    pub fn guard(&self, support: Option<Support>) -> Guard {
        match support {
            Some(support) if support.network || self.network => Guard::Kernel {
                network: self.network,
            },
            _ if self.required => Guard::Refused,
            _ => Guard::PromptOnly,
        }
    }
}

/// The sandbox for one command in `scope`, or `None` when it runs
/// without one (full-access, or no kernel support). Where the roots are
/// writable (`ask`, `accept-edits`), the protected paths below each root
/// are held read-only (`Scope::read_only`: the guard covers those that
/// exist when the command starts).
pub fn for_command(scope: &Scope<'_>, tmp: &Path, with_network: bool) -> Option<Sandbox> {
    let Guard::Kernel { network } = scope.guard else {
        return None;
    };
    if scope.mode == Mode::FullAccess {
        return None;
    }
    let mut writable = vec![tmp.to_path_buf()];
    let mut read_only = Vec::new();
    if matches!(scope.mode, Mode::Ask | Mode::AcceptEdits) {
        writable.extend(scope.roots.iter().cloned());
        writable.extend(scope.settings.writable.iter().map(|path| expand_home(path)));
        read_only.extend(
            scope
                .roots
                .iter()
                .flat_map(|root| scope.read_only.iter().map(move |name| root.join(name))),
        );
    }
    Some(Sandbox {
        writable,
        hidden: scope.hidden.to_vec(),
        read_only,
        network: network || with_network,
    })
}

/// The private temporary directories made by this process, per session.
static PRIVATE_TMP: std::sync::Mutex<Option<std::collections::HashMap<String, PathBuf>>> =
    std::sync::Mutex::new(None);

/// A sandboxed command's private temporary directory (`TMPDIR`): made
/// once per session with `mkdtemp`'s semantics — a fresh unpredictable
/// name, 0700, created by this call or not at all (`mkdir` never follows
/// or reuses what is already there) — and kept for the session.
///
/// # Errors
/// It cannot be created.
pub fn private_tmp(session: &str) -> std::io::Result<PathBuf> {
    let mut made = PRIVATE_TMP.lock().unwrap_or_else(|e| e.into_inner());
    let made = made.get_or_insert_with(Default::default);
    if let Some(dir) = made.get(session) {
        // Still ours: a real directory (not a link put in its place).
        let ours = std::fs::symlink_metadata(dir)
            .is_ok_and(|meta| meta.is_dir() && crate::private::is_owned(&meta, 0));
        if ours {
            return Ok(dir.clone());
        }
    }
    let mut last = None;
    for _ in 0..8 {
        let dir =
            std::env::temp_dir().join(format!("dsh-{session}-{}", uuid::Uuid::new_v4().simple()));
        match crate::private::create_dir(&dir) {
            Ok(()) => {
                made.insert(session.to_owned(), dir.clone());
                return Ok(dir);
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// Removes a closed session's private temporary directory (blocking).
pub fn remove_private_tmp(session: &str) {
    let dir = PRIVATE_TMP
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|made| made.remove(session));
    let Some(dir) = dir else {
        return;
    };
    if let Err(err) = std::fs::remove_dir_all(&dir) {
        if err.kind() != std::io::ErrorKind::NotFound {
            tracing::debug!(dir = %dir.display(), %err, "cannot remove the private temp dir");
        }
    }
}

/// What the model and the user are told after a sandboxed command failed
/// with an access error (the kernel does not say which operation the
/// sandbox blocked, so this reads the command's own error messages).
pub fn denial_note(output: &str, mode: Mode, sandbox: &Sandbox) -> Option<String> {
    let network = !sandbox.network
        && [
            "connect: Permission denied",
            "Network is unreachable",
            "Temporary failure in name resolution",
            "Could not resolve host",
        ]
        .iter()
        .any(|text| output.contains(text));
    if network {
        return Some(format!(
            "[sandbox: network access denied under {} mode]",
            mode.as_str()
        ));
    }
    [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ]
    .iter()
    .any(|text| output.contains(text))
    .then(|| format!("[sandbox: file access denied under {} mode]", mode.as_str()))
}

/// How the commands of one tool call run.
#[derive(Debug, Clone)]
pub struct CommandRun {
    /// The session's mode when the call runs.
    pub mode: Mode,
    /// The kernel sandbox, or `None` (full-access, or none available).
    pub sandbox: Option<Sandbox>,
    /// Refused before it starts (the private temp dir cannot be made).
    pub refused: Option<String>,
    /// `TMPDIR` for a sandboxed command.
    pub tmp: Option<PathBuf>,
    /// Run locally even when the editor offers a terminal (the sandbox
    /// cannot reach the editor's terminal).
    pub local_only: bool,
    /// The session, for `DSH_SESSION_ID`.
    pub session: String,
}

impl CommandRun {
    /// No sandbox: for tests and tools that start no command.
    pub fn unsandboxed(mode: Mode) -> CommandRun {
        CommandRun {
            mode,
            sandbox: None,
            refused: None,
            tmp: None,
            local_only: false,
            session: String::new(),
        }
    }

    /// The managed `$DSH_*` variables a command sees (the bash tool's
    /// description names them): `DSH_SESSION_ID`, `DSH_MODE`, and
    /// `DSH_SANDBOX` — `none`, `files` (network allowed) or `files,network`.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let sandbox = match &self.sandbox {
            None => "none",
            Some(sandbox) if sandbox.network => "files",
            Some(_) => "files,network",
        };
        vec![
            ("DSH_SESSION_ID", self.session.clone()),
            ("DSH_MODE", self.mode.as_str().to_owned()),
            ("DSH_SANDBOX", sandbox.to_owned()),
        ]
    }
}

/// What a session's commands are sandboxed by now: the settings, the
/// machine's guard, the hidden paths, and the session's id, roots and mode.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// `[sandbox]`.
    pub settings: &'a SandboxSettings,
    /// What the machine allows.
    pub guard: Guard,
    /// Paths no command may see.
    pub hidden: &'a [PathBuf],
    /// Paths below each root that commands may not change where the
    /// roots are writable (relative: the protected paths' names,
    /// `permission::Protected::in_sandbox`).
    pub read_only: &'a [PathBuf],
    /// The session's id (its private temporary directory is named for it).
    pub session: &'a str,
    /// The session's canonical roots.
    pub roots: &'a [PathBuf],
    /// The session's mode now.
    pub mode: Mode,
}

/// How a command runs in `scope` (`with_network`: the user allowed this
/// one the network).
pub fn command_run(scope: Scope<'_>, with_network: bool) -> CommandRun {
    let mut run = CommandRun::unsandboxed(scope.mode);
    run.session = scope.session.to_owned();
    if !matches!(scope.guard, Guard::Kernel { .. }) || scope.mode == Mode::FullAccess {
        return run;
    }
    let tmp = match private_tmp(scope.session) {
        Ok(tmp) => tmp,
        Err(err) => {
            run.refused = Some(format!(
                "The command was not run: its sandbox's private temporary directory cannot be created ({err})."
            ));
            return run;
        }
    };
    run.sandbox = for_command(&scope, &tmp, with_network);
    run.tmp = Some(tmp);
    run.local_only = scope.settings.prefer_local;
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23, item 15: the secret locations commonly found under `$HOME`
    /// are hidden by default, with `$DSH_HOME` and `[sandbox] hidden`.
    #[test]
    #[allow(clippy::print_stderr)]
    fn the_usual_secrets_are_hidden_by_default() {
        let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
            eprintln!("skipped: no HOME");
            return;
        };
        let settings = SandboxSettings {
            hidden: vec!["~/.config/extra-secret".to_owned()],
            ..SandboxSettings::default()
        };
        let hidden = settings.hidden_paths(Path::new("/var/lib/dsh-home"));
        for name in [
            ".ssh",
            ".npmrc",
            ".pgpass",
            ".config/git/credentials",
            ".vault-token",
            ".bash_history",
            ".zsh_history",
            ".terraform.d/credentials.tfrc.json",
            ".terraformrc",
            ".m2/settings.xml",
            ".gradle/gradle.properties",
            ".config/rclone",
            ".my.cnf",
            ".config/hub",
            ".kaggle",
            ".config/extra-secret",
        ] {
            assert!(hidden.contains(&home.join(name)), "{name} is not hidden");
        }
        assert!(hidden.contains(&PathBuf::from("/var/lib/dsh-home")));
    }
}
