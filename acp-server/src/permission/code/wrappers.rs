//! Wrappers and shells: where the command a wrapper (`env`, `nice`,
//! `xargs`, `find -exec`, …) runs is in its words, and what text a shell
//! is given to run.

use super::*;

/// Where a wrapper's command is, in its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wrapped {
    /// It runs no command (`command -v ls`, `exec` with redirections only).
    Nothing,
    /// The command is these arguments, `start..end` (`find` may have more
    /// than one `-exec`); the first is the program.
    At(Vec<(usize, usize)>),
    /// It runs this shell text (`watch rm x`, `flock f -c 'rm x'`, `env -S`).
    Text(String),
    /// What it runs cannot be told from its words.
    Unknown,
}

/// Where the command a wrapper runs is. `args` are its arguments; `None`
/// where a word is known only at run time.
pub fn wrapped(program: &str, args: &[Option<String>]) -> Wrapped {
    let words: Vec<&str> = args
        .iter()
        .map(|arg| arg.as_deref().unwrap_or(""))
        .collect();
    let literal = |at: usize| args.get(at).is_some_and(Option::is_some);
    // Skips options: `flags` take nothing, `valued` take a value (attached
    // or the next word); returns the index of the first operand.
    let skip =
        |flags: &str, valued: &str, longs_valued: &[&str], longs: &[&str]| -> Option<usize> {
            let mut at = 0;
            while let Some(word) = words.get(at) {
                if !literal(at) {
                    return None;
                }
                if *word == "--" {
                    return Some(at + 1);
                }
                if let Some(name) = word.strip_prefix("--") {
                    let (name, has_value) = match name.split_once('=') {
                        Some((name, _)) => (name, true),
                        None => (name, false),
                    };
                    if longs.contains(&name) {
                        at += 1;
                    } else if longs_valued.contains(&name) {
                        at += if has_value { 1 } else { 2 };
                    } else {
                        return None;
                    }
                    continue;
                }
                if !is_short(word) {
                    return Some(at);
                }
                let mut next = at + 1;
                for (index, c) in word[1..].char_indices() {
                    if valued.contains(c) {
                        if index + c.len_utf8() + 1 == word.len() {
                            next += 1;
                        }
                        break;
                    }
                    if !flags.contains(c) {
                        return None;
                    }
                }
                at = next;
            }
            Some(at)
        };
    let at = |index: Option<usize>| match index {
        Some(index) if index < args.len() => {
            if literal(index) {
                Wrapped::At(vec![(index, args.len())])
            } else {
                Wrapped::Unknown
            }
        }
        Some(_) => Wrapped::Nothing,
        None => Wrapped::Unknown,
    };
    match program {
        "command" => {
            let first = skip("pvV", "", &[], &[]);
            let prints = words
                .iter()
                .take(first.unwrap_or(0))
                .any(|w| is_short(w) && (w.contains('v') || w.contains('V')));
            if prints {
                Wrapped::Nothing
            } else {
                at(first)
            }
        }
        "builtin" | "nohup" | "busybox" => at(skip("", "", &[], &[])),
        "exec" => at(skip("cl", "a", &[], &[])),
        "time" => at(skip(
            "pvqa",
            "fo",
            &["format", "output"],
            &["append", "verbose", "portability", "quiet"],
        )),
        "nice" => {
            // `nice -10 cmd`: a number as an option.
            let numeric = words.first().is_some_and(|w| {
                w.len() > 1 && w.starts_with('-') && w[1..].chars().all(|c| c.is_ascii_digit())
            });
            if numeric {
                at(Some(1))
            } else {
                at(skip("", "n", &["adjustment"], &[]))
            }
        }
        "ionice" => at(skip("t", "cn", &["class", "classdata"], &["ignore"])),
        "stdbuf" => at(skip("", "ioe", &["input", "output", "error"], &[])),
        "setsid" => at(skip("cfw", "", &[], &["ctty", "fork", "wait"])),
        "timeout" => match skip(
            "v",
            "sk",
            &["signal", "kill-after"],
            &["preserve-status", "foreground", "verbose"],
        ) {
            // The duration, then the command.
            Some(duration) => at(Some(duration + 1)),
            None => Wrapped::Unknown,
        },
        "taskset" => match skip("ac", "", &[], &["all-tasks", "cpu-list"]) {
            Some(mask) => at(Some(mask + 1)),
            None => Wrapped::Unknown,
        },
        "env" => env(args),
        "xargs" => {
            let first = skip(
                "0rtpxel",
                "adEILnPs",
                &[
                    "arg-file",
                    "delimiter",
                    "eof",
                    "max-lines",
                    "max-args",
                    "max-procs",
                    "max-chars",
                    "process-slot-var",
                ],
                &[
                    "null",
                    "no-run-if-empty",
                    "verbose",
                    "interactive",
                    "exit",
                    "open-tty",
                ],
            );
            // `-I{}`/`-i`: the command is a template filled from the input.
            let replaces = words.iter().take(first.unwrap_or(args.len())).any(|w| {
                (is_short(w) && (w.contains('I') || w.contains('i'))) || w.starts_with("--replace")
            });
            match first {
                _ if replaces => Wrapped::Unknown,
                Some(index) if index >= args.len() => Wrapped::Nothing,
                other => at(other),
            }
        }
        "find" => find(args),
        "watch" => {
            let first = skip(
                "bcdegptwxCr",
                "nq",
                &["interval", "differences", "equexit"],
                &[
                    "beep", "color", "errexit", "chgexit", "precise", "no-title", "no-wrap",
                    "exec", "no-rerun",
                ],
            );
            let exec = words
                .iter()
                .take(first.unwrap_or(0))
                .any(|w| *w == "--exec" || (is_short(w) && w.contains('x')));
            match first {
                Some(index) if exec => at(Some(index)),
                Some(index) if args[index.min(args.len())..].iter().all(Option::is_some) => {
                    Wrapped::Text(words[index.min(words.len())..].join(" "))
                }
                _ => Wrapped::Unknown,
            }
        }
        "flock" => {
            // `flock [opts] file -c 'text'` or `flock [opts] file cmd …`.
            let text = words.iter().position(|w| *w == "-c" || *w == "--command");
            match text {
                Some(index) if literal(index + 1) => Wrapped::Text(words[index + 1].to_owned()),
                Some(_) => Wrapped::Unknown,
                None => match skip(
                    "sxenuoF",
                    "wE",
                    &["timeout", "conflict-exit-code"],
                    &[
                        "shared",
                        "exclusive",
                        "nonblock",
                        "unlock",
                        "close",
                        "no-fork",
                        "verbose",
                    ],
                ) {
                    Some(file) if file + 1 < args.len() => at(Some(file + 1)),
                    Some(_) => Wrapped::Nothing,
                    None => Wrapped::Unknown,
                },
            }
        }
        "script" => match words.iter().position(|w| *w == "-c" || *w == "--command") {
            Some(index) if literal(index + 1) => Wrapped::Text(words[index + 1].to_owned()),
            // Without -c it starts an interactive shell reading its input.
            _ => Wrapped::Unknown,
        },
        "su" => match words.iter().position(|w| *w == "-c" || *w == "--command") {
            Some(index) if literal(index + 1) => Wrapped::Text(words[index + 1].to_owned()),
            _ => Wrapped::Unknown,
        },
        _ => Wrapped::Unknown,
    }
}

fn env(args: &[Option<String>]) -> Wrapped {
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        let Some(word) = arg.as_deref() else {
            return Wrapped::Unknown;
        };
        if let Some(name) = assigned_name(word) {
            if loads_code(name) {
                return Wrapped::Unknown;
            }
            at += 1;
            continue;
        }
        if word == "--" || word == "-" {
            at += 1;
            continue;
        }
        if let Some(long_option) = word.strip_prefix("--") {
            let (name, value) = match long_option.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long_option, None),
            };
            match name {
                "split-string" => {
                    return match value.or_else(|| args.get(at + 1).and_then(|a| a.as_deref())) {
                        Some(text) => Wrapped::Text(text.to_owned()),
                        None => Wrapped::Unknown,
                    }
                }
                "unset" | "chdir" | "argv0" if value.is_none() => at += 2,
                "unset"
                | "chdir"
                | "argv0"
                | "ignore-environment"
                | "null"
                | "debug"
                | "block-signal"
                | "default-signal"
                | "ignore-signal"
                | "list-signal-handling" => at += 1,
                _ => return Wrapped::Unknown,
            }
            continue;
        }
        if !is_short(word) {
            return if at < args.len() {
                Wrapped::At(vec![(at, args.len())])
            } else {
                Wrapped::Nothing
            };
        }
        let mut next = at + 1;
        for (index, c) in word[1..].char_indices() {
            let attached = &word[1 + index + c.len_utf8()..];
            match c {
                'i' | '0' | 'v' => continue,
                'S' => {
                    let text = if attached.is_empty() {
                        args.get(at + 1).and_then(|a| a.as_deref())
                    } else {
                        Some(attached)
                    };
                    return text.map_or(Wrapped::Unknown, |t| Wrapped::Text(t.to_owned()));
                }
                'u' | 'C' | 'a' => {
                    if attached.is_empty() {
                        next += 1;
                    }
                    break;
                }
                _ => return Wrapped::Unknown,
            }
        }
        at = next;
    }
    Wrapped::Nothing
}

/// `find … -exec cmd … ;`: each command after `-exec`, `-execdir`, `-ok`
/// and `-okdir`. A command named by `{}` (the file found) is unknown.
fn find(args: &[Option<String>]) -> Wrapped {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < args.len() {
        if matches!(
            args[at].as_deref(),
            Some("-exec" | "-execdir" | "-ok" | "-okdir")
        ) {
            let start = at + 1;
            at = start;
            while at < args.len() && !matches!(args[at].as_deref(), Some(";" | "+")) {
                at += 1;
            }
            match args.get(start) {
                Some(Some(command)) if !command.contains("{}") => starts.push((start, at)),
                Some(_) => return Wrapped::Unknown,
                None => {}
            }
        }
        at += 1;
    }
    if starts.is_empty() {
        Wrapped::Nothing
    } else {
        Wrapped::At(starts)
    }
}

/// What a shell invocation runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellRuns {
    /// The command text given with `-c`.
    Text(String),
    /// Code the line does not show: a script file, its standard input,
    /// an option that runs code, a `-c` text only known at run time.
    Unknown,
}

/// What `sh`, `bash`, `zsh`, `fish`… run given these arguments: only
/// `-c 'literal text'` with harmless options is known.
pub fn shell_runs(program: &str, args: &[Option<String>]) -> ShellRuns {
    const LONGS: &[&str] = &[
        "--login",
        "--norc",
        "--noprofile",
        "--posix",
        "--noediting",
        "--restricted",
        "--verbose",
        "--no-config",
        "--private",
        "--interactive",
    ];
    let mut command = false;
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        let Some(word) = arg.as_deref() else {
            return ShellRuns::Unknown;
        };
        if word == "--" || word == "-" {
            at += 1;
            break;
        }
        if word.starts_with("--") {
            if word == "--command" && program == "fish" {
                command = true;
            } else if !LONGS.contains(&word) {
                return ShellRuns::Unknown;
            }
            at += 1;
            continue;
        }
        if !(word.len() > 1 && (word.starts_with('-') || word.starts_with('+'))) {
            break;
        }
        let mut next = at + 1;
        for c in word[1..].chars() {
            match c {
                'c' => command = true,
                'o' | 'O' => next += 1,
                // Reads commands from its input; fish's -C runs init code.
                's' => return ShellRuns::Unknown,
                'C' if program == "fish" => return ShellRuns::Unknown,
                _ => {}
            }
        }
        at = next;
    }
    match args.get(at) {
        Some(Some(text)) if command => ShellRuns::Text(text.clone()),
        // `-c` without text is an error; runs nothing.
        None if command => ShellRuns::Text(String::new()),
        // A script file, or commands from its input.
        _ => ShellRuns::Unknown,
    }
}
