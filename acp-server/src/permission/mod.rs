//! The permission policy: one pure function from (mode, what a tool call
//! touches, session rules) to allow / deny / ask. Every front end uses it;
//! tools never check permissions themselves.
//!
//! Modes, from strictest:
//! - `read-only`: reads inside the roots only; no writes; commands only
//!   where the kernel sandbox keeps them read-only, and then asked;
//! - `ask` (default): reads inside the roots are free; writes, commands and
//!   anything outside the roots ask;
//! - `accept-edits`: writes inside the roots are automatic; commands and
//!   outside access ask;
//! - `full-access`: nothing asks.
//!
//! Besides the mode, some things are guarded by what they are:
//! - a program from the workspace (a language server in `node_modules/.bin`)
//!   is a command from the repository: asked once per program and session,
//!   refused in read-only;
//! - [`Protected`] paths ([`protected::PROJECT`]: `.git/` internals,
//!   `.envrc`, editor task files, …, which turn an edit into code
//!   execution; instruction files, `.dsh/`, `.claude/`, `.agents/`, which
//!   steer later sessions): always asked, never remembered, refused in
//!   read-only — a write or edit of one, and a command line that names one
//!   (no "always" rule covers it); dsh's own home (`$DSH_HOME`:
//!   configuration and session logs) is refused below full-access.
//!
//! "Always" answers become session rules scoped to what was asked: a tool on
//! one path, or a command and its subcommand for `bash` ([`rules::scope`]).
//! A rule never widens: an allow rule matches only a plain command line
//! (see [`shell`] and [`rules`]); reject rules see through quoting, wrappers and nested
//! commands; writes outside the roots are never automatic below
//! `full-access`. Only bash lines are parsed: a PowerShell or cmd line
//! ([`Shell`]) is opaque to the policy, so it is always asked below
//! `full-access`, "always" covers that exact line alone, and a reject
//! rule may concern any other line.

mod answers;
pub mod code;
pub mod protected;
pub mod rules;
pub mod shell;

pub use answers::{answer, Answer, AnswerOption, Approvals, Hint, Offered, Question, Unattended};
pub use protected::Protected;

use std::path::{Path, PathBuf};

use dsh_protocol::log::PermissionRule;

pub use dsh_protocol::Mode;

/// What a tool call would touch, with canonical paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Touches nothing outside the session (plans).
    None,
    /// Reads these paths.
    Read(Vec<PathBuf>),
    /// Writes these paths.
    Write(Vec<PathBuf>),
    /// Calls a tool outside dsh (an MCP server); its effects are unknown.
    External,
    /// Runs a shell command in a directory.
    Execute {
        /// The command line.
        command: String,
        /// Working directory (canonical).
        workdir: PathBuf,
        /// The shell that reads it.
        shell: Shell,
    },
    /// Reaches the web: fetches a page from `host`, or (no host) sends
    /// queries to the search provider.
    Web {
        /// The host a page is fetched from.
        host: Option<String>,
    },
    /// Starts a program found inside the workspace (a language server in
    /// `node_modules/.bin`, say) to read these paths.
    Launch {
        /// The program.
        program: PathBuf,
        /// What the call reads with it.
        reads: Vec<PathBuf>,
    },
}

/// The shell that reads a command line. The policy parses bash's
/// ([`shell::analyze`]); it has no parser for the others and fails closed
/// on them: never a plain command, never matched by a prefix rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// bash (Git Bash's on Windows).
    Bash,
    /// PowerShell: `pwsh`, or Windows PowerShell.
    PowerShell,
    /// Windows' `cmd.exe`.
    Cmd,
    /// Text typed where dsh cannot tell what reads it (a persistent
    /// terminal with a program in the foreground, or in a directory it
    /// does not know): always asked below `full-access`, never remembered,
    /// no allow rule covers it; read as text for protected paths.
    Unknown,
}

/// The policy's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Do not run it; the reason is shown to the model.
    Deny(String),
    /// Ask the user; the reason explains why.
    Ask(String),
}

/// What the policy knows about the session besides its mode and rules.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Canonical workspace roots (cwd first).
    pub roots: &'a [PathBuf],
    /// Protected paths.
    pub protected: &'a Protected,
    /// Start language servers from the workspace without asking.
    pub trust_workspace_servers: bool,
    /// How commands are guarded besides the prompt (the kernel sandbox).
    pub commands: crate::sandbox::Guard,
    /// `read-only` and `plan` may reach the web (asked).
    pub web_in_read_only: bool,
    /// What the file tools may read of dsh's own home like any other
    /// path: the session's spilled outputs, the user's skills and commands
    /// (the rest of `$DSH_HOME` — the key, every session's log — is a
    /// secret location).
    pub home_readable: &'a [PathBuf],
}

/// Whether `path` is inside one of `roots` (all canonical).
pub fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// What an "always" answer for a call would remember.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remember {
    /// Nothing: a rule could not safely match this call again (a compound
    /// command, a protected path), so "always" is not offered.
    Never,
    /// The whole tool (MCP tools).
    Tool,
    /// One path, program or command prefix.
    Scope(String),
}

/// The answers a permission prompt offers for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choices {
    /// "Allow once" is offered (not for starting a workspace program, whose
    /// approval lasts the session: the server keeps running).
    pub once: bool,
    /// "Allow once, with network" is offered: a command whose sandbox
    /// keeps it off the network.
    pub with_network: bool,
    /// What "always" would remember.
    pub remember: Remember,
    /// Which standing answers may allow it: not `sandboxed` approvals for
    /// a command that names a protected path.
    pub unattended: Unattended,
}

/// The answers to offer when asking about `access`.
pub fn choices(access: &Access, ctx: &Context<'_>) -> Choices {
    let names_protected = names_protected(access, ctx).is_some();
    let remember = match access {
        Access::None => Remember::Never,
        Access::External => Remember::Tool,
        Access::Read(paths) | Access::Write(paths) => match paths.as_slice() {
            [path]
                if !ctx.protected.guards(path)
                    && !ctx.protected.in_home(path)
                    && !ctx.protected.is_hidden(path) =>
            {
                Remember::Scope(path.display().to_string())
            }
            _ => Remember::Never,
        },
        Access::Execute { .. } if names_protected => Remember::Never,
        Access::Execute {
            shell: Shell::Unknown,
            ..
        } => Remember::Never,
        Access::Execute {
            command,
            shell: Shell::Bash,
            ..
        } => shell::analyze(command)
            .plain
            .and_then(|words| rules::scope(&words))
            .map_or(Remember::Never, |scope| Remember::Scope(scope.join(" "))),
        // A line the policy cannot read: this exact line, nothing like it.
        Access::Execute { command, .. } => Remember::Scope(command.clone()),
        Access::Launch { program, .. } => Remember::Scope(program.display().to_string()),
        Access::Web { host: Some(host) } => Remember::Scope(host.clone()),
        Access::Web { host: None } => Remember::Tool,
    };
    Choices {
        once: !matches!(access, Access::Launch { .. }),
        with_network: matches!(access, Access::Execute { .. })
            && ctx.commands == crate::sandbox::Guard::Kernel { network: false },
        remember,
        unattended: if names_protected {
            Unattended::FullAccessOnly
        } else {
            Unattended::Covered
        },
    }
}

/// The protected path a command line names (why it is protected), if
/// any. A line a rule could match (a plain command whose program runs no
/// code from its arguments) names one by a word (or an option's
/// `=value`) that, taken as a path from the command's directory, is one:
/// `cp x .dsh/hooks.json`, not `git commit -m "update AGENTS.md"`. Any
/// other line — a list, a pipeline, redirections, `sh -c '…'`, an
/// interpreter's code — is searched as text: each piece between blanks,
/// quotes and shell punctuation is taken as such a path (`mkdir .dsh &&
/// cp x .dsh/hooks.json`, `sh -c 'echo x > AGENTS.md'`). Those lines are
/// never remembered anyway; for them this is the reason shown, and what
/// keeps `sandboxed` approvals from allowing them
/// ([`Unattended::FullAccessOnly`]). A name made at run time (`$(printf
/// …)`) is not seen. PowerShell and cmd lines are always searched as
/// text, without their own escapes (`` ` `` and `^`).
fn names_protected(access: &Access, ctx: &Context<'_>) -> Option<String> {
    let Access::Execute {
        command,
        workdir,
        shell: dialect,
    } = access
    else {
        return None;
    };
    let named = |word: &str| {
        (!word.is_empty())
            .then(|| {
                ctx.protected
                    .reason(&crate::beneath::lexical(&workdir.join(word)))
            })
            .flatten()
    };
    let plain = match dialect {
        Shell::Bash => shell::analyze(command).plain,
        Shell::PowerShell | Shell::Cmd | Shell::Unknown => None,
    };
    let Some(words) = plain.filter(|words| rules::scope(words).is_some()) else {
        // Searched as text, with the quotes and backslashes the shell
        // would take away taken away first (`.ds''h`, `AGENT"S".md` and
        // `.d\sh` are `.dsh` and `AGENTS.md` to it); splitting more than
        // the shell would only asks more. PowerShell escapes with a
        // backtick and cmd with a caret; to both a backslash separates
        // paths, as a slash does (PowerShell takes either, everywhere).
        let quoting: &[char] = match dialect {
            Shell::Bash => &['\'', '"', '\\'],
            Shell::PowerShell => &['\'', '"', '`'],
            Shell::Cmd => &['"', '^'],
            Shell::Unknown => &['\'', '"', '\\'],
        };
        let unquoted: String = command
            .chars()
            .filter(|c| !quoting.contains(c))
            .map(|c| if c == '\\' { '/' } else { c })
            .collect();
        return unquoted
            .split(|c: char| c.is_whitespace() || "`;&|<>(){}$=,".contains(c))
            .find_map(named);
    };
    words
        .iter()
        .flat_map(|word| {
            let value = word
                .starts_with('-')
                .then(|| word.split_once('=').map(|(_, value)| value))
                .flatten();
            std::iter::once(word.as_str()).chain(value)
        })
        .find_map(named)
}

/// The scope string a rule stores for an "always" answer, if one may be
/// stored (see [`choices`]).
pub fn rule_scope(access: &Access, ctx: &Context<'_>) -> Option<Option<String>> {
    match choices(access, ctx).remember {
        Remember::Never => None,
        Remember::Tool => Some(None),
        Remember::Scope(scope) => Some(Some(scope)),
    }
}

fn rule_matches(rule: &PermissionRule, tool: &str, access: &Access) -> rules::Match {
    use rules::Match;
    if rule.tool != tool {
        return Match::No;
    }
    let Some(scope) = &rule.scope else {
        return Match::Yes;
    };
    let yes = |matched: bool| if matched { Match::Yes } else { Match::No };
    match access {
        Access::None | Access::External => Match::Yes,
        Access::Read(paths) | Access::Write(paths) => {
            yes(!paths.is_empty() && paths.iter().all(|p| Path::new(scope) == p))
        }
        Access::Launch { program, .. } => yes(Path::new(scope) == program),
        Access::Web { host } => yes(host.as_deref() == Some(scope.as_str())),
        // A line the policy cannot read: an allow rule is for its exact
        // line; any other line may run what a reject rule names.
        Access::Execute { command, shell, .. } if *shell != Shell::Bash => {
            if command == scope && !(rule.allow && *shell == Shell::Unknown) {
                Match::Yes
            } else if rule.allow {
                Match::No
            } else {
                Match::Maybe
            }
        }
        Access::Execute { command, .. } => {
            let analysis = shell::analyze(command);
            let wanted: Vec<&str> = scope.split_whitespace().collect();
            if rule.allow {
                // An allow rule covers only a plain command whose rule
                // would be exactly this one.
                let scoped = analysis.plain.as_deref().and_then(rules::scope);
                yes(scoped.is_some_and(|words| {
                    words.iter().map(String::as_str).eq(wanted.iter().copied())
                }))
            } else {
                rules::reject_matches(&analysis, &wanted)
            }
        }
    }
}

/// Decides one tool call. `rules` are the session's remembered answers,
/// newest last (a later rule wins).
pub fn decide(
    mode: Mode,
    tool: &str,
    access: &Access,
    ctx: &Context<'_>,
    rules: &[PermissionRule],
) -> Decision {
    let denied = |what: &str| {
        Decision::Deny(if mode == Mode::Plan {
            format!(
                "[permission: {what} is not allowed in plan mode] Study the code with the read tools, then submit your plan with exit_plan_mode; once the user approves it, you can make changes."
            )
        } else {
            format!(
                "[permission: {what} is not allowed in {} mode] This is a policy decision, not an error: do not retry it another way. Tell the user what you need and that they can switch the mode.",
                mode.as_str()
            )
        })
    };
    // Secret locations: refused below full-access, asked (never
    // remembered) in it — for reads and writes alike. dsh's own home is
    // one for reads (but what `home_readable` names); writes to it have
    // their own rule (below).
    let hidden = |paths: &[PathBuf], reads: bool| {
        let path = paths.iter().find(|path| {
            if ctx.protected.in_home(path) {
                reads && !ctx.home_readable.iter().any(|ok| path.starts_with(ok))
            } else {
                ctx.protected.is_hidden(path)
            }
        })?;
        Some(if mode == Mode::FullAccess {
            Decision::Ask(format!(
                "touches {}, a hidden location (secrets)",
                path.display()
            ))
        } else {
            denied(&format!(
                "touching {}, a hidden location (credentials and other secrets),",
                path.display()
            ))
        })
    };
    match access {
        Access::Read(paths) | Access::Launch { reads: paths, .. } => {
            if let Some(decision) = hidden(paths, true) {
                return decision;
            }
        }
        Access::Write(paths) => {
            if let Some(decision) = hidden(paths, false) {
                return decision;
            }
        }
        Access::None | Access::External | Access::Execute { .. } | Access::Web { .. } => {}
    }
    let read_decision = |paths: &[PathBuf]| {
        let outside = paths.iter().any(|p| !inside(p, ctx.roots));
        match (mode, outside) {
            (_, false) | (Mode::FullAccess, true) => Decision::Allow,
            (Mode::ReadOnly, true) => denied("reading outside the workspace"),
            (_, true) => Decision::Ask("reads a path outside the workspace".to_owned()),
        }
    };
    // `rules_apply`: whether an allow rule may turn the ask into an allow.
    let (base, rules_apply) = match access {
        Access::None => return Decision::Allow,
        Access::Read(paths) => (read_decision(paths), true),
        Access::Launch { program, reads } => {
            let read = read_decision(reads);
            if matches!(read, Decision::Deny(_)) {
                return read;
            }
            let launch = if ctx.trust_workspace_servers {
                Decision::Allow
            } else {
                match mode {
                    Mode::ReadOnly => {
                        return denied(&format!(
                            "starting {}, a program from the workspace,",
                            program.display()
                        ))
                    }
                    Mode::FullAccess => Decision::Allow,
                    Mode::Plan | Mode::Ask | Mode::AcceptEdits => Decision::Ask(format!(
                        "starts {}, a program from the workspace",
                        program.display()
                    )),
                }
            };
            match (read, launch) {
                (Decision::Allow, Decision::Allow) => (Decision::Allow, true),
                (Decision::Ask(reason), _) | (_, Decision::Ask(reason)) => {
                    (Decision::Ask(reason), true)
                }
                (other, _) => (other, true),
            }
        }
        Access::Write(paths) => {
            let outside = paths.iter().any(|p| !inside(p, ctx.roots));
            if matches!(mode, Mode::ReadOnly | Mode::Plan) {
                return denied("changing files");
            }
            if mode != Mode::FullAccess {
                if let Some(path) = paths.iter().find(|p| ctx.protected.in_home(p)) {
                    return Decision::Deny(format!(
                        "[permission: {} is dsh's own state ($DSH_HOME: configuration and session logs); tools may change it only in full-access mode] Do not retry it another way.",
                        path.display()
                    ));
                }
            }
            let protected = paths.iter().find_map(|p| ctx.protected.reason(p));
            match (mode, outside, protected) {
                (Mode::FullAccess, _, _) => (Decision::Allow, true),
                (_, _, Some(reason)) => (Decision::Ask(format!("changes {reason}")), false),
                (Mode::AcceptEdits, false, None) => (Decision::Allow, true),
                (_, true, None) => (
                    Decision::Ask("writes outside the workspace".to_owned()),
                    // Writes outside the roots are never automatic below full-access.
                    false,
                ),
                (_, false, None) => (Decision::Ask("changes a file".to_owned()), true),
            }
        }
        Access::Web { .. } => match mode {
            Mode::FullAccess => (Decision::Allow, true),
            Mode::ReadOnly | Mode::Plan if !ctx.web_in_read_only => {
                return denied("reaching the web")
            }
            _ => (Decision::Ask("reaches the web".to_owned()), true),
        },
        Access::External => match mode {
            Mode::ReadOnly | Mode::Plan => return denied("calling MCP tools"),
            Mode::FullAccess => (Decision::Allow, true),
            Mode::Ask | Mode::AcceptEdits => (Decision::Ask("calls an MCP tool".to_owned()), true),
        },
        Access::Execute { .. } => {
            use crate::sandbox::Guard;
            match (mode, ctx.commands) {
                (Mode::FullAccess, _) => (Decision::Allow, true),
                (_, Guard::Refused) => return Decision::Deny(
                    "[sandbox: commands cannot be sandboxed on this machine and the configuration requires it ([sandbox] required = true); they run only in full-access mode] Do not retry it another way; tell the user.".to_owned(),
                ),
                // In the kernel's read-only sandbox a command can look but
                // not touch: it may run, once the user agrees.
                (Mode::ReadOnly | Mode::Plan, Guard::Kernel { .. }) => (
                    Decision::Ask("runs a command in a read-only sandbox".to_owned()),
                    true,
                ),
                (Mode::ReadOnly | Mode::Plan, Guard::PromptOnly) => {
                    return denied("running commands")
                }
                (Mode::Ask | Mode::AcceptEdits, _) => match names_protected(access, ctx) {
                    // A line that names a protected path is asked about
                    // every time: no rule covers it.
                    Some(reason) => (Decision::Ask(format!("runs a command on {reason}")), false),
                    None => (Decision::Ask("runs a command".to_owned()), true),
                },
            }
        }
    };
    // The newest rule that matches wins; a reject rule that may match
    // (the line runs something decided at run time) keeps it from running
    // unasked.
    let mut maybe_rejected = false;
    let unknown_reader = matches!(
        access,
        Access::Execute {
            shell: Shell::Unknown,
            ..
        }
    );
    let newest = rules
        .iter()
        .rev()
        .find(|rule| match rule_matches(rule, tool, access) {
            rules::Match::Yes => true,
            rules::Match::Maybe => {
                maybe_rejected |= !rule.allow;
                false
            }
            rules::Match::No => false,
        });
    match newest {
        Some(rule) if !rule.allow => Decision::Deny(format!(
            "The user chose to always reject {tool}{}. Do not retry it another way; ask the user how to proceed.",
            rule.scope.as_deref().map(|s| format!(" for {s}")).unwrap_or_default()
        )),
        Some(_) if rules_apply && !unknown_reader => Decision::Allow,
        _ if base == Decision::Allow && maybe_rejected => Decision::Ask(
            "runs a command decided at run time, which could be one the user chose to always reject"
                .to_owned(),
        ),
        _ => base,
    }
}

#[cfg(test)]
mod tests;
