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
//!   it (lists, pipelines, subshells, substitutions, `bash -c`, `eval`), with
//!   its literal arguments, or "unknown" when its name is computed at run
//!   time. "Always reject" rules are checked against all of them.

use brush_parser::ast;
use brush_parser::word::WordPiece;

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
/// a substitution or anything else decided at run time.
fn literal(word: &str) -> Option<String> {
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
    for item in simple.suffix.iter().flat_map(|suffix| &suffix.0) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(word) => words.push(plain_argument(&word.value)?),
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
    "command", "builtin", "exec", "env", "nohup", "time", "timeout", "nice", "ionice", "stdbuf",
    "setsid", "chrt", "taskset", "flock", "sudo", "doas", "xargs", "parallel", "find", "watch",
    "strace", "ltrace", "unshare", "nsenter", "chroot", "script", "busybox",
];

/// Shells, whose `-c` argument is a command line of its own.
pub(super) const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
];

fn walk_simple(simple: &ast::SimpleCommand, out: &mut Vec<Invocation>, depth: usize) {
    let mut words: Vec<&str> = Vec::new();
    let items = simple
        .prefix
        .iter()
        .flat_map(|prefix| &prefix.0)
        .chain(simple.suffix.iter().flat_map(|suffix| &suffix.0));
    for item in items {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(word) => words.push(&word.value),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                walk_word(&word.value, out, depth)
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
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
    let program = literal(&name.value).map(|name| super::rules::base_name(&name).to_owned());
    let args: Vec<Option<String>> = words.iter().map(|word| literal(word)).collect();
    if let Some(program) = program.as_deref() {
        if program == "eval" || program == "source" || program == "." {
            let text: Vec<String> = args.iter().flatten().cloned().collect();
            if args.iter().any(Option::is_none) {
                out.push(Invocation::unknown());
            }
            if program == "eval" {
                walk_text(&text.join(" "), out, depth);
            }
        }
        if SHELLS.contains(&program) {
            if let Some(at) = args.iter().position(|arg| arg.as_deref() == Some("-c")) {
                match args.get(at + 1) {
                    Some(Some(text)) => walk_text(text, out, depth),
                    _ => out.push(Invocation::unknown()),
                }
            }
        }
    }
    out.push(Invocation { program, args });
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
