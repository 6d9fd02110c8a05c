//! How dsh starts children. Every program dsh runs — shell commands,
//! language servers and their `--version` probes, MCP servers — is started
//! through a [`Spawner`], so each one gets the same treatment:
//!
//! - an environment without secrets (a configurable list of name patterns,
//!   values that hold a URL with a password, the variable that holds the
//!   model key) — [`EnvPolicy`];
//! - its own process group, so dsh can stop it with everything it started;
//! - a death signal, so it dies with dsh even when dsh is SIGKILLed;
//! - no way to read dsh's memory or environment: dsh makes itself
//!   non-dumpable ([`forbid_inspection`]) and children lose
//!   `CAP_SYS_PTRACE`, `CAP_SYS_ADMIN` and `CAP_PERFMON`, any of which would
//!   otherwise let a child running as root read `/proc/<dsh>/environ`
//!   anyway.
//!
//! Shell commands also run under the [`guard`]: a small process (dsh's own
//! binary, `dsh __guard`) that is a child subreaper, so whatever a command
//! leaves behind — background jobs, even `setsid` daemons — is killed when
//! the command ends or is stopped. A command cannot kill its guard to
//! escape the sweep: a sandboxed one is kept from signalling it by its
//! sandbox, and what runs with the user's rights by their choice (hooks,
//! MCP servers) by a Landlock signal scope of its own
//! ([`Spawner::contained`]).
//!
//! That is Linux. macOS has the process groups and the guard's sweep, with
//! neither death signal nor subreaper; Windows puts dsh and each guard in a
//! kill-on-close Job Object instead of groups and signals (`windows.rs`).
//! docs/platforms.md has the table.
//!
//! This crate knows nothing of sessions, tools or protocols.
#![warn(missing_docs)]
// The canonical paths here are the Unix sandbox's (Landlock, mounts,
// Seatbelt), where std's canonicalize is the one (clippy.toml).
#![allow(clippy::disallowed_methods)]

mod child;
#[cfg(target_os = "linux")]
pub mod confine;
pub mod guard;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(unix)]
pub mod pty;
pub mod sandbox;
mod signal;
#[cfg(windows)]
mod windows;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

pub use signal::{exit_signal, kill_group, signal_group, signal_process, Signal};

/// Environment variable names that hold secrets, as case-insensitive globs.
/// Extended (never replaced) by `[env] scrub` in the configuration.
pub const DEFAULT_SECRET_PATTERNS: &[&str] = &[
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*CREDENTIAL*",
    "*_PAT",
    "*_AUTH",
    "PGPASS*",
    "*_DSN",
    "*DATABASE_URL",
    "*_COOKIE",
    "*_PWD",
    "*JWT*",
    "*_AUTH_CONFIG",
    "SSH_AUTH_SOCK",
    "*_PASS",
    "*AUTHORIZATION*",
    "*BEARER*",
    "*CONNECTION_STRING*",
    "*WEBHOOK*",
    "GIT_CONFIG_VALUE_*",
    "GIT_CONFIG_PARAMETERS",
];

/// Secret variables a command run in full-access keeps: git over SSH needs
/// the agent's socket, and a full-access command could reach the socket's
/// path anyway. Every other child goes without (see
/// [`Spawner::full_access_env`]).
pub const FULL_ACCESS_VARIABLES: &[&str] = &["SSH_AUTH_SOCK"];

/// Whether `value` looks like a credential whatever the variable is
/// called: a URL with a password ([`has_credentialed_url`]) or with any
/// user part over HTTP (a token as the user), a connection string's
/// password or account key, an `Authorization` header's value, a Go
/// driver's `user:password@tcp(…)` DSN, or a token of a well-known shape
/// (GitHub, GitLab, Slack, AWS access keys, Slack webhooks).
pub fn holds_credential(value: &str) -> bool {
    const MARKS: &[&str] = &[
        "password=",
        "pwd=",
        "accountkey=",
        "sharedaccesssignature=",
        "@tcp(",
        "@unix(",
        "hooks.slack.com/services/",
    ];
    const PREFIXES: &[&str] = &[
        "bearer ",
        "basic ",
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "akia",
    ];
    let lower = value.to_ascii_lowercase();
    let http_user = url_authorities(value).any(|(scheme, authority)| {
        let scheme = scheme.to_ascii_lowercase();
        (scheme.ends_with("http") || scheme.ends_with("https")) && authority.contains('@')
    });
    has_credentialed_url(value)
        || http_user
        || MARKS.iter().any(|mark| lower.contains(mark))
        || PREFIXES
            .iter()
            .any(|prefix| lower.trim_start().starts_with(prefix))
}

/// Whether `value` holds a URL with a password in it —
/// `postgres://user:pass@host/db`, `redis://:pass@host`, one of several in
/// a list — whatever the variable is called.
pub fn has_credentialed_url(value: &str) -> bool {
    url_authorities(value).any(|(scheme, authority)| {
        !scheme.is_empty()
            && authority.rsplit_once('@').is_some_and(|(userinfo, _host)| {
                userinfo
                    .split_once(':')
                    .is_some_and(|(_user, password)| !password.is_empty())
            })
    })
}

/// Each `scheme://authority` in `value`: the scheme (possibly empty) and
/// what stands before the first `/`, `?`, `#` or blank after it.
fn url_authorities(value: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut rest = value;
    std::iter::from_fn(move || {
        let at = rest.find("://")?;
        let scheme = rest[..at]
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .next()
            .unwrap_or_default();
        let after = &rest[at + 3..];
        let authority = after
            .split(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .next()
            .unwrap_or_default();
        rest = after;
        Some((scheme, authority))
    })
}

/// Which of dsh's environment variables children must not see: names that
/// match a secret pattern, values that hold a credentialed URL, the
/// variable of the model key. The patterns are checked when the policy is
/// built and compiled on first use (most sessions start no child at all).
#[derive(Debug, Clone)]
pub struct EnvPolicy {
    patterns: Vec<String>,
    compiled: std::sync::OnceLock<globset::GlobSet>,
    names: Vec<String>,
    pass: Vec<String>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy::new(&[], &[]).unwrap_or_else(|_| unreachable!("the defaults are valid"))
    }
}

fn glob(pattern: &str) -> Result<globset::Glob, String> {
    globset::GlobBuilder::new(pattern)
        .case_insensitive(true)
        .literal_separator(false)
        .build()
        .map_err(|err| format!("invalid environment pattern {pattern:?}: {err}"))
}

impl EnvPolicy {
    /// The default patterns plus `extra` patterns, plus exact `names` that
    /// are always secret (the variable that holds the model key, whatever it
    /// is called).
    ///
    /// # Errors
    /// A pattern that is not a valid glob, named in the message.
    pub fn new(extra: &[String], names: &[String]) -> Result<EnvPolicy, String> {
        let patterns: Vec<String> = DEFAULT_SECRET_PATTERNS
            .iter()
            .map(|pattern| (*pattern).to_owned())
            .chain(extra.iter().cloned())
            .collect();
        for pattern in &patterns {
            glob(pattern)?;
        }
        Ok(EnvPolicy {
            patterns,
            compiled: std::sync::OnceLock::new(),
            names: names.to_vec(),
            pass: Vec::new(),
        })
    }

    /// Passes the variables named in `pass` (exact names) to children
    /// although a default pattern or their value would keep them back —
    /// chosen on purpose in the configuration. The model key's variable and
    /// names matched by the `extra` patterns stay secret.
    pub fn passing(mut self, pass: &[String]) -> EnvPolicy {
        self.pass = pass.to_vec();
        self
    }

    fn compiled(&self) -> &globset::GlobSet {
        self.compiled.get_or_init(|| {
            let mut builder = globset::GlobSetBuilder::new();
            for pattern in &self.patterns {
                if let Ok(glob) = glob(pattern) {
                    builder.add(glob);
                }
            }
            builder
                .build()
                .unwrap_or_else(|_| globset::GlobSet::empty())
        })
    }

    /// Whether a variable of this name must be kept from children (by its
    /// name alone; [`EnvPolicy::is_secret_variable`] looks at its value too).
    pub fn is_secret(&self, name: &str) -> bool {
        if self.names.iter().any(|secret| same_variable(secret, name)) {
            return true;
        }
        if self.pass.iter().any(|passed| same_variable(passed, name)) {
            return self.extra_matches(name);
        }
        self.compiled().is_match(name)
    }

    /// Whether one of the configured patterns (not the defaults) matches.
    fn extra_matches(&self, name: &str) -> bool {
        self.compiled()
            .matches(name)
            .into_iter()
            .any(|index| index >= DEFAULT_SECRET_PATTERNS.len())
    }

    /// Whether this variable must be kept from children: its name is
    /// secret, or its value holds a credential ([`holds_credential`]).
    pub fn is_secret_variable(&self, name: &str, value: &str) -> bool {
        self.is_secret(name)
            || (holds_credential(value)
                && !self.pass.iter().any(|passed| same_variable(passed, name)))
    }

    /// dsh's environment without the secrets, for a child.
    pub fn scrubbed(&self) -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(name, value)| !self.is_secret_variable(name, value))
            .collect()
    }

    /// The [`FULL_ACCESS_VARIABLES`] of dsh's environment that the
    /// configured patterns do not scrub.
    fn full_access(&self) -> Vec<(String, String)> {
        FULL_ACCESS_VARIABLES
            .iter()
            .filter(|name| !self.names.iter().any(|secret| same_variable(secret, name)))
            .filter(|name| !self.extra_matches(name))
            .filter_map(|name| Some(((*name).to_owned(), std::env::var(name).ok()?)))
            .collect()
    }
}

/// Windows: cmd.exe (and `CreateProcess`'s own search) looks for a bare
/// program name in the current directory before `PATH` — a `git.cmd` in
/// the workspace would run for an approved `git status`. This variable
/// turns that search off for every child and what it starts.
const NO_CURRENT_DIRECTORY_SEARCH: &[(&str, &str)] = if cfg!(windows) {
    &[("NoDefaultCurrentDirectoryInExePath", "1")]
} else {
    &[]
};

/// Whether two environment variable names are the same variable: exactly
/// on Unix; without regard to case on Windows, where `Path` and `PATH` are
/// one variable.
fn same_variable(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// Starts dsh's children (see the crate docs). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Spawner {
    env: Arc<EnvPolicy>,
    guard: Option<PathBuf>,
}

impl Spawner {
    /// A spawner with this environment policy and no command guard.
    pub fn new(env: EnvPolicy) -> Spawner {
        Spawner {
            env: Arc::new(env),
            guard: None,
        }
    }

    /// Runs shell commands under `dsh __guard` from this executable (dsh's
    /// own binary). Without it, commands run directly and only their
    /// process group is cleaned up.
    pub fn with_guard(mut self, executable: PathBuf) -> Spawner {
        self.guard = Some(executable);
        self
    }

    /// The environment policy.
    pub fn env(&self) -> &EnvPolicy {
        &self.env
    }

    /// A command for `program`: scrubbed environment, stdin from
    /// `/dev/null`, its own process group, killed when dropped, ended when
    /// dsh dies (Linux: SIGKILL; Windows: dsh's job), and without the
    /// capabilities that inspect processes (Linux). Callers add arguments,
    /// the working directory, pipes and extra variables.
    pub fn command(&self, program: impl AsRef<OsStr>) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env_clear()
            .envs(self.env.scrubbed())
            .envs(NO_CURRENT_DIRECTORY_SEARCH.iter().copied())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        child::harden(&mut command, child::Death::Kill);
        command
    }

    /// What a command run in full-access adds to [`Spawner::guarded`]'s
    /// environment: the [`FULL_ACCESS_VARIABLES`] dsh has (the SSH agent's
    /// socket), which every other child goes without.
    pub fn full_access_env(&self) -> Vec<(String, String)> {
        self.env.full_access()
    }

    /// Whether commands can run in a [`sandbox::Sandbox`]: there is a
    /// guard to apply it and the kernel can enforce it.
    pub fn sandbox_support(&self) -> Option<sandbox::Support> {
        self.guard
            .as_ref()
            .map(|_| sandbox::probe())
            .filter(|support| support.files)
    }

    /// Whether a command kept off the network gets a network (and mount)
    /// namespace of its own: a sandboxed `sh` started by the guard is
    /// asked for its namespaces, which must differ from this process's.
    /// Where unprivileged user namespaces are off (container profiles,
    /// AppArmor, a sysctl) the sandbox stops TCP only: UDP, DNS and
    /// local sockets stay open.
    pub async fn own_namespaces(&self) -> bool {
        if !cfg!(target_os = "linux") {
            return false;
        }
        let ours = |kind: &str| std::fs::read_link(format!("/proc/self/ns/{kind}")).ok();
        let (Some(net), Some(mnt)) = (ours("net"), ours("mnt")) else {
            return false;
        };
        let sandbox = sandbox::Sandbox {
            network: false,
            ..sandbox::Sandbox::default()
        };
        let Ok(mut command) = self.guarded(
            "/bin/sh",
            [
                "-c",
                "readlink /proc/self/ns/net; readlink /proc/self/ns/mnt",
            ],
            Some(&sandbox),
        ) else {
            return false;
        };
        let output = command.stderr(std::process::Stdio::null()).output();
        let Ok(Ok(output)) = tokio::time::timeout(std::time::Duration::from_secs(5), output).await
        else {
            return false;
        };
        let text = String::from_utf8_lossy(&output.stdout);
        let mut lines = text.lines();
        output.status.success()
            && lines
                .next()
                .is_some_and(|line| std::path::Path::new(line) != net)
            && lines
                .next()
                .is_some_and(|line| std::path::Path::new(line) != mnt)
    }

    /// A command that runs `program args…` under the guard when there is
    /// one, inside `sandbox` if given. The guard gets SIGTERM when dsh dies
    /// (it then kills everything the command started); stop it with
    /// [`stop_guarded`].
    ///
    /// # Errors
    /// A sandbox was asked for and there is no guard to apply it.
    pub fn guarded<I, S>(
        &self,
        program: &str,
        args: I,
        sandbox: Option<&sandbox::Sandbox>,
    ) -> Result<tokio::process::Command, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        if sandbox.is_some() && self.guard.is_none() {
            return Err("commands cannot be sandboxed without the command guard".to_owned());
        }
        let guard_args = sandbox.map(sandbox::Sandbox::to_args).unwrap_or_default();
        Ok(self.under_guard(program, args, guard_args))
    }

    /// A command that runs `program args…` under the guard with the
    /// user's rights (no sandbox) but unable to signal anything outside
    /// itself — above all its guard, which it could otherwise kill
    /// (`kill -9 $PPID`) so that what it started outlives it: it enters a
    /// Landlock domain of its own with the signal scope alone (Linux 6.12+;
    /// on older kernels it is a plain [`Spawner::guarded`] command), which
    /// also sets `no_new_privs` (setuid programs such as `sudo` gain
    /// nothing in it). For programs that run outside the sandbox by the
    /// user's choice: hooks, MCP servers. Stop it with [`stop_guarded`].
    pub fn contained<I, S>(&self, program: &str, args: I) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.under_guard(program, args, vec![guard::CONTAIN.into()])
    }

    /// `program args…` under the guard, given `guard_args` before `--`
    /// (or alone, in its process group, without a guard).
    fn under_guard<I, S>(
        &self,
        program: &str,
        args: I,
        guard_args: Vec<std::ffi::OsString>,
    ) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let Some(guard) = &self.guard else {
            let mut command = self.command(program);
            command.args(args);
            return command;
        };
        let mut command = tokio::process::Command::new(guard);
        command
            .env_clear()
            .envs(self.env.scrubbed())
            .envs(NO_CURRENT_DIRECTORY_SEARCH.iter().copied())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .arg(guard::ARG)
            .args(guard_args)
            .arg("--")
            .arg(program)
            .args(args);
        child::harden(&mut command, child::Death::Terminate);
        command
    }
}

/// Stops a command started with [`Spawner::guarded`]: SIGTERM to the guard
/// (which kills everything the command started, setsid daemons included),
/// then, if it has not exited within `grace`, SIGKILL to its process group.
pub async fn stop_guarded(
    child: &mut tokio::process::Child,
    pgid: u32,
    grace: std::time::Duration,
) {
    if let Some(pid) = child.id() {
        signal_process(pid, Signal::Terminate);
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        kill_group(pgid);
        let _ = child.wait().await;
    }
}

/// After a guarded command ended (or was stopped): gives the tasks reading
/// its output `drain` to see the pipes close, kills whatever is left in
/// its process group (no guard, or one that died), and aborts readers
/// still blocked — a grandchild that kept a pipe open cannot hold dsh.
pub async fn settle(
    pgid: u32,
    readers: &mut [tokio::task::JoinHandle<()>],
    drain: std::time::Duration,
) {
    let drained = tokio::time::timeout(drain, async {
        for reader in readers.iter_mut() {
            let _ = reader.await;
        }
    })
    .await;
    kill_group(pgid);
    if drained.is_err() {
        for reader in readers.iter() {
            reader.abort();
        }
    }
}

/// Makes dsh itself non-dumpable: other processes of the same user (its
/// own children included) can no longer read `/proc/<dsh>/environ` or its
/// memory, which hold the API key. Call once at start.
pub fn forbid_inspection() {
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(%err, "cannot make dsh non-dumpable; children of the same user could read its environment");
    }
}

/// The soft limit on open files dsh started with; children get it back
/// (programs that use `select` break on descriptors past 1024).
#[cfg(unix)]
static INHERITED_NOFILE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Raises the soft limit on open files to the hard limit, so many
/// connections, language servers and logs do not run dsh out of
/// descriptors. Children are started with the limit dsh inherited. Call
/// once at start; returns the new soft limit.
pub fn raise_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    return raise_nofile();
    #[cfg(windows)]
    None
}

#[cfg(unix)]
fn raise_nofile() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    INHERITED_NOFILE.store(soft, std::sync::atomic::Ordering::Relaxed);
    if soft >= hard {
        return Some(soft);
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => Some(hard),
        Err(err) => {
            tracing::debug!(%err, "cannot raise the open-file limit");
            Some(soft)
        }
    }
}

/// The soft open-file limit to give children back, if dsh raised it.
#[cfg(target_os = "linux")]
pub(crate) fn inherited_fd_limit() -> Option<u64> {
    Some(INHERITED_NOFILE.load(std::sync::atomic::Ordering::Relaxed)).filter(|soft| *soft > 0)
}

/// Makes every thread allocate from glibc's one main arena. glibc gives
/// threads arenas of their own (up to eight per core), and memory freed in
/// one is reused only by the threads of that arena: a history folded again
/// on a blocking thread, dropped later from the runtime's, left its pages
/// to an arena nobody allocated from, and with sessions turning nonstop
/// over the history budget RSS rose from 62 to 94–136 MB in four minutes
/// where one arena stays at 60–68 MB (`dsh-bench soak`, docs/testing.md).
/// dsh's own threads are few (the runtime's one, the stdout writer, the
/// blocking pool), so they seldom wait for the arena's lock. Call it
/// before any thread starts.
pub fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt takes two integers and changes glibc's own settings
    // under its lock; no pointer is passed.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Returns the allocator's free pages to the system. glibc keeps what a
/// closed session's history freed inside its arenas, so RSS would stay at
/// its peak for the life of the process; `malloc_trim` releases every
/// whole free page, in the middle of the heap too. Blocking (it walks the
/// heap): call it off the runtime thread.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim takes no pointers; it only walks glibc's own
    // free lists under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_by_pattern_and_name() {
        let policy = EnvPolicy::new(&["ACME_*".to_owned()], &["LOCAL_LLM".to_owned()]).unwrap();
        for name in [
            "DEEPSEEK_API_KEY",
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "DB_PASSWORD",
            "KEYRING",
            "DATABASE_URL",
            "GH_PAT",
            "NPM_AUTH",
            "PGPASSWORD",
            "PGPASSFILE",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SMTP_PASSWD",
            "SENTRY_DSN",
            "SSH_PRIVATE_KEY",
            "ACME_ANYTHING",
            "LOCAL_LLM",
            "MYSQL_PWD",
            "CI_JOB_JWT",
            "CI_JOB_JWT_V2",
            "DOCKER_AUTH_CONFIG",
            "SSH_AUTH_SOCK",
        ] {
            assert!(policy.is_secret(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "CARGO_HOME",
            "PATHEXT",
            "PWD",
            "OLDPWD",
            "GIT_AUTHOR_NAME",
        ] {
            assert!(!policy.is_secret(name), "{name}");
        }
        assert!(EnvPolicy::new(&["[".to_owned()], &[]).is_err());
    }

    /// A child starts with no signal blocked or ignored, whatever the
    /// thread that spawned it blocks or the process ignores.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "current_thread")]
    async fn children_start_with_no_signal_blocked_or_ignored() {
        use nix::sys::signal::{SigHandler, SigSet, Signal};
        let mut blocked = SigSet::empty();
        for signal in [Signal::SIGHUP, Signal::SIGINT, Signal::SIGTERM] {
            blocked.add(signal);
        }
        blocked.thread_block().unwrap();
        // SAFETY: SIG_IGN installs no handler; no other test uses SIGUSR2.
        #[allow(unsafe_code)]
        let before = unsafe { nix::sys::signal::signal(Signal::SIGUSR2, SigHandler::SigIgn) };
        let output = Spawner::default()
            .command("grep")
            .args(["-E", "^Sig(Blk|Ign)", "/proc/self/status"])
            .output()
            .await;
        blocked.thread_unblock().unwrap();
        #[allow(unsafe_code)]
        // SAFETY: puts back the disposition read above.
        unsafe {
            nix::sys::signal::signal(Signal::SIGUSR2, before.unwrap()).unwrap();
        }
        let output = String::from_utf8(output.unwrap().stdout).unwrap();
        assert_eq!(
            output,
            "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
        );
    }

    #[test]
    fn values_that_hold_a_password_in_a_url_are_secret_whatever_the_name() {
        for value in [
            "postgres://user:pass@db.internal:5432/app",
            "redis://:hunter2@cache:6379/0",
            "mysql+pymysql://root:x@localhost/db",
            "amqp://guest:guest@rabbit",
            "redis://cache1:6379,redis://:p@cache2:6379",
            "see https://user:token@example.com/repo.git",
        ] {
            assert!(has_credentialed_url(value), "{value}");
        }
        for value in [
            "https://example.com/path?q=a:b@c",
            "ssh://git@github.com/org/repo.git",
            "postgres://user@localhost/app",
            "redis://localhost:6379",
            "user:pass@host",
            "http://user:@host",
            "/usr/bin:/bin",
            "",
        ] {
            assert!(!has_credentialed_url(value), "{value}");
        }
        for value in [
            "https://ghp_abc@github.com/org/repo.git",
            "Server=x;User Id=u;Password=p",
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k==",
            "jdbc:postgresql://h/db?user=u&password=p",
            "user:pw@tcp(db:3306)/app",
            "Bearer eyJhbGciOi",
            "Basic dXNlcjpwdw==",
            "github_pat_11AAAA",
            "https://hooks.slack.com/services/T0/B0/x",
        ] {
            assert!(holds_credential(value), "{value}");
        }
        for value in [
            "https://example.com/path?q=a:b@c",
            "/usr/bin:/bin",
            "en_US.UTF-8",
            "xterm-256color",
        ] {
            assert!(!holds_credential(value), "{value}");
        }
        let policy = EnvPolicy::default();
        for name in [
            "DB_PASS",
            "TF_VAR_db_pass",
            "AZURE_STORAGE_CONNECTION_STRING",
            "GIT_CONFIG_VALUE_0",
            "SLACK_WEBHOOK_URL",
        ] {
            assert!(policy.is_secret_variable(name, "x"), "{name}");
        }
        assert!(policy.is_secret_variable("REDIS_URL", "redis://:pw@cache:6379"));
        assert!(policy.is_secret_variable("ANYTHING", "postgres://u:p@h/db"));
        assert!(!policy.is_secret_variable("REDIS_URL", "redis://cache:6379"));
    }

    #[test]
    fn the_configuration_passes_chosen_variables_but_never_the_key_or_its_own_patterns() {
        let pass = [
            "SSH_AUTH_SOCK",
            "DATABASE_URL",
            "DEEPSEEK_API_KEY",
            "ACME_TOKEN",
        ]
        .map(str::to_owned);
        let policy = EnvPolicy::new(&["ACME_*".to_owned()], &["DEEPSEEK_API_KEY".to_owned()])
            .unwrap()
            .passing(&pass);
        assert!(!policy.is_secret("SSH_AUTH_SOCK"));
        assert!(!policy.is_secret_variable("DATABASE_URL", "postgres://u:p@h/db"));
        assert!(policy.is_secret("DEEPSEEK_API_KEY"));
        assert!(policy.is_secret("ACME_TOKEN"));
        assert!(policy.is_secret("GITHUB_TOKEN"));
        assert!(policy.is_secret_variable("OTHER_URL", "postgres://u:p@h/db"));
    }
}
