//! What a command rule is and what it matches: the scope an "always"
//! answer stores for a plain command ([`scope`]: the program as written and
//! its subcommand, never for programs that run arbitrary code nor for an
//! invocation with a code-running option, see [`super::code`]), and
//! whether a line could run a program a reject rule names
//! ([`reject_matches`]: through spellings and wrappers; "maybe" when the
//! line is opaque). Reject rules are best-effort: a line can hide what it
//! runs (a copy of `rm` under another name, a script that deletes); the
//! kernel sandbox is the boundary.

use super::shell::{base_name, Analysis, Invocation, SHELLS, WRAPPERS};

/// Whether `program` could run the program called `wanted`: it is that
/// program, or a wrapper that names it among its arguments.
fn runs(invocation: &Invocation, wanted: &str) -> bool {
    match invocation.program.as_deref() {
        Some(program) if program == wanted => true,
        Some(program) if WRAPPERS.contains(&program) => invocation
            .args
            .iter()
            .flatten()
            .any(|arg| base_name(arg) == wanted),
        _ => false,
    }
}

/// How a reject rule relates to a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The line runs the rejected command.
    Yes,
    /// The line runs something only known at run time.
    Maybe,
    /// It does not.
    No,
}

/// Whether a line runs what a reject rule names (`rm`, `git push`): any
/// command in it, unwrapped, whose program is the rule's (by base name)
/// and, for a two-word rule, which has the rule's subcommand among its
/// literal arguments.
pub fn reject_matches(analysis: &Analysis, scope: &[&str]) -> Match {
    let Some((program, rest)) = scope.split_first() else {
        return Match::No;
    };
    let program = base_name(program);
    let mut maybe = false;
    for invocation in &analysis.programs {
        if invocation.program.is_none() {
            maybe = true;
            continue;
        }
        if !runs(invocation, program) {
            continue;
        }
        if rest
            .iter()
            .all(|word| invocation.args.iter().flatten().any(|arg| arg == word))
        {
            return Match::Yes;
        }
        if invocation.args.iter().any(Option::is_none) {
            maybe = true;
        }
    }
    if maybe {
        Match::Maybe
    } else {
        Match::No
    }
}

/// Programs that can run arbitrary code given in their arguments or on
/// their standard input: an "always allow" for them would allow anything,
/// so it is never offered. Interpreters are listed once, in
/// `code::INTERPRETERS`.
fn runs_arbitrary_code(program: &str) -> bool {
    const NAMES: &[&str] = &[
        "eval", "source", ".", "exec", "command", "builtin", "env", "xargs", "find", "sed", "gsed",
        "awk", "gawk", "mawk", "nawk", "sudo", "doas", "su", "nohup", "time", "timeout", "nice",
        "ionice", "setsid", "stdbuf", "chrt", "taskset", "flock", "watch", "strace", "ltrace",
        "chroot", "unshare", "nsenter", "script", "busybox", "ssh", "make", "xdg-open",
    ];
    NAMES.contains(&program)
        || SHELLS.contains(&program)
        || WRAPPERS.contains(&program)
        || super::code::is_interpreter(program)
}

/// Programs whose first argument is a subcommand worth scoping a rule to.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "go",
    "docker",
    "podman",
    "kubectl",
    "pip",
    "pip3",
    "uv",
    "poetry",
    "pipenv",
    "pdm",
    "hatch",
    "conda",
    "bundle",
    "gem",
    "rustup",
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
    "nix",
    "swift",
    "mix",
    "stack",
    "cabal",
    "zig",
];

/// Options allowed before a subcommand in a rule's command: they change
/// output, never what runs (`git --no-pager log`).
const SAFE_GLOBAL_OPTIONS: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--paginate",
    "-p",
    "--quiet",
    "-q",
    "--verbose",
    "--no-color",
    "--color",
    "--offline",
    "--frozen",
    "--locked",
];

/// Subcommands that run whatever their next argument names: the scope
/// includes that argument (`npm run build`, `uv run pytest`).
const RUN_SUBCOMMANDS: &[(&str, &str)] = &[
    ("npm", "run"),
    ("npm", "run-script"),
    ("pnpm", "run"),
    ("yarn", "run"),
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("conda", "run"),
    ("bundle", "exec"),
    ("just", "run"),
];

/// Subcommands that run arbitrary code from their arguments or the
/// network: never offered "always allow".
const ARBITRARY_SUBCOMMANDS: &[(&str, &str)] = &[
    ("go", "run"),
    ("go", "generate"),
    ("deno", "run"),
    ("deno", "eval"),
    ("deno", "x"),
    ("npm", "exec"),
    ("npm", "x"),
    ("pnpm", "dlx"),
    ("pnpm", "exec"),
    ("yarn", "dlx"),
    ("yarn", "exec"),
    ("bun", "x"),
    ("bun", "exec"),
    ("docker", "run"),
    ("docker", "exec"),
    ("podman", "run"),
    ("podman", "exec"),
    ("kubectl", "exec"),
    ("kubectl", "run"),
    ("nix", "run"),
    ("nix", "shell"),
    ("nix", "develop"),
    ("uv", "tool"),
    ("cargo", "install"),
    ("gh", "extension"),
    ("git", "submodule"),
    ("git", "filter-branch"),
];

fn is_plain_token(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.' | '@'))
}

/// The rule an "always" answer would store for a plain command: the
/// program as written, plus its subcommand where it has one (`git log`,
/// `cargo test`) and the target of a run-style subcommand (`npm run
/// build`). `None` when no rule could be stored safely: the program runs
/// arbitrary code, an option runs a command ([`super::code`]), or an
/// option before the subcommand could change what runs (`git -c
/// core.pager=… log`).
pub fn scope(words: &[String]) -> Option<Vec<String>> {
    let (program, rest) = words.split_first()?;
    let base = base_name(program);
    if base.is_empty() || runs_arbitrary_code(base) {
        return None;
    }
    // An option that runs a command (`git grep -O…`, `tar
    // --checkpoint-action=exec=…`): the rule would cover any command.
    let args: Vec<Option<String>> = rest.iter().cloned().map(Some).collect();
    if super::code::runs_code(base, &args).is_some() {
        return None;
    }
    if !SUBCOMMAND_PROGRAMS.contains(&base) {
        return Some(vec![program.clone()]);
    }
    let mut rest = rest.iter().peekable();
    while let Some(word) = rest.peek() {
        if !word.starts_with('-') {
            break;
        }
        if !SAFE_GLOBAL_OPTIONS.contains(&word.as_str()) {
            return None;
        }
        rest.next();
    }
    let Some(sub) = rest.next() else {
        return Some(vec![program.clone()]);
    };
    if !is_plain_token(sub) || ARBITRARY_SUBCOMMANDS.contains(&(base, sub.as_str())) {
        return None;
    }
    if RUN_SUBCOMMANDS.contains(&(base, sub.as_str())) {
        let target = rest.next().filter(|target| is_plain_token(target))?;
        return Some(vec![program.clone(), sub.clone(), target.clone()]);
    }
    Some(vec![program.clone(), sub.clone()])
}

#[cfg(test)]
mod tests {
    use super::super::shell::analyze;
    use super::*;

    fn scope_of(command: &str) -> Option<String> {
        analyze(command)
            .plain
            .and_then(|words| scope(&words))
            .map(|words| words.join(" "))
    }

    fn rejects(command: &str, rule: &str) -> Match {
        let words: Vec<&str> = rule.split_whitespace().collect();
        reject_matches(&analyze(command), &words)
    }

    #[test]
    fn scopes_are_the_command_and_its_subcommand() {
        assert_eq!(
            scope_of("git --no-pager log -5").as_deref(),
            Some("git log")
        );
        assert_eq!(scope_of("cargo test --all").as_deref(), Some("cargo test"));
        assert_eq!(
            scope_of("npm run build -- --watch").as_deref(),
            Some("npm run build")
        );
        assert_eq!(scope_of("ls -la").as_deref(), Some("ls"));
        assert_eq!(scope_of("./gradlew build").as_deref(), Some("./gradlew"));
        for never in [
            "git -c core.fsmonitor=evil log",
            "git --exec-path=/tmp log",
            "timeout 5 ls",
            "env ls",
            "command ls",
            "xargs ls",
            "sed -n 1p x",
            "find . -name x",
            "awk '{print}' x",
            "python3 x.py",
            "bash x.sh",
            "npx cowsay",
            "go run main.go",
            "docker run alpine",
            "npm run",
        ] {
            assert_eq!(scope_of(never), None, "{never}");
        }
    }

    #[test]
    fn reject_rules_see_through_spellings_and_wrappers() {
        for command in [
            "rm -rf x",
            "/bin/rm x",
            "\\rm x",
            "'rm' x",
            "command rm x",
            "env FOO=1 rm x",
            "timeout 5 rm x",
            "ls; rm x",
            "ls | xargs rm",
            "find . -exec rm {} +",
            "echo $(rm x)",
            "bash -c 'rm x'",
            "sh -c \"ls && rm x\"",
            "eval rm x",
            "if true; then rm x; fi",
            "for f in a; do rm $f; done",
        ] {
            assert_eq!(rejects(command, "rm"), Match::Yes, "{command}");
        }
        assert_eq!(rejects("ls -la", "rm"), Match::No);
        assert_eq!(rejects("$cmd x", "rm"), Match::Maybe);
        assert_eq!(rejects("ls ${x@P}", "rm"), Match::Maybe);
        assert_eq!(rejects("git -C x push origin", "git push"), Match::Yes);
        assert_eq!(rejects("git log", "git push"), Match::No);
    }
}
