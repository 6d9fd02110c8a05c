//! Commands whose words do not show what they run: options that name a
//! command or load code (`git grep -O…`, `tar --checkpoint-action=exec=…`),
//! builtins that keep code for later (`trap`, `alias`), interpreters and
//! shells reading a program, and wrappers around another command.
//!
//! Two things follow from a command being here (see [`super::rules`] and
//! [`super::shell`]): no allow rule matches it and "always" is not offered
//! for it (a rule for `git grep` must not cover `git grep -O'sh x'`), and
//! the line is *opaque* to reject rules — they cannot see what it runs, so
//! a line that a reject rule could concern is asked about, not allowed.
//!
//! The tables follow what other agents treat as unsafe and extend it:
//! codex's `is_known_safe_command` (codex-rs/core/src/command_safety/
//! is_safe_command.rs) refuses `git -c`/`-c…`/`--config-env`, `--ext-diff`,
//! `--textconv`, `--exec`, `--output`, `find -exec/-execdir/-ok/-okdir/
//! -delete/-fls/-fprint*` (`find` is never "always" here), `rg
//! --pre/--hostname-bin/-z`; Claude Code's
//! permission docs say a Bash deny rule "isn't a security boundary around
//! the program" (code.claude.com/docs/en/permissions, "Bash rule limits").
//! The rest comes from each program's manual: every option that takes a
//! command, a program, a script or a configuration that can name one.
//!
//! Options are matched the way the programs parse them: `--opt=value` and
//! `--opt value`, unambiguous abbreviations of long options (`--upload`,
//! `--checkpoint-act`; GNU getopt and git's parse-options accept them),
//! and short options inside clusters (`-nO`, `-cIf`, `-ave`).

/// Why a command's words do not tell what it runs.
pub type Reason = &'static str;

/// General-purpose interpreters: whatever their arguments (a script, `-c`,
/// `-e`, standard input), they run a program the line does not show.
pub const INTERPRETERS: &[&str] = &[
    "perl",
    "ruby",
    "irb",
    "node",
    "nodejs",
    "deno",
    "bun",
    "bunx",
    "npx",
    "pnpx",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "Rscript",
    "julia",
    "osascript",
    "pwsh",
    "powershell",
    "expect",
    "gdb",
    "lldb",
    "java",
    "jshell",
    "vim",
    "vi",
    "nvim",
    "view",
    "vimdiff",
    "ex",
    "emacs",
    "emacsclient",
    "tmux",
    "screen",
    "at",
    "batch",
    "crontab",
    "systemd-run",
    "parallel",
];

/// Whether the whole command is a program the line does not show.
pub fn is_interpreter(program: &str) -> bool {
    INTERPRETERS.contains(&program)
        || program.starts_with("python")
        || program.starts_with("pypy")
        || program.starts_with("perl5")
}

/// Variables that choose what a command runs or loads (`PATH=. ls`,
/// `LD_PRELOAD=x.so ls`, `BASH_ENV=f bash -c …`, `PAGER='sh x' git log`).
pub fn loads_code(variable: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "LESSOPEN",
        "LESSCLOSE",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "TAR_OPTIONS",
        "RSYNC_RSH",
        "RUSTC_WRAPPER",
        "RUSTC",
    ];
    const PREFIXES: &[&str] = &[
        "LD_",
        "GIT_",
        "BASH_FUNC_",
        "CARGO_",
        "npm_config_",
        "NPM_CONFIG_",
    ];
    NAMES.contains(&variable) || PREFIXES.iter().any(|prefix| variable.starts_with(prefix))
}

/// The name of a `NAME=value` word, when it is one.
pub fn assigned_name(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '%'))
    .then_some(name)
}

/// Whether the program has options that can run code: a word it gets that
/// is only known at run time (an expansion, a leading glob: `tar cf a *`
/// with a file named `--checkpoint-action=exec=sh x`) could be one.
pub fn has_code_options(program: &str) -> bool {
    const PROGRAMS: &[&str] = &[
        "git", "tar", "gtar", "bsdtar", "sort", "zip", "rsync", "ssh", "scp", "sftp", "rg", "fd",
        "fdfind", "man", "less", "more", "cargo", "npm", "pnpm", "yarn", "go", "make", "gmake",
        "sed", "gsed", "awk", "gawk", "mawk", "nawk", "pip", "pip3", "uv", "gem",
    ];
    PROGRAMS.contains(&program) || BUILTINS.contains(&program)
}

/// Shell builtins that keep code for later, load it, or evaluate array
/// subscripts in the names they are given (`printf -v 'a[$(cmd)]'`).
const BUILTINS: &[&str] = &[
    "trap",
    "alias",
    "hash",
    "enable",
    "complete",
    "compgen",
    "bind",
    "fc",
    "mapfile",
    "readarray",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "unset",
    "read",
    "printf",
    "test",
    "[",
    "let",
    "wait",
    "getopts",
];

/// Why `program` (a base name, not a wrapper, shell or interpreter) with
/// these arguments runs code its words do not show; `None` when it does
/// not. Arguments known only at run time are `None`.
pub fn runs_code(program: &str, args: &[Option<String>]) -> Option<Reason> {
    let words: Vec<&str> = args
        .iter()
        .map(|arg| arg.as_deref().unwrap_or(""))
        .collect();
    let opts = options(&words);
    match program {
        "git" => git(&words),
        "tar" | "gtar" | "bsdtar" => tar(&words),
        "sort" => opts
            .iter()
            .any(|o| long(o, "compress-program", &[]).is_some())
            .then_some("sort --compress-program runs a program"),
        "zip" => opts
            .iter()
            .any(|o| (is_short(o) && o.contains("TT")) || long(o, "unzip-command", &[]).is_some())
            .then_some("zip -TT/--unzip-command runs a command"),
        "rsync" => rsync(&opts),
        "ssh" | "scp" | "sftp" => ssh(program, &words),
        "rg" => opts
            .iter()
            .any(|o| {
                short_has(o, "z", "ABCEefgjMmrTtd")
                    || ["pre", "hostname-bin", "search-zip"]
                        .iter()
                        .any(|name| long(o, name, &["pre-glob"]).is_some())
            })
            .then_some("rg --pre/--hostname-bin/-z runs programs"),
        "fd" | "fdfind" => opts
            .iter()
            .any(|o| {
                short_has(o, "xX", "eEtdSjc")
                    || long(o, "exec", &[]).is_some()
                    || long(o, "exec-batch", &[]).is_some()
            })
            .then_some("fd -x/--exec runs a command"),
        "man" => opts
            .iter()
            .any(|o| {
                short_has(o, "PHC", "MmLSsRlep")
                    || ["pager", "html", "config-file"]
                        .iter()
                        .any(|name| long(o, name, &[]).is_some())
            })
            .then_some("man -P/-H/-C names a program to run"),
        // `+cmd` runs a pager command (`+!sh`); `+N` only moves.
        "less" | "more" => words
            .iter()
            .any(|w| {
                w.strip_prefix('+')
                    .is_some_and(|cmd| !cmd.chars().all(|c| c.is_ascii_digit()))
                    || *w == "-k"
                    || long(w, "lesskey-file", &[]).is_some()
                    || long(w, "lesskey-src", &[]).is_some()
            })
            .then_some("less +commands and lesskey files run commands"),
        "cargo" => opts
            .iter()
            .any(|o| long(o, "config", &[]).is_some())
            .then_some("cargo --config can name a runner or a wrapper"),
        "npm" | "pnpm" | "yarn" => npm(&words, &opts),
        "pip" | "pip3" => pip_installs(&words).then_some("installing a package runs its code"),
        "uv" => (words.first() == Some(&"add")
            || (words.first() == Some(&"pip") && pip_installs(&words[1..])))
        .then_some("installing a package runs its code"),
        "gem" => (words.first() == Some(&"install")).then_some("installing a gem runs its code"),
        "go" => opts
            .iter()
            .any(|o| {
                let flag = o.trim_start_matches('-');
                o.starts_with('-')
                    && ["exec", "toolexec", "vettool"]
                        .iter()
                        .any(|name| flag == *name || flag.starts_with(&format!("{name}=")))
            })
            .then_some("go -exec/-toolexec/-vettool runs a program"),
        "make" | "gmake" => make(&words),
        "sed" | "gsed" => sed(&words),
        "awk" | "gawk" | "mawk" | "nawk" => awk(&words),
        _ if BUILTINS.contains(&program) => builtin(program, args, &words),
        _ => None,
    }
}

/// Whether a word of `program` known only at run time (an expansion, a
/// glob) could make it run code: become one of its code-running options,
/// or a variable name whose array subscript bash evaluates
/// (`unset "$x"` with `x='a[$(cmd)]'`). `may_be_option` tells which words
/// could expand to an option; `raw` are the words as written.
pub fn unknown_words_run_code(
    program: &str,
    args: &[Option<String>],
    raw: &[&str],
    may_be_option: &[bool],
) -> bool {
    let unknown_subscript = args
        .iter()
        .zip(raw)
        .any(|(value, raw)| value.is_none() && raw.contains('['));
    match program {
        // A unary operator (`-v name`) from an expansion.
        "test" | "[" => {
            let operands = if program == "[" && raw.last() == Some(&"]") {
                &may_be_option[..may_be_option.len() - 1]
            } else {
                may_be_option
            };
            let is_operator_position = |at: usize| {
                at == 0
                    || matches!(
                        args[at - 1].as_deref(),
                        Some("!" | "-a" | "-o" | "(" | "&&" | "||")
                    )
            };
            let binary = |at: usize| {
                matches!(
                    args.get(at).and_then(Option::as_deref),
                    Some(
                        "=" | "=="
                            | "!="
                            | "=~"
                            | "<"
                            | ">"
                            | "-eq"
                            | "-ne"
                            | "-lt"
                            | "-le"
                            | "-gt"
                            | "-ge"
                            | "-nt"
                            | "-ot"
                            | "-ef"
                    )
                )
            };
            let names_variable = |at: usize| {
                matches!(args[at].as_deref(), Some("-v" | "-R"))
                    && may_be_option.get(at + 1) == Some(&true)
            };
            unknown_subscript
                || (0..operands.len()).any(|at| {
                    names_variable(at)
                        || (operands[at]
                            && is_operator_position(at)
                            && at + 1 < operands.len()
                            && !binary(at + 1))
                })
        }
        "printf" => {
            may_be_option.first() == Some(&true)
                || (args.first().is_some_and(|a| a.as_deref() == Some("-v"))
                    && (may_be_option.get(1) == Some(&true) || unknown_subscript))
        }
        _ if BUILTINS.contains(&program) => {
            unknown_subscript
                || may_be_option.iter().any(|may| *may)
                || raw
                    .iter()
                    .any(|word| assigned_name(word).is_some_and(loads_code))
        }
        _ if has_code_options(program) => may_be_option.iter().any(|may| *may),
        _ => false,
    }
}

/// The words before `--`.
fn options<'a>(words: &[&'a str]) -> Vec<&'a str> {
    words.iter().copied().take_while(|w| *w != "--").collect()
}

fn is_short(word: &str) -> bool {
    word.len() > 1 && word.starts_with('-') && !word.starts_with("--")
}

/// Whether a short-option cluster (`-nO`, `-ave`) holds one of `wanted`
/// before an option that takes the rest of the cluster as its value.
fn short_has(word: &str, wanted: &str, takes_value: &str) -> bool {
    if !is_short(word) {
        return false;
    }
    for c in word[1..].chars() {
        if wanted.contains(c) {
            return true;
        }
        if takes_value.contains(c) {
            return false;
        }
    }
    false
}

/// `--name`, `--name=value` or an abbreviation of `--name` (not one of
/// `exact`, other options of the program that `name` starts with): the
/// value given with `=`, or `Some(None)`.
fn long<'a>(word: &'a str, name: &str, exact: &[&str]) -> Option<Option<&'a str>> {
    let rest = word.strip_prefix("--")?;
    let (given, value) = match rest.split_once('=') {
        Some((given, value)) => (given, Some(value)),
        None => (rest, None),
    };
    (!given.is_empty() && name.starts_with(given) && !exact.contains(&given)).then_some(value)
}

fn git(words: &[&str]) -> Option<Reason> {
    let mut at = 0;
    while let Some(word) = words.get(at) {
        if !word.starts_with('-') || *word == "--" {
            break;
        }
        if word.starts_with("-c") || long(word, "config-env", &[]).is_some() {
            return Some("git -c/--config-env sets configuration that names commands");
        }
        if word.starts_with("--exec-path=") {
            return Some("git --exec-path runs git commands from another directory");
        }
        let takes_value = matches!(
            *word,
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix" | "--list-cmds"
        );
        at += if takes_value { 2 } else { 1 };
    }
    let sub = words.get(at).copied()?;
    let rest = options(&words[at + 1..]);
    if rest
        .iter()
        .any(|o| long(o, "ext-diff", &[]).is_some() || long(o, "textconv", &["text"]).is_some())
    {
        return Some("git --ext-diff/--textconv runs configured diff programs");
    }
    // Writes what it prints (text the line chooses with --format) to a
    // file it names: `.envrc`, `.vscode/tasks.json` become code.
    if rest.iter().any(|o| long(o, "output", &[]).is_some()) {
        return Some("git --output writes a file the command names");
    }
    let any = |test: &dyn Fn(&str) -> bool| rest.iter().any(|o| test(o));
    let found = match sub {
        "grep" => {
            any(&|o| short_has(o, "O", "efABCm") || long(o, "open-files-in-pager", &[]).is_some())
        }
        "fetch" | "pull" | "ls-remote" => {
            any(&|o| short_has(o, "u", "") || long(o, "upload-pack", &[]).is_some())
        }
        "clone" => any(&|o| {
            short_has(o, "uc", "obj")
                || ["upload-pack", "template", "config"]
                    .iter()
                    .any(|name| long(o, name, &[]).is_some())
        }),
        "push" => {
            any(&|o| long(o, "receive-pack", &[]).is_some() || long(o, "exec", &[]).is_some())
        }
        "archive" => any(&|o| long(o, "exec", &[]).is_some()),
        "rebase" => any(&|o| short_has(o, "x", "sXSC") || long(o, "exec", &[]).is_some()),
        "difftool" | "mergetool" => {
            any(&|o| short_has(o, "x", "t") || long(o, "extcmd", &[]).is_some())
        }
        "send-email" => any(&|o| {
            [
                "sendmail-cmd",
                "smtp-server",
                "to-cmd",
                "cc-cmd",
                "header-cmd",
            ]
            .iter()
            .any(|name| long(o, name, &[]).is_some())
        }),
        "bisect" => rest.first() == Some(&"run"),
        "submodule" => rest.contains(&"foreach"),
        "filter-branch" => true,
        "config" => git_config_sets(&rest),
        _ => false,
    };
    found.then_some("this git command runs a command given on its command line")
}

/// Whether `git config …` changes the configuration (which can name a
/// pager, an alias, a hook path: commands later git commands run).
fn git_config_sets(words: &[&str]) -> bool {
    let mut positional = 0;
    let mut words = words.iter();
    while let Some(word) = words.next() {
        match *word {
            "--add" | "--replace-all" | "--rename-section" | "--remove-section" => return true,
            "--get" | "--get-all" | "--get-regexp" | "--get-urlmatch" | "--get-color"
            | "--get-colorbool" | "-l" | "--list" => return false,
            "-f" | "--file" | "--blob" | "--type" | "--default" | "--comment" | "--value" => {
                words.next();
            }
            "set" | "rename-section" | "remove-section" if positional == 0 => return true,
            "get" | "list" if positional == 0 => return false,
            word if word.starts_with('-') => {}
            _ => positional += 1,
        }
    }
    positional >= 2
}

fn tar(words: &[&str]) -> Option<Reason> {
    const LONG: &[&str] = &[
        "to-command",
        "checkpoint-action",
        "use-compress-program",
        "rsh-command",
        "info-script",
        "new-volume-script",
    ];
    let opts = options(words);
    // Traditional syntax: the first word is a cluster without a dash, its
    // options' values follow as words (`tar cIf prog a.tar`).
    let traditional = opts
        .first()
        .is_some_and(|w| !w.starts_with('-') && (w.contains('I') || w.contains('F')));
    let found = traditional
        || opts.iter().any(|o| {
            short_has(o, "IF", "bCfgHKLNTVX")
                || LONG
                    .iter()
                    .any(|name| long(o, name, &["checkpoint"]).is_some())
        });
    found.then_some("tar --to-command/--checkpoint-action/-I/-F/--rsh-command runs a command")
}

/// `rsync -e CMD`/`--rsh=CMD` (anything but plain `ssh`) and
/// `--rsync-path=CMD` run a command.
fn rsync(opts: &[&str]) -> Option<Reason> {
    let mut words = opts.iter();
    while let Some(word) = words.next() {
        let rsh = if long(word, "rsync-path", &[]).is_some() {
            return Some("rsync --rsync-path runs a command");
        } else if let Some(value) = long(word, "rsh", &[]) {
            value.or_else(|| words.next().copied())
        } else if short_has(word, "e", "BfTM@") {
            let attached = &word[word.find('e').map_or(word.len(), |at| at + 1)..];
            if attached.is_empty() {
                words.next().copied()
            } else {
                Some(attached)
            }
        } else {
            continue;
        };
        if rsh != Some("ssh") {
            return Some("rsync -e/--rsh runs a command");
        }
    }
    None
}

fn ssh(program: &str, words: &[&str]) -> Option<Reason> {
    const KEYS: &[&str] = &[
        "proxycommand",
        "localcommand",
        "permitlocalcommand",
        "match",
        "knownhostscommand",
        "include",
        "pkcs11provider",
        "securitykeyprovider",
    ];
    let (takes_value, code) = match program {
        "scp" => ("cDFiJlmoPSX", "FSD"),
        "sftp" => ("BbcDFiJlNoPRSsX", "FSD"),
        _ => ("BbcDEeFIiJLlmOoPpQRSWw", "FI"),
    };
    let mut words = options(words).into_iter();
    while let Some(word) = words.next() {
        if !is_short(word) {
            continue;
        }
        for (at, c) in word[1..].char_indices() {
            if !takes_value.contains(c) {
                continue;
            }
            if code.contains(c) {
                return Some("ssh -F/-S/-D/-I names a program or configuration to run");
            }
            let attached = &word[1 + at + c.len_utf8()..];
            let value = if attached.is_empty() {
                words.next().unwrap_or("")
            } else {
                attached
            };
            if c == 'o' {
                let key = value
                    .split(|c: char| c == '=' || c.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if KEYS.contains(&key.as_str()) {
                    return Some("ssh -o ProxyCommand/LocalCommand/Match exec runs a command");
                }
            }
            break;
        }
    }
    None
}

fn npm(words: &[&str], opts: &[&str]) -> Option<Reason> {
    if opts.iter().any(|o| {
        ["script-shell", "userconfig", "globalconfig", "node-options"]
            .iter()
            .any(|name| long(o, name, &[]).is_some())
    }) {
        return Some("npm --script-shell/--userconfig chooses what scripts run with");
    }
    let mut rest = words.iter().filter(|w| !w.starts_with('-'));
    let installs = matches!(
        rest.next().copied(),
        Some("install" | "i" | "add" | "isntall" | "in" | "ins" | "inst")
    );
    (installs && rest.next().is_some()).then_some("installing a package runs its install scripts")
}

/// `pip install <package>`: a named package (not the project itself, `.`,
/// nor a requirements file) whose build runs its code.
fn pip_installs(words: &[&str]) -> bool {
    if words.first() != Some(&"install") {
        return false;
    }
    let mut words = words[1..].iter();
    while let Some(word) = words.next() {
        match *word {
            "-r" | "--requirement" | "-c" | "--constraint" | "-e" | "--editable" => {
                words.next();
            }
            word if word.starts_with('-') => {}
            "." | "./" => {}
            _ => return true,
        }
    }
    false
}

fn make(words: &[&str]) -> Option<Reason> {
    let opts = options(words);
    let mut words = opts.iter();
    while let Some(word) = words.next() {
        if *word == "-E" || long(word, "eval", &[]).is_some() || assigned_name(word).is_some() {
            return Some("make --eval and variable overrides put code in the command line");
        }
        let file = match long(word, "file", &[]).or_else(|| long(word, "makefile", &[])) {
            Some(Some(value)) => Some(value),
            Some(None) => words.next().copied(),
            None if *word == "-f" => words.next().copied(),
            None => word.strip_prefix("-f").filter(|f| !f.is_empty()),
        };
        if file.is_some_and(|f| f == "-" || f.starts_with("/dev/") || f.starts_with("/proc/")) {
            return Some("make reads a makefile from its input");
        }
    }
    None
}

fn builtin(program: &str, args: &[Option<String>], words: &[&str]) -> Option<Reason> {
    let opts = options(words);
    // `a[$(cmd)]`: bash evaluates the subscript of a name it is given.
    if words
        .iter()
        .any(|w| w.contains('[') && (w.contains('$') || w.contains('`')))
    {
        return Some("an array subscript in a variable name runs its substitutions");
    }
    let found = match program {
        "trap" => {
            // `trap ACTION SIGNAL…`; `trap -`, `trap '' SIG` and `trap SIG`
            // reset or ignore.
            let operands: Vec<&Option<String>> = args
                .iter()
                .filter(|arg| arg.as_deref().is_none_or(|w| !w.starts_with('-')))
                .collect();
            operands.len() >= 2 && operands[0].as_deref() != Some("")
        }
        "alias" => words.iter().any(|w| w.contains('=')),
        "hash" => opts.iter().any(|o| short_has(o, "p", "")),
        "enable" => opts.iter().any(|o| short_has(o, "f", "")),
        "complete" | "compgen" => opts.iter().any(|o| short_has(o, "CF", "AGWXPSo")),
        "bind" => opts.iter().any(|o| short_has(o, "x", "mqufrf")),
        "fc" => true,
        "mapfile" | "readarray" => opts.iter().any(|o| short_has(o, "C", "dnOsuc")),
        "declare" | "typeset" | "local" | "export" | "readonly" => words
            .iter()
            .any(|w| assigned_name(w).is_some_and(loads_code)),
        _ => false,
    };
    found.then_some("this builtin keeps or loads code for later")
}

mod scripts;
mod wrappers;

use scripts::{awk, sed};

pub use wrappers::{shell_runs, wrapped, ShellRuns, Wrapped};

#[cfg(test)]
mod tests;
