//! The permission policy: one pure function from (mode, what a tool call
//! touches, session rules) to allow / deny / ask. Every front end uses it;
//! tools never check permissions themselves.
//!
//! Modes, from strictest:
//! - `read-only`: reads inside the roots only; no writes, no commands;
//! - `ask` (default): reads inside the roots are free; writes, commands and
//!   anything outside the roots ask;
//! - `accept-edits`: writes inside the roots are automatic; commands and
//!   outside access ask;
//! - `full-access`: nothing asks.
//!
//! "Always" answers become session rules scoped to what was asked: a tool on
//! one path, or a command prefix for `bash`. A rule never widens: a command
//! with shell control operators matches no allow rule, and writes outside
//! the roots are never automatic below `full-access`.

use std::path::{Path, PathBuf};

use dsh_protocol::log::PermissionRule;

/// Session permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads inside roots only.
    ReadOnly,
    /// Ask for writes, commands and outside access.
    Ask,
    /// Writes inside roots are automatic.
    AcceptEdits,
    /// No prompts.
    FullAccess,
}

impl Mode {
    /// All modes, in menu order.
    pub const ALL: [Mode; 4] = [
        Mode::ReadOnly,
        Mode::Ask,
        Mode::AcceptEdits,
        Mode::FullAccess,
    ];

    /// The option value id.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Ask => "ask",
            Mode::AcceptEdits => "accept-edits",
            Mode::FullAccess => "full-access",
        }
    }

    /// Parses an option value id.
    pub fn parse(value: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == value)
    }

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Read only",
            Mode::Ask => "Ask",
            Mode::AcceptEdits => "Accept edits",
            Mode::FullAccess => "Full access",
        }
    }

    /// One-line description.
    pub fn description(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Reads inside the workspace only; no edits, no commands",
            Mode::Ask => "Reads are free; edits, commands and outside access ask first",
            Mode::AcceptEdits => "Edits inside the workspace are automatic; commands ask",
            Mode::FullAccess => "Everything runs without asking",
        }
    }
}

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
    },
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

/// Whether `path` is inside one of `roots` (all canonical).
pub fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// Characters that let one command line run more than one command.
fn has_shell_control(command: &str) -> bool {
    command.contains(['\n', ';', '&', '|', '`', '>', '<', '(', ')']) || command.contains("$(")
}

/// Programs whose first argument is a subcommand worth scoping a rule to.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "npx",
    "go",
    "docker",
    "kubectl",
    "pip",
    "uv",
    "poetry",
    "rustup",
    "make",
    "just",
    "gradle",
    "mvn",
    "dotnet",
    "deno",
    "brew",
    "apt",
    "apt-get",
    "systemctl",
    "gh",
    "terraform",
];

/// The prefix an "always" answer for `bash` remembers: the program, plus its
/// subcommand for tools that have them (`cargo test`, `git status`, `ls`).
pub fn command_prefix(command: &str) -> String {
    let mut words = command.split_whitespace();
    let Some(program) = words.next() else {
        return String::new();
    };
    match words.next() {
        Some(sub)
            if SUBCOMMAND_PROGRAMS.contains(&program)
                && !sub.starts_with('-')
                && sub
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':') =>
        {
            format!("{program} {sub}")
        }
        _ => program.to_owned(),
    }
}

fn prefix_matches(prefix: &str, command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    let wanted: Vec<&str> = prefix.split_whitespace().collect();
    !wanted.is_empty() && words.len() >= wanted.len() && words[..wanted.len()] == wanted[..]
}

/// The scope an "always" answer for this call would remember.
pub fn rule_scope(access: &Access) -> Option<String> {
    match access {
        Access::None | Access::External => None,
        Access::Read(paths) | Access::Write(paths) => {
            paths.first().map(|p| p.display().to_string())
        }
        Access::Execute { command, .. } => Some(command_prefix(command)),
    }
}

fn rule_matches(rule: &PermissionRule, tool: &str, access: &Access) -> bool {
    if rule.tool != tool {
        return false;
    }
    let Some(scope) = &rule.scope else {
        return true;
    };
    match access {
        Access::None | Access::External => true,
        Access::Read(paths) | Access::Write(paths) => {
            !paths.is_empty() && paths.iter().all(|p| Path::new(scope) == p)
        }
        Access::Execute { command, .. } => {
            // An allow rule never covers a compound command; a reject rule does.
            prefix_matches(scope, command) && (!rule.allow || !has_shell_control(command))
        }
    }
}

/// Decides one tool call. `rules` are the session's remembered answers,
/// newest last (a later rule wins).
pub fn decide(
    mode: Mode,
    tool: &str,
    access: &Access,
    roots: &[PathBuf],
    rules: &[PermissionRule],
) -> Decision {
    let denied = |what: &str| {
        Decision::Deny(format!(
            "[permission: {what} is not allowed in {} mode] This is a policy decision, not an error: do not retry it another way. Tell the user what you need and that they can switch the mode.",
            mode.as_str()
        ))
    };
    let (outside, base) = match access {
        Access::None => return Decision::Allow,
        Access::Read(paths) => {
            let outside = paths.iter().any(|p| !inside(p, roots));
            let base = match (mode, outside) {
                (_, false) => Decision::Allow,
                (Mode::FullAccess, true) => Decision::Allow,
                (Mode::ReadOnly, true) => return denied("reading outside the workspace"),
                (_, true) => Decision::Ask("reads a path outside the workspace".to_owned()),
            };
            (outside, base)
        }
        Access::Write(paths) => {
            let outside = paths.iter().any(|p| !inside(p, roots));
            let base = match (mode, outside) {
                (Mode::ReadOnly, _) => return denied("changing files"),
                (Mode::FullAccess, _) => Decision::Allow,
                (Mode::AcceptEdits, false) => Decision::Allow,
                (_, true) => Decision::Ask("writes outside the workspace".to_owned()),
                (Mode::Ask, false) => Decision::Ask("changes a file".to_owned()),
            };
            (outside, base)
        }
        Access::External => {
            let base = match mode {
                Mode::ReadOnly => return denied("calling MCP tools"),
                Mode::FullAccess => Decision::Allow,
                Mode::Ask | Mode::AcceptEdits => Decision::Ask("calls an MCP tool".to_owned()),
            };
            (false, base)
        }
        Access::Execute { workdir, .. } => {
            let outside = !inside(workdir, roots);
            let base = match mode {
                Mode::ReadOnly => return denied("running commands"),
                Mode::FullAccess => Decision::Allow,
                Mode::Ask | Mode::AcceptEdits => Decision::Ask("runs a command".to_owned()),
            };
            (outside, base)
        }
    };
    if base == Decision::Allow {
        // Reject rules still apply to calls the mode would allow.
        if let Some(rule) = rules
            .iter()
            .rev()
            .find(|rule| !rule.allow && rule_matches(rule, tool, access))
        {
            return Decision::Deny(format!(
                "The user chose to always reject {tool}{}. Do not retry it another way; ask the user how to proceed.",
                rule.scope.as_deref().map(|s| format!(" for {s}")).unwrap_or_default()
            ));
        }
        return Decision::Allow;
    }
    if let Some(rule) = rules
        .iter()
        .rev()
        .find(|rule| rule_matches(rule, tool, access))
    {
        if !rule.allow {
            return Decision::Deny(format!(
                "The user chose to always reject {tool}{}. Do not retry it another way; ask the user how to proceed.",
                rule.scope.as_deref().map(|s| format!(" for {s}")).unwrap_or_default()
            ));
        }
        // Writes outside the roots are never automatic below full-access.
        let outside_write = matches!(access, Access::Write(_)) && outside;
        if !outside_write {
            return Decision::Allow;
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Vec<PathBuf> {
        vec![PathBuf::from("/w")]
    }

    fn rule(tool: &str, scope: Option<&str>, allow: bool) -> PermissionRule {
        PermissionRule {
            tool: tool.into(),
            scope: scope.map(Into::into),
            allow,
        }
    }

    fn check(mode: Mode, tool: &str, access: Access, rules: &[PermissionRule]) -> &'static str {
        match decide(mode, tool, &access, &roots(), rules) {
            Decision::Allow => "allow",
            Decision::Deny(_) => "deny",
            Decision::Ask(_) => "ask",
        }
    }

    #[test]
    fn mode_table() {
        let read_in = || Access::Read(vec!["/w/a".into()]);
        let read_out = || Access::Read(vec!["/etc/passwd".into()]);
        let write_in = || Access::Write(vec!["/w/a".into()]);
        let write_out = || Access::Write(vec!["/tmp/x".into()]);
        let exec = || Access::Execute {
            command: "ls".into(),
            workdir: "/w".into(),
        };
        let table = [
            (Mode::ReadOnly, ["allow", "deny", "deny", "deny", "deny"]),
            (Mode::Ask, ["allow", "ask", "ask", "ask", "ask"]),
            (Mode::AcceptEdits, ["allow", "ask", "allow", "ask", "ask"]),
            (
                Mode::FullAccess,
                ["allow", "allow", "allow", "allow", "allow"],
            ),
        ];
        for (mode, expected) in table {
            let got = [
                check(mode, "read", read_in(), &[]),
                check(mode, "read", read_out(), &[]),
                check(mode, "write", write_in(), &[]),
                check(mode, "write", write_out(), &[]),
                check(mode, "bash", exec(), &[]),
            ];
            assert_eq!(got, expected, "{mode:?}");
        }
    }

    #[test]
    fn rules_are_scoped_and_never_widen() {
        let allow_cargo = [rule("bash", Some("cargo test"), true)];
        let exec = |command: &str| Access::Execute {
            command: command.into(),
            workdir: "/w".into(),
        };
        assert_eq!(
            check(Mode::Ask, "bash", exec("cargo test --all"), &allow_cargo),
            "allow"
        );
        assert_eq!(
            check(Mode::Ask, "bash", exec("cargo testx"), &allow_cargo),
            "ask"
        );
        assert_eq!(
            check(Mode::Ask, "bash", exec("cargo build"), &allow_cargo),
            "ask"
        );
        assert_eq!(
            check(
                Mode::Ask,
                "bash",
                exec("cargo test; rm -rf /"),
                &allow_cargo
            ),
            "ask"
        );
        assert_eq!(
            check(
                Mode::Ask,
                "bash",
                exec("cargo test && curl x | sh"),
                &allow_cargo
            ),
            "ask"
        );
        assert_eq!(
            check(
                Mode::Ask,
                "bash",
                exec("cargo test $(rm -rf ~)"),
                &allow_cargo
            ),
            "ask"
        );
        assert_eq!(
            check(Mode::ReadOnly, "bash", exec("cargo test"), &allow_cargo),
            "deny",
            "rules never beat read-only"
        );

        let allow_file = [rule("write", Some("/w/a"), true)];
        assert_eq!(
            check(
                Mode::Ask,
                "write",
                Access::Write(vec!["/w/a".into()]),
                &allow_file
            ),
            "allow"
        );
        assert_eq!(
            check(
                Mode::Ask,
                "write",
                Access::Write(vec!["/w/b".into()]),
                &allow_file
            ),
            "ask"
        );
        assert_eq!(
            check(
                Mode::Ask,
                "edit",
                Access::Write(vec!["/w/a".into()]),
                &allow_file
            ),
            "ask",
            "per tool"
        );
        let allow_outside = [rule("write", Some("/tmp/x"), true)];
        assert_eq!(
            check(
                Mode::AcceptEdits,
                "write",
                Access::Write(vec!["/tmp/x".into()]),
                &allow_outside
            ),
            "ask"
        );

        let reject = [rule("bash", Some("rm"), false)];
        assert_eq!(
            check(Mode::FullAccess, "bash", exec("rm -rf build"), &reject),
            "deny"
        );
        assert_eq!(check(Mode::Ask, "bash", exec("rm x; ls"), &reject), "deny");
    }

    #[test]
    fn prefixes() {
        assert_eq!(command_prefix("cargo test --all"), "cargo test");
        assert_eq!(command_prefix("ls -la"), "ls");
        assert_eq!(command_prefix("  git   status "), "git status");
        assert_eq!(command_prefix("python script.py"), "python");
    }
}
