//! Shell command lines as the permission policy sees them, parsed by a real
//! bash parser (`brush-parser`) instead of patterns, so quoting, escapes,
//! expansions and nested commands cannot hide what a line runs.
//!
//! Two questions are answered:
//! - [`Analysis::plain`]: is the whole line one simple command made of
//!   literal words (no expansions, substitutions, assignments or file
//!   redirections)? Only such a line can match an "always allow" rule
//!   (see [`super::rules`]).
//! - [`Analysis::programs`]: every program the line could run, anywhere in
//!   it (lists, pipelines, subshells, substitutions, `bash -c`, `eval`,
//!   `trap`/`alias` texts, the command of a wrapper: `env FOO=1 git …`,
//!   `find -exec sh -c …`), with its literal arguments, or "unknown" when
//!   the analysis cannot know what runs: a name computed at run time (`$X`,
//!   `$(…)`, a glob `r[m]`, braces `{rm,x}`), a shell or interpreter
//!   reading a program (`sh < f`, `… | sh`, `python3 <<EOF`, `source f`),
//!   a code-running option (`git grep -O…`; see [`super::code`]). "Always
//!   reject" rules are checked against all of them, and an unknown one
//!   makes the line asked about rather than allowed.

use brush_parser::ast;
use brush_parser::word::WordPiece;

/// The last path component: `/usr/bin/rm` → `rm`.
pub fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// What a command line runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// The literal words when the line is one plain simple command.
    pub plain: Option<Vec<String>>,
    /// Every command the line may run.
    pub programs: Vec<Invocation>,
}

/// One command somewhere in a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program's base name (`/bin/rm`, `\rm` and `'rm'` are all `rm`);
    /// `None` when it is only known at run time (`$cmd`, `${x@P}`).
    pub program: Option<String>,
    /// Its arguments, literal or `None` where an expansion is.
    pub args: Vec<Option<String>>,
}

/// How far nested command texts (`$(…)`, `bash -c …`) are followed.
const MAX_DEPTH: usize = 8;

/// Parses and analyses a command line. A line that does not parse is
/// reported as running an unknown program and is never plain.
pub fn analyze(command: &str) -> Analysis {
    let mut programs = Vec::new();
    let plain = match parse(command) {
        Some(program) => {
            walk_program(&program, &mut programs, 0);
            plain_words(&program)
        }
        None => {
            programs.push(Invocation::unknown());
            None
        }
    };
    Analysis { plain, programs }
}

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

fn parse(command: &str) -> Option<ast::Program> {
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(command), &options());
    parser.parse_program().ok()
}

impl Invocation {
    fn unknown() -> Invocation {
        Invocation {
            program: None,
            args: Vec::new(),
        }
    }
}

/// The literal value of a word, or `None` when it holds an expansion,
/// a substitution, a glob or a brace expansion: anything decided at run
/// time (`/usr/bin/r[m]`, `{rm,-f,x}`).
fn literal(word: &str) -> Option<String> {
    if globs(word) || braces(word) {
        return None;
    }
    let pieces = brush_parser::word::parse(word, &options()).ok()?;
    let mut out = String::new();
    for piece in pieces {
        if !push_literal(&piece.piece, &mut out) {
            return None;
        }
    }
    Some(out)
}

fn push_literal(piece: &WordPiece, out: &mut String) -> bool {
    match piece {
        WordPiece::Text(text)
        | WordPiece::SingleQuotedText(text)
        | WordPiece::AnsiCQuotedText(text) => {
            out.push_str(text);
            true
        }
        WordPiece::EscapeSequence(escaped) => {
            out.push_str(escaped.strip_prefix('\\').unwrap_or(escaped));
            true
        }
        WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
            inner.iter().all(|piece| push_literal(&piece.piece, out))
        }
        WordPiece::TildeExpansion(_)
        | WordPiece::ParameterExpansion(_)
        | WordPiece::CommandSubstitution(_)
        | WordPiece::BackquotedCommandSubstitution(_)
        | WordPiece::ArithmeticExpression(_) => false,
    }
}

/// Whether a word has an unquoted glob (`*`, `?`, `[…]`, `@(…)`): the
/// file system decides what it becomes.
fn globs(word: &str) -> bool {
    let Ok(pieces) = brush_parser::word::parse(word, &options()) else {
        return true;
    };
    let text: String = pieces
        .iter()
        .map(|piece| match &piece.piece {
            WordPiece::Text(text) => text.as_str(),
            // Quoted or expanded: a separator that cannot close `[`.
            _ => "\0",
        })
        .collect();
    text.contains(['*', '?'])
        || ["@(", "!(", "+("].iter().any(|ext| text.contains(ext))
        || text
            .find('[')
            .is_some_and(|open| text[open + 1..].contains(']'))
}

/// Whether a word has a brace expansion (`{a,b}`, `{1..3}`).
fn braces(word: &str) -> bool {
    use brush_parser::word::BraceExpressionOrText;
    match brush_parser::word::parse_brace_expansions(word, &options()) {
        Ok(Some(pieces)) => pieces
            .iter()
            .any(|piece| matches!(piece, BraceExpressionOrText::Expr(_))),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// Whether a word could expand to an option the analysis does not see: it
/// starts with an expansion or a glob (`tar cf a.tar *` with a file named
/// `--checkpoint-action=exec=…`), or it is an option with a glob in it.
fn may_be_option(word: &str) -> bool {
    if braces(word) {
        return true;
    }
    let Ok(pieces) = brush_parser::word::parse(word, &options()) else {
        return true;
    };
    fn starts(piece: &WordPiece) -> Option<char> {
        match piece {
            WordPiece::Text(text)
            | WordPiece::SingleQuotedText(text)
            | WordPiece::AnsiCQuotedText(text) => text.chars().next().or(Some('x')),
            WordPiece::EscapeSequence(text) => text.chars().nth(1).or(Some('x')),
            WordPiece::TildeExpansion(_) => Some('~'),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => match inner.first() {
                Some(first) => starts(&first.piece),
                None => Some('x'),
            },
            _ => None,
        }
    }
    let first = pieces
        .first()
        .map_or(Some('x'), |first| match &first.piece {
            // An unquoted glob character at the start.
            WordPiece::Text(text) if text.starts_with(['*', '?', '[']) => None,
            other => starts(other),
        });
    match first {
        None => true,
        // `--exclude=*.o` keeps its name whatever files match; a glob in
        // the name or in a short cluster (`-n*` against a file `-nOsh`)
        // does not.
        Some('-') => match word.split_once('=') {
            Some((name, _)) if word.starts_with("--") => globs(name),
            _ => globs(word),
        },
        Some(_) => false,
    }
}

/// A literal argument of a plain command: a literal word, or a leading `~`
/// (home) followed by literal text.
fn plain_argument(word: &str) -> Option<String> {
    let pieces = brush_parser::word::parse(word, &options()).ok()?;
    let mut out = String::new();
    for (index, piece) in pieces.iter().enumerate() {
        match &piece.piece {
            WordPiece::TildeExpansion(_) if index == 0 => out.push('~'),
            other => {
                if !push_literal(other, &mut out) {
                    return None;
                }
            }
        }
    }
    Some(out)
}

/// The words of a program that is exactly one simple command without
/// assignments, file redirections or expansions; `2>&1` and redirections
/// to `/dev/null` are allowed.
fn plain_words(program: &ast::Program) -> Option<Vec<String>> {
    let [list] = program.complete_commands.as_slice() else {
        return None;
    };
    let [item] = list.0.as_slice() else {
        return None;
    };
    if matches!(item.1, ast::SeparatorOperator::Async) || !item.0.additional.is_empty() {
        return None;
    }
    let pipeline = &item.0.first;
    if pipeline.timed.is_some() || pipeline.bang {
        return None;
    }
    let [ast::Command::Simple(simple)] = pipeline.seq.as_slice() else {
        return None;
    };
    let mut words = Vec::new();
    for item in simple.prefix.iter().flat_map(|prefix| &prefix.0) {
        if !harmless_redirect(item) {
            return None;
        }
    }
    words.push(literal(&simple.word_or_name.as_ref()?.value)?);
    let guarded = super::code::has_code_options(base_name(&words[0]));
    for item in simple.suffix.iter().flat_map(|suffix| &suffix.0) {
        match item {
            // `name=value` after the program is an argument like any other.
            ast::CommandPrefixOrSuffixItem::Word(word)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                if braces(&word.value) || (guarded && may_be_option(&word.value)) {
                    return None;
                }
                words.push(plain_argument(&word.value)?)
            }
            other if harmless_redirect(other) => {}
            _ => return None,
        }
    }
    Some(words)
}

fn harmless_redirect(item: &ast::CommandPrefixOrSuffixItem) -> bool {
    use ast::{IoFileRedirectKind as Kind, IoFileRedirectTarget as Target};
    let ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) = item else {
        return false;
    };
    match redirect {
        ast::IoRedirect::File(_, Kind::DuplicateOutput | Kind::DuplicateInput, target) => {
            match target {
                Target::Fd(_) => true,
                Target::Duplicate(word) => literal(&word.value)
                    .is_some_and(|fd| fd.chars().all(|c| c.is_ascii_digit() || c == '-')),
                _ => false,
            }
        }
        ast::IoRedirect::File(_, Kind::Write | Kind::Append, Target::Filename(word))
        | ast::IoRedirect::OutputAndError(word, _) => {
            literal(&word.value).as_deref() == Some("/dev/null")
        }
        _ => false,
    }
}

fn walk_program(program: &ast::Program, out: &mut Vec<Invocation>, depth: usize) {
    for list in &program.complete_commands {
        walk_list(list, out, depth);
    }
}

fn walk_text(text: &str, out: &mut Vec<Invocation>, depth: usize) {
    if depth >= MAX_DEPTH {
        out.push(Invocation::unknown());
        return;
    }
    match parse(text) {
        Some(program) => walk_program(&program, out, depth + 1),
        None => out.push(Invocation::unknown()),
    }
}

fn walk_list(list: &ast::CompoundList, out: &mut Vec<Invocation>, depth: usize) {
    for item in &list.0 {
        walk_pipeline(&item.0.first, out, depth);
        for next in &item.0.additional {
            match next {
                ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                    walk_pipeline(pipeline, out, depth)
                }
            }
        }
    }
}

fn walk_pipeline(pipeline: &ast::Pipeline, out: &mut Vec<Invocation>, depth: usize) {
    for command in &pipeline.seq {
        walk_command(command, out, depth);
    }
}

fn walk_command(command: &ast::Command, out: &mut Vec<Invocation>, depth: usize) {
    match command {
        ast::Command::Simple(simple) => walk_simple(simple, out, depth),
        ast::Command::Compound(compound, redirects) => {
            walk_compound(compound, out, depth);
            for redirect in redirects.iter().flat_map(|list| &list.0) {
                walk_redirect(redirect, out, depth);
            }
        }
        ast::Command::Function(function) => walk_compound(&function.body.0, out, depth),
        ast::Command::ExtendedTest(test, _) => walk_opaque(&test.to_string(), out, depth),
    }
}

/// Text the walker does not take apart (arithmetic, `[[ … ]]`): anything
/// that could run a command counts as an unknown program.
fn walk_opaque(text: &str, out: &mut Vec<Invocation>, _depth: usize) {
    if text.contains("$(") || text.contains('`') || text.contains("<(") || text.contains(">(") {
        out.push(Invocation::unknown());
    }
}

fn walk_compound(compound: &ast::CompoundCommand, out: &mut Vec<Invocation>, depth: usize) {
    use ast::CompoundCommand as C;
    match compound {
        C::BraceGroup(group) => walk_list(&group.list, out, depth),
        C::Subshell(subshell) => walk_list(&subshell.list, out, depth),
        C::ForClause(clause) => {
            for word in clause.values.iter().flatten() {
                walk_word(&word.value, out, depth);
            }
            walk_list(&clause.body.list, out, depth);
        }
        C::CaseClause(clause) => {
            walk_word(&clause.value.value, out, depth);
            for case in &clause.cases {
                for pattern in &case.patterns {
                    walk_word(&pattern.value, out, depth);
                }
                if let Some(list) = &case.cmd {
                    walk_list(list, out, depth);
                }
            }
        }
        C::IfClause(clause) => {
            walk_list(&clause.condition, out, depth);
            walk_list(&clause.then, out, depth);
            for branch in clause.elses.iter().flatten() {
                if let Some(condition) = &branch.condition {
                    walk_list(condition, out, depth);
                }
                walk_list(&branch.body, out, depth);
            }
        }
        C::WhileClause(clause) | C::UntilClause(clause) => {
            walk_list(&clause.0, out, depth);
            walk_list(&clause.1.list, out, depth);
        }
        C::ArithmeticForClause(clause) => {
            walk_opaque(&compound.to_string(), out, depth);
            walk_list(&clause.body.list, out, depth);
        }
        C::Arithmetic(_) => walk_opaque(&compound.to_string(), out, depth),
        C::Coprocess(coprocess) => walk_command(&coprocess.body, out, depth),
    }
}

fn walk_redirect(redirect: &ast::IoRedirect, out: &mut Vec<Invocation>, depth: usize) {
    match redirect {
        ast::IoRedirect::File(_, _, target) => match target {
            ast::IoFileRedirectTarget::Filename(word)
            | ast::IoFileRedirectTarget::Duplicate(word) => walk_word(&word.value, out, depth),
            ast::IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                walk_list(&subshell.list, out, depth)
            }
            ast::IoFileRedirectTarget::Fd(_) => {}
        },
        ast::IoRedirect::HereString(_, word) | ast::IoRedirect::OutputAndError(word, _) => {
            walk_word(&word.value, out, depth)
        }
        ast::IoRedirect::HereDocument(_, here) => walk_opaque(&here.doc.value, out, depth),
    }
}

/// Follows the command substitutions inside a word; an expansion that can
/// run code by itself (`${x@P}`, `${!x}`, `${a[$(…)]}`) counts as an
/// unknown program.
fn walk_word(word: &str, out: &mut Vec<Invocation>, depth: usize) {
    let Ok(pieces) = brush_parser::word::parse(word, &options()) else {
        out.push(Invocation::unknown());
        return;
    };
    for piece in pieces {
        walk_piece(&piece.piece, out, depth);
    }
}

fn walk_piece(piece: &WordPiece, out: &mut Vec<Invocation>, depth: usize) {
    match piece {
        WordPiece::CommandSubstitution(text) | WordPiece::BackquotedCommandSubstitution(text) => {
            walk_text(text, out, depth)
        }
        WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
            for piece in inner {
                walk_piece(&piece.piece, out, depth);
            }
        }
        WordPiece::ParameterExpansion(expression) => {
            if !simple_parameter(expression) {
                out.push(Invocation::unknown());
            }
        }
        WordPiece::ArithmeticExpression(expression) => {
            walk_opaque(&expression.value, out, depth);
        }
        WordPiece::Text(_)
        | WordPiece::SingleQuotedText(_)
        | WordPiece::AnsiCQuotedText(_)
        | WordPiece::EscapeSequence(_)
        | WordPiece::TildeExpansion(_) => {}
    }
}

/// `$name`, `${name}` and special parameters (`$1`, `$?`): they expand to a
/// value and run nothing.
fn simple_parameter(expression: &brush_parser::word::ParameterExpr) -> bool {
    use brush_parser::word::{Parameter, ParameterExpr};
    matches!(
        expression,
        ParameterExpr::Parameter {
            parameter: Parameter::Named(_) | Parameter::Positional(_) | Parameter::Special(_),
            indirect: false,
        }
    )
}

/// Programs that run the command given in their arguments.
pub(super) const WRAPPERS: &[&str] = &[
    "command",
    "builtin",
    "exec",
    "env",
    "nohup",
    "time",
    "timeout",
    "nice",
    "ionice",
    "stdbuf",
    "setsid",
    "chrt",
    "taskset",
    "flock",
    "sudo",
    "doas",
    "xargs",
    "parallel",
    "find",
    "watch",
    "strace",
    "ltrace",
    "unshare",
    "nsenter",
    "chroot",
    "script",
    "busybox",
    "su",
    "runuser",
    "sg",
    "systemd-run",
    "dbus-run-session",
    "ssh-agent",
    "firejail",
    "bwrap",
    "fakeroot",
    "valgrind",
    "hyperfine",
    "entr",
    "perf",
];

/// Shells, whose `-c` argument is a command line of its own.
pub(super) const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
];

/// A word of a command: its text, its literal value (`None` when decided
/// at run time), and whether it could expand to an unseen option.
struct Arg<'a> {
    raw: &'a str,
    value: Option<String>,
    may_be_option: bool,
}

fn walk_simple(simple: &ast::SimpleCommand, out: &mut Vec<Invocation>, depth: usize) {
    let mut words: Vec<&str> = Vec::new();
    // Text given on the standard input by here-documents and here-strings.
    let mut input: Vec<String> = Vec::new();
    let prefix = simple.prefix.iter().flat_map(|prefix| &prefix.0);
    let suffix = simple.suffix.iter().flat_map(|suffix| &suffix.0);
    for (item, in_suffix) in prefix.map(|i| (i, false)).chain(suffix.map(|i| (i, true))) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(word) => words.push(&word.value),
            // After the program, `name=value` is an argument (`env FOO=1`,
            // `alias ls=…`); before it, an assignment, and one to `PATH`,
            // `LD_PRELOAD`, `BASH_ENV`… changes what runs.
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) if in_suffix => {
                words.push(&word.value)
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                if super::code::assigned_name(&word.value).is_some_and(super::code::loads_code) {
                    out.push(Invocation::unknown());
                }
                walk_word(&word.value, out, depth)
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                match redirect {
                    ast::IoRedirect::HereString(_, word) => {
                        input.push(literal(&word.value).unwrap_or_else(|| word.value.clone()))
                    }
                    ast::IoRedirect::HereDocument(_, here) => input.push(here.doc.value.clone()),
                    _ => {}
                }
                walk_redirect(redirect, out, depth)
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                walk_list(&subshell.list, out, depth)
            }
        }
    }
    let Some(name) = &simple.word_or_name else {
        return;
    };
    walk_word(&name.value, out, depth);
    for word in &words {
        walk_word(word, out, depth);
    }
    let program = literal(&name.value).map(|name| base_name(&name).to_owned());
    let args: Vec<Arg<'_>> = words
        .iter()
        .map(|word| Arg {
            raw: word,
            value: literal(word),
            may_be_option: may_be_option(word),
        })
        .collect();
    walk_invocation(program, &args, &input, out, depth);
}

/// Records one command and follows what it runs in turn: the text of
/// `eval`, `bash -c`, `trap`, `alias`; the command of a wrapper. A command
/// whose words do not show what it runs (see [`super::code`]) is also
/// recorded as an unknown program.
fn walk_invocation(
    program: Option<String>,
    args: &[Arg<'_>],
    input: &[String],
    out: &mut Vec<Invocation>,
    depth: usize,
) {
    use super::code::{self, ShellRuns, Wrapped};
    let values: Vec<Option<String>> = args.iter().map(|arg| arg.value.clone()).collect();
    out.push(Invocation {
        program: program.clone(),
        args: values.clone(),
    });
    let Some(program) = program.as_deref() else {
        return;
    };
    let opaque = |out: &mut Vec<Invocation>| out.push(Invocation::unknown());
    if program == "eval" {
        if values.iter().any(Option::is_none) {
            opaque(out);
        }
        let text: Vec<String> = values.iter().flatten().cloned().collect();
        walk_text(&text.join(" "), out, depth);
    } else if program == "source" || program == "." {
        // Runs a file the line does not show.
        opaque(out);
    } else if SHELLS.contains(&program) {
        match code::shell_runs(program, &values) {
            ShellRuns::Text(text) => walk_text(&text, out, depth),
            ShellRuns::Unknown => {
                opaque(out);
                for text in input {
                    walk_text(text, out, depth);
                }
            }
        }
    } else if WRAPPERS.contains(&program) {
        match code::wrapped(program, &values) {
            Wrapped::Nothing => {}
            Wrapped::At(commands) => {
                for (start, end) in commands {
                    let inner = values[start]
                        .as_deref()
                        .map(|name| base_name(name).to_owned());
                    walk_invocation(inner, &args[start + 1..end], input, out, depth);
                }
            }
            Wrapped::Text(text) => {
                // `env -S` splits its text its own way: the shell's reading
                // of it is a guess.
                if program == "env" {
                    opaque(out);
                }
                walk_text(&text, out, depth);
            }
            Wrapped::Unknown => {
                opaque(out);
                // Still follow a shell's `-c` text, wherever it starts.
                for (at, value) in values.iter().enumerate() {
                    let Some(shell) = value.as_deref().map(base_name) else {
                        continue;
                    };
                    if SHELLS.contains(&shell) {
                        if let ShellRuns::Text(text) = code::shell_runs(shell, &values[at + 1..]) {
                            walk_text(&text, out, depth);
                        }
                    }
                }
            }
        }
    } else if code::is_interpreter(program) {
        opaque(out);
    } else {
        if program == "trap" {
            // `trap 'text' SIGNAL…`: the text runs later.
            let operands: Vec<&Option<String>> = values
                .iter()
                .filter(|value| value.as_deref().is_none_or(|v| !v.starts_with('-')))
                .collect();
            if operands.len() >= 2 {
                match operands[0] {
                    Some(text) => walk_text(text, out, depth),
                    None => opaque(out),
                }
            }
        }
        if program == "alias" {
            for value in &values {
                match value.as_deref().and_then(|v| v.split_once('=')) {
                    Some((_, text)) => walk_text(text, out, depth),
                    None if value.is_none() => opaque(out),
                    None => {}
                }
            }
        }
        if program == "hash" {
            // `hash -p /bin/rm ls`: `ls` now runs `/bin/rm`.
            if let Some(at) = values.iter().position(|v| v.as_deref() == Some("-p")) {
                out.push(Invocation {
                    program: values
                        .get(at + 1)
                        .cloned()
                        .flatten()
                        .map(|path| base_name(&path).to_owned()),
                    args: Vec::new(),
                });
            }
        }
        let raw: Vec<&str> = args.iter().map(|arg| arg.raw).collect();
        let may: Vec<bool> = args.iter().map(|arg| arg.may_be_option).collect();
        if code::unknown_words_run_code(program, &values, &raw, &may)
            || code::runs_code(program, &values).is_some()
        {
            opaque(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(command: &str) -> Option<Vec<String>> {
        analyze(command).plain
    }

    #[test]
    fn only_literal_simple_commands_are_plain() {
        assert_eq!(
            plain("ls -la 'a b' \"c\" d\\ e"),
            Some(vec![
                "ls".into(),
                "-la".into(),
                "a b".into(),
                "c".into(),
                "d e".into()
            ])
        );
        assert_eq!(
            plain("cargo test 2>&1"),
            Some(vec!["cargo".into(), "test".into()])
        );
        assert_eq!(plain("ls > /dev/null"), Some(vec!["ls".into()]));
        for hostile in [
            "ls; touch x",
            "ls && touch x",
            "ls | sh",
            "ls $(touch x)",
            "ls `touch x`",
            "ls\ntouch x",
            "ls > out.txt",
            "ls ${x:=a}${x@P}",
            "ls ${!x}",
            "ls ${y[x]}",
            "ls $HOME",
            "FOO=1 ls",
            "ls <(touch x)",
            "ls &",
            "(ls)",
            "{ ls; }",
            "ls $((1+2))",
            "ls 'unterminated",
        ] {
            assert_eq!(plain(hostile), None, "{hostile}");
        }
    }
}
