//! Hooks in Claude Code's format ([extending.md](../../../docs/extending.md#hooks)):
//! the configuration (a `hooks.json`, or a settings file whose `hooks` key
//! holds one), which hooks match an event, and what their answers add up
//! to. `hooks/run.rs` runs one command under the guard. Nothing here knows
//! a session: the turn decides when hooks run, asks about a project's
//! hooks, and records each run.

mod run;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use run::{run, Invocation, Report};

/// The events hooks attach to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// The session's first prompt (matcher: the source, `startup`).
    SessionStart,
    /// A prompt, before the model sees it.
    UserPromptSubmit,
    /// A tool call, before it runs (matcher: the tool's name).
    PreToolUse,
    /// A tool call, after it ran (matcher: the tool's name).
    PostToolUse,
    /// The model is about to end the turn.
    Stop,
}

impl HookEvent {
    /// Every event, in Claude Code's spelling.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
    ];

    /// Its name in configuration and on the hook's stdin.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
        }
    }

    fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL
            .into_iter()
            .find(|event| event.as_str() == name)
    }

    /// Whether its groups are chosen by a matcher (else every group runs).
    fn matched(self) -> bool {
        matches!(
            self,
            HookEvent::SessionStart | HookEvent::PreToolUse | HookEvent::PostToolUse
        )
    }
}

/// `[hooks]` in config.toml.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSettings {
    /// A `hooks.json`, or a settings file whose `hooks` key holds one
    /// (relative: to `$DSH_HOME`). Its hooks run as configured.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// Look for `<project root>/.dsh/hooks.json` (run only once the user
    /// allowed that file's content).
    #[serde(default = "yes")]
    pub project: bool,
    /// A hook's timeout when it sets none, seconds.
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
}

fn yes() -> bool {
    true
}

fn default_timeout() -> u64 {
    60
}

impl Default for HookSettings {
    fn default() -> HookSettings {
        HookSettings {
            config: None,
            project: true,
            timeout_s: default_timeout(),
        }
    }
}

/// Where a hook comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `[hooks] config`: the user's own.
    User,
    /// `<project root>/.dsh/hooks.json`: code from the repository.
    Project,
}

impl Source {
    /// `user` or `project`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Project => "project",
        }
    }
}

/// One command hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    /// Its event.
    pub event: HookEvent,
    /// Run with `sh -c`.
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
    /// Where it was configured.
    pub source: Source,
}

/// One matcher group: the hooks that run when `matcher` matches.
#[derive(Debug, Clone)]
struct Group {
    event: HookEvent,
    /// `None`: every subject.
    matcher: Option<regex::Regex>,
    hooks: Vec<Hook>,
}

/// A parsed hooks configuration.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    groups: Vec<Group>,
}

/// A matcher group as written.
#[derive(Deserialize)]
struct RawGroup {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<RawHook>,
}

/// A hook as written (`type` other than `command` is skipped).
#[derive(Deserialize)]
struct RawHook {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    /// Seconds.
    #[serde(default)]
    timeout: Option<f64>,
}

impl HookSet {
    /// Parses a `hooks.json`, or a settings file whose `hooks` key holds
    /// one. Events dsh does not have and hooks of another type than
    /// `command` are skipped (returned as warnings); a matcher that is not
    /// a regular expression is an error.
    ///
    /// # Errors
    /// Not JSON, not the expected shape, or a bad matcher.
    pub fn parse(
        text: &str,
        source: Source,
        default_timeout: Duration,
    ) -> Result<(HookSet, Vec<String>), String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
        let events = match value.get("hooks") {
            Some(hooks) => hooks,
            None => &value,
        };
        let Some(events) = events.as_object() else {
            return Err(
                "expected an object of events (`{\"hooks\": {\"PreToolUse\": [...]}}`)".to_owned(),
            );
        };
        let mut set = HookSet::default();
        let mut warnings = Vec::new();
        for (name, groups) in events {
            let Some(event) = HookEvent::parse(name) else {
                warnings.push(format!("event {name:?} is not supported: skipped"));
                continue;
            };
            let groups: Vec<RawGroup> =
                serde_json::from_value(groups.clone()).map_err(|err| format!("{name}: {err}"))?;
            for group in groups {
                let matcher = match group.matcher.as_deref().map(str::trim) {
                    None | Some("" | "*") => None,
                    Some(pattern) => Some(
                        regex::Regex::new(&format!("^(?:{pattern})$"))
                            .map_err(|err| format!("{name}: matcher {pattern:?}: {err}"))?,
                    ),
                };
                let mut hooks = Vec::new();
                for hook in group.hooks {
                    match (hook.kind.as_deref(), hook.command) {
                        (Some("command") | None, Some(command)) if !command.trim().is_empty() => {
                            let timeout = hook
                                .timeout
                                .filter(|s| s.is_finite() && *s > 0.0)
                                .map_or(default_timeout, |s| {
                                    Duration::from_secs_f64(s.min(24.0 * 3600.0))
                                });
                            hooks.push(Hook {
                                event,
                                command,
                                timeout,
                                source,
                            });
                        }
                        (kind, _) => warnings.push(format!(
                            "{name}: a hook of type {:?} without a command: skipped",
                            kind.unwrap_or("")
                        )),
                    }
                }
                set.groups.push(Group {
                    event,
                    matcher,
                    hooks,
                });
            }
        }
        Ok((set, warnings))
    }

    /// Whether it has no hook at all.
    /// Every hook as it will run, one line each: the event, the matcher,
    /// the whole command (what a person is asked to allow: the parsed
    /// hooks, not the file's text, which may hide what runs).
    pub fn listing(&self) -> String {
        let mut text = String::new();
        for group in &self.groups {
            let matcher = group
                .matcher
                .as_ref()
                .map_or("any".to_owned(), |matcher| matcher.as_str().to_owned());
            for hook in &group.hooks {
                text.push_str(&format!(
                    "- {} [{matcher}]: {}\n",
                    group.event.as_str(),
                    hook.command.escape_debug()
                ));
            }
        }
        text
    }

    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|group| group.hooks.is_empty())
    }

    /// The hooks for `event` whose matcher matches `subject` (a tool's
    /// name, or the session start's source): the subject itself or its
    /// Claude Code spelling (`bash` → `Bash`, `web_fetch` → `WebFetch`), so
    /// configurations written for Claude Code match dsh's tools. Events
    /// without matchers run every group. Each command once.
    pub fn matching(&self, event: HookEvent, subject: &str) -> Vec<Hook> {
        let alias = pascal_case(subject);
        let mut hooks: Vec<Hook> = Vec::new();
        for group in self.groups.iter().filter(|group| group.event == event) {
            let hit = match (&group.matcher, event.matched()) {
                (None, _) | (_, false) => true,
                (Some(matcher), true) => matcher.is_match(subject) || matcher.is_match(&alias),
            };
            if !hit {
                continue;
            }
            for hook in &group.hooks {
                if !hooks.iter().any(|seen| seen.command == hook.command) {
                    hooks.push(hook.clone());
                }
            }
        }
        hooks
    }
}

/// `web_fetch` → `WebFetch`.
fn pascal_case(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// The user's hooks (`[hooks] config`), read once at start.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// The settings.
    pub settings: HookSettings,
    /// The user's hooks.
    pub user: HookSet,
}

impl Hooks {
    /// Reads the configured file (relative: to `home`).
    ///
    /// # Errors
    /// The file cannot be read or parsed (its path in the message).
    pub fn load(settings: HookSettings, home: &Path) -> Result<Hooks, String> {
        let user = match &settings.config {
            None => HookSet::default(),
            Some(path) => {
                let path = home.join(path);
                let text = std::fs::read_to_string(&path)
                    .map_err(|err| format!("[hooks] config {}: {err}", path.display()))?;
                let (set, warnings) = HookSet::parse(&text, Source::User, settings.timeout())
                    .map_err(|err| format!("[hooks] config {}: {err}", path.display()))?;
                for warning in warnings {
                    tracing::warn!(file = %path.display(), "hooks: {warning}");
                }
                set
            }
        };
        Ok(Hooks { settings, user })
    }
}

impl HookSettings {
    /// The default timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s.max(1))
    }
}

/// A project's hooks file, as read for a turn.
#[derive(Debug, Clone)]
pub struct ProjectHooks {
    /// Its path, for the user.
    pub path: PathBuf,
    /// SHA-256 of its content (hex): consent is per content.
    pub hash: String,
    /// Its content (shown when asking).
    pub text: String,
    /// Its hooks.
    pub set: HookSet,
}

/// Where a project keeps its hooks, below its root.
pub const PROJECT_FILE: &str = ".dsh/hooks.json";

/// Reads `<root>/.dsh/hooks.json`: `Ok(None)` when there is none. Read
/// beneath the root (no link out of it), at most 256 KiB.
///
/// # Errors
/// The file is there and unreadable or invalid (the message says why).
pub fn read_project(
    root: &Path,
    default_timeout: Duration,
) -> Result<Option<ProjectHooks>, String> {
    use sha2::Digest;
    use std::io::Read;
    let path = root.join(PROJECT_FILE);
    let file = match crate::beneath::open_beneath(root, Path::new(PROJECT_FILE)) {
        Ok((file, _)) => file,
        Err(err) if err.is_not_found() => return Ok(None),
        Err(err) => return Err(err.to_string()),
    };
    let mut text = String::new();
    file.take(256 * 1024 + 1)
        .read_to_string(&mut text)
        .map_err(|err| format!("{}: {err}", path.display()))?;
    if text.len() > 256 * 1024 {
        return Err(format!("{}: over 256 KiB", path.display()));
    }
    let hash = format!("{:x}", sha2::Sha256::digest(text.as_bytes()));
    let (set, _) = HookSet::parse(&text, Source::Project, default_timeout)
        .map_err(|err| format!("{}: {err}", path.display()))?;
    Ok(Some(ProjectHooks {
        path,
        hash,
        text,
        set,
    }))
}

/// A `PreToolUse` hook's say on the permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Skip the prompt where an "always allow" answer could have.
    Allow,
    /// Ask even where the policy would allow.
    Ask,
    /// Do not run it.
    Deny,
}

/// What the hooks of one event said, together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Blocked (exit 2, or `decision: block`/`deny`): why.
    pub block: Option<String>,
    /// The strongest permission said (deny > ask > allow).
    pub permission: Option<Permission>,
    /// Reasons given with the permission.
    pub reason: Option<String>,
    /// Context for the model.
    pub context: Vec<String>,
}

impl Verdict {
    /// Adds one hook's answer.
    pub fn add(&mut self, report: &Report, event: HookEvent) {
        if let Some(reason) = report.block_reason() {
            self.block = Some(match self.block.take() {
                Some(earlier) => format!("{earlier}\n{reason}"),
                None => reason,
            });
            return;
        }
        if report.exit_code != Some(0) {
            return;
        }
        let Some(json) = report.json() else {
            // Plain output is context where Claude Code takes it so.
            if matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
                && !report.stdout.trim().is_empty()
            {
                self.context.push(report.stdout.trim().to_owned());
            }
            return;
        };
        let text = |value: Option<&serde_json::Value>| {
            value.and_then(serde_json::Value::as_str).map(str::to_owned)
        };
        let specific = json.get("hookSpecificOutput");
        let reason = text(json.get("reason"))
            .or_else(|| text(specific.and_then(|s| s.get("permissionDecisionReason"))));
        let permission = match text(specific.and_then(|s| s.get("permissionDecision")))
            .or_else(|| text(json.get("decision")))
            .as_deref()
        {
            Some("allow" | "approve") => Some(Permission::Allow),
            Some("ask") => Some(Permission::Ask),
            Some("deny") => Some(Permission::Deny),
            Some("block") => {
                self.block = Some(
                    reason
                        .clone()
                        .unwrap_or_else(|| format!("Blocked by a {} hook.", event.as_str())),
                );
                None
            }
            _ => None,
        };
        if event == HookEvent::PreToolUse && permission > self.permission {
            self.permission = permission;
            self.reason = reason;
        }
        if let Some(context) = text(specific.and_then(|s| s.get("additionalContext"))) {
            if !context.trim().is_empty() {
                self.context.push(context);
            }
        }
    }
}

#[cfg(test)]
mod tests;
