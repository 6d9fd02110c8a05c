//! `sed` scripts and `awk` programs that run commands.

use super::*;

pub(super) fn sed(words: &[&str]) -> Option<Reason> {
    let mut scripts = Vec::new();
    let mut sandbox = false;
    let mut operands = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        match *word {
            "--" => {
                operands.extend(words.by_ref());
                break;
            }
            "-e" | "--expression" => scripts.push(words.next().copied().unwrap_or("")),
            "-f" | "--file" => return Some("sed -f runs a script from a file"),
            "-l" | "--line-length" => {
                words.next();
            }
            "--sandbox" => sandbox = true,
            word if word.starts_with("--expression=") => scripts.push(&word[13..]),
            word if word.starts_with("--file=") => return Some("sed -f runs a script from a file"),
            word if is_short(word) => {
                let flags = &word[1..];
                if let Some(at) = flags.find(['e', 'f']) {
                    if flags[at..].starts_with('f') {
                        return Some("sed -f runs a script from a file");
                    }
                    let attached = &flags[at + 1..];
                    scripts.push(if attached.is_empty() {
                        words.next().copied().unwrap_or("")
                    } else {
                        attached
                    });
                }
            }
            word if word.starts_with('-') => {}
            word => operands.push(word),
        }
    }
    if scripts.is_empty() {
        scripts.extend(operands.first());
    }
    (!sandbox && scripts.iter().any(|script| sed_script_runs(script)))
        .then_some("sed's e command and s///e flag run commands")
}

/// Whether a sed script may run a command (the `e` command, the `e` flag
/// of `s`). A script it cannot read counts as running one.
pub(super) fn sed_script_runs(script: &str) -> bool {
    let b: Vec<char> = script.chars().collect();
    let mut i = 0;
    let to_eol = |i: &mut usize| {
        while *i < b.len() && b[*i] != '\n' {
            if b[*i] == '\\' {
                *i += 1;
            }
            *i += 1;
        }
    };
    // Skips a delimited part (`/re/`), escapes included; false at the end.
    let delimited = |i: &mut usize, delim: char| {
        while *i < b.len() {
            match b[*i] {
                '\\' => *i += 2,
                c if c == delim => {
                    *i += 1;
                    return true;
                }
                _ => *i += 1,
            }
        }
        false
    };
    loop {
        while i < b.len() && (b[i].is_whitespace() || b[i] == ';') {
            i += 1;
        }
        if i >= b.len() {
            return false;
        }
        // Addresses: numbers, `$`, `/re/`, `\cREc`, `first~step`, `+N`,
        // `~N`, a range with `,`, then `!`.
        for _ in 0..2 {
            match b[i] {
                '/' => {
                    i += 1;
                    if !delimited(&mut i, '/') {
                        return true;
                    }
                    while i < b.len() && matches!(b[i], 'I' | 'M') {
                        i += 1;
                    }
                }
                '\\' if i + 1 < b.len() => {
                    let delim = b[i + 1];
                    i += 2;
                    if !delimited(&mut i, delim) {
                        return true;
                    }
                }
                _ => {
                    while i < b.len() && (b[i].is_ascii_digit() || matches!(b[i], '$' | '~' | '+'))
                    {
                        i += 1;
                    }
                }
            }
            if i < b.len() && b[i] == ',' {
                i += 1;
            } else {
                break;
            }
        }
        while i < b.len() && (b[i].is_whitespace() || b[i] == '!') {
            i += 1;
        }
        let Some(&command) = b.get(i) else {
            return false;
        };
        i += 1;
        match command {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' => to_eol(&mut i),
            ':' | 'b' | 't' | 'T' | 'v' => {
                while i < b.len() && !matches!(b[i], '\n' | ';' | '}') {
                    i += 1;
                }
            }
            'q' | 'Q' | 'l' | 'L' => {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == ' ') {
                    i += 1;
                }
            }
            's' | 'y' => {
                let Some(&delim) = b.get(i) else {
                    return true;
                };
                i += 1;
                if delim == '\n'
                    || delim == '\\'
                    || !delimited(&mut i, delim)
                    || !delimited(&mut i, delim)
                {
                    return true;
                }
                if command == 's' {
                    while i < b.len() && !matches!(b[i], '\n' | ';' | '}') {
                        match b[i] {
                            'e' => return true,
                            'w' => {
                                to_eol(&mut i);
                                break;
                            }
                            _ => i += 1,
                        }
                    }
                }
            }
            _ => return true,
        }
    }
}

pub(super) fn awk(words: &[&str]) -> Option<Reason> {
    let mut words = words.iter();
    while let Some(word) = words.next() {
        match *word {
            "-f" | "--file" | "-E" | "--exec" | "-i" | "--include" | "-l" | "--load" => {
                return Some("awk runs a program from a file or a library")
            }
            "-F" | "-v" | "--field-separator" | "--assign" => {
                words.next();
            }
            "-e" | "--source" => {
                if awk_program_runs(words.next().copied().unwrap_or("")) {
                    return Some("awk's system() and pipes run commands");
                }
            }
            "--" => {
                return words
                    .next()
                    .is_some_and(|p| awk_program_runs(p))
                    .then_some("awk's system() and pipes run commands")
            }
            word if word.starts_with("-f") || word.starts_with("--file=") => {
                return Some("awk runs a program from a file")
            }
            word if word.starts_with('-') => {}
            program => {
                return awk_program_runs(program).then_some("awk's system() and pipes run commands")
            }
        }
    }
    None
}

/// Whether an awk program may run a command: `system(…)`, a pipe to or
/// from a command, an extension (`@load`).
pub(super) fn awk_program_runs(program: &str) -> bool {
    program.contains("system") || program.contains('|') || program.contains("@load")
}
