//! Shell command lines as the permission policy sees them, parsed by a real
//! bash parser (`brush-parser`) instead of patterns, so quoting, escapes,
//! expansions and nested commands cannot hide what a line runs.
//!
//! Two questions are answered:
//! - [`Analysis::plain`]: is the whole line one simple command made of
//!   literal words (no expansions, substitutions, assignments or file
//!   redirections)? Only such a line can match an "always allow" rule, and
//!   [`scope`] says which rule an answer would store for it.
//! - [`Analysis::programs`]: every program the line could run, anywhere in
//!   it (lists, pipelines, subshells, substitutions, `bash -c`, wrappers
//!   such as `env`, `timeout`, `xargs`, `find -exec`), by base name, or
//!   "unknown" when the name is computed at run time. "Always reject" rules
//!   are checked against all of them.

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
const WRAPPERS: &[&str] = &[
    "command", "builtin", "exec", "env", "nohup", "time", "timeout", "nice", "ionice", "stdbuf",
    "setsid", "chrt", "taskset", "flock", "sudo", "doas", "xargs", "parallel", "find", "watch",
    "strace", "ltrace", "unshare", "nsenter", "chroot", "script", "busybox",
];

/// Shells, whose `-c` argument is a command line of its own.
const SHELLS: &[&str] = &[
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
    let program = literal(&name.value).map(|name| base_name(&name).to_owned());
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

/// The last path component: `/usr/bin/rm` → `rm`.
pub fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

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
/// so it is never offered.
fn runs_arbitrary_code(program: &str) -> bool {
    const NAMES: &[&str] = &[
        "eval",
        "source",
        ".",
        "exec",
        "command",
        "builtin",
        "env",
        "xargs",
        "parallel",
        "find",
        "sed",
        "gsed",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "perl",
        "ruby",
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
        "sudo",
        "doas",
        "su",
        "nohup",
        "time",
        "timeout",
        "nice",
        "ionice",
        "setsid",
        "stdbuf",
        "chrt",
        "taskset",
        "flock",
        "watch",
        "strace",
        "ltrace",
        "gdb",
        "lldb",
        "chroot",
        "unshare",
        "nsenter",
        "script",
        "busybox",
        "expect",
        "ssh",
        "vim",
        "vi",
        "nvim",
        "emacs",
        "tmux",
        "screen",
        "make",
        "xdg-open",
    ];
    NAMES.contains(&program)
        || SHELLS.contains(&program)
        || WRAPPERS.contains(&program)
        || program.starts_with("python")
        || program.starts_with("pypy")
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
/// arbitrary code, or an option before the subcommand could change what
/// runs (`git -c core.pager=… log`).
pub fn scope(words: &[String]) -> Option<Vec<String>> {
    let (program, rest) = words.split_first()?;
    let base = base_name(program);
    if base.is_empty() || runs_arbitrary_code(base) {
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
    use super::*;

    fn plain(command: &str) -> Option<Vec<String>> {
        analyze(command).plain
    }

    fn scope_of(command: &str) -> Option<String> {
        plain(command)
            .and_then(|words| scope(&words))
            .map(|words| words.join(" "))
    }

    fn rejects(command: &str, rule: &str) -> Match {
        let words: Vec<&str> = rule.split_whitespace().collect();
        reject_matches(&analyze(command), &words)
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
