//! `lsp`: the catalog's code navigation (goToDefinition, findReferences,
//! goToImplementation, hover) through the language servers the session's
//! bridge runs, at a one-based line and one-based UTF-16 character. dsh's
//! other queries (symbols, diagnostics, call hierarchy) are `dsh_lsp`'s
//! (dsh_lsp.rs); both are planned into a [`Target`] and run here.
//! Output is grouped by file with the source line, capped; every location
//! also goes to the editor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dsh_lsp_bridge::{Answer, LspError, Operation, Position, Query};
use dsh_protocol::tool::{FileLocation, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{display_path, Refusal, Tool, ToolEnv};
use dsh_protocol::tool::ToolOutcome;

/// What the catalog's description says, in English.
pub const DESCRIPTION: &str = "Query the language server for precise code navigation. operation is one of goToDefinition, findReferences, goToImplementation or hover. line and character are one-based UTF-16 cursor coordinates. findReferences includes the declaration.";

const MAX_LOCATIONS: usize = 100;
const MAX_CHARS: usize = 16_000;

/// The catalog's parameters.
#[derive(Debug, Deserialize)]
pub struct LspArgs {
    pub operation: String,
    pub file_path: String,
    pub line: f64,
    pub character: f64,
}

/// A planned query: what to ask, and where.
#[derive(Debug, Clone)]
pub struct Target {
    pub operation: Operation,
    /// One-based line, when given.
    pub line: Option<u32>,
    /// Where on the line.
    pub column: Column,
}

/// The position on a target's line.
#[derive(Debug, Clone)]
pub enum Column {
    /// None given.
    None,
    /// One-based UTF-16 character.
    Utf16(u32),
    /// A name on the line, looked up by dsh (`dsh_lsp`).
    Symbol(String),
}

/// `lsp`'s operations, as the catalog names them.
const OPERATIONS: [(&str, Operation); 4] = [
    ("goToDefinition", Operation::Definition),
    ("findReferences", Operation::References),
    ("goToImplementation", Operation::Implementation),
    ("hover", Operation::Hover),
];

/// A one-based coordinate given as a JSON number (`12` or `12.0`).
pub(super) fn one_based(name: &str, value: f64) -> Result<u32, Refusal> {
    super::whole_number(value)
        .and_then(|whole| u32::try_from(whole).ok())
        .filter(|&whole| whole >= 1)
        .ok_or_else(|| {
            Refusal::new(
                ErrorCode::InvalidToolArgs,
                format!("{name} must be a whole number of at least 1 (one-based), not {value}."),
            )
        })
}

/// The call's query, checked (the plan keeps it). `dsh_lsp_takes_it`:
/// `dsh_lsp` is offered and the operation is one of its (the refusal
/// points there).
pub fn validate(args: &LspArgs, dsh_lsp_takes_it: bool) -> Result<Target, Refusal> {
    let Some((_, operation)) = OPERATIONS.iter().find(|(name, _)| *name == args.operation) else {
        let elsewhere = if dsh_lsp_takes_it {
            format!(" For {:?}, call {}.", args.operation, Tool::DshLsp.name())
        } else {
            String::new()
        };
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!(
                "Unknown {} operation {:?}: it is one of goToDefinition, findReferences, goToImplementation or hover.{elsewhere}",
                Tool::Lsp.name(),
                args.operation
            ),
        ));
    };
    Ok(Target {
        operation: operation.clone(),
        line: Some(one_based("line", args.line)?),
        column: Column::Utf16(one_based("character", args.character)?),
    })
}

pub fn present(target: &Target, path: &Path, cwd: &Path) -> ToolView {
    let file = display_path(path, cwd);
    let at = match (&target.column, target.line) {
        (Column::Symbol(symbol), _) => format!("`{symbol}` in {file}"),
        (Column::Utf16(character), Some(line)) => format!("{file}:{line}:{character}"),
        (_, Some(line)) => format!("{file}:{line}"),
        _ => file.clone(),
    };
    let title = match &target.operation {
        Operation::Definition => format!("Go to definition of {at}"),
        Operation::References => format!("Find references to {at}"),
        Operation::Implementation => format!("Find implementations of {at}"),
        Operation::Hover => format!("Hover {at}"),
        Operation::DocumentSymbol => format!("List symbols in {file}"),
        Operation::WorkspaceSymbol(query) => format!("Search symbols '{query}'"),
        Operation::Diagnostics => format!("Diagnostics for {file}"),
        Operation::IncomingCalls => format!("Find callers of {at}"),
        Operation::OutgoingCalls => format!("Find calls made by {at}"),
    };
    let kind = match target.operation {
        Operation::Hover | Operation::Diagnostics | Operation::DocumentSymbol => ToolKind::Read,
        _ => ToolKind::Search,
    };
    let line = target.line.unwrap_or(1).max(1);
    ToolView {
        title,
        kind: Some(kind),
        locations: vec![FileLocation {
            path: path.display().to_string(),
            line: Some(line),
        }],
        content: Vec::new(),
    }
}

/// The UTF-16 column of `symbol` on `line` (first whole-word match, else
/// first substring match).
fn symbol_column(line: &str, symbol: &str) -> Option<u32> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let whole = line.match_indices(symbol).find(|(byte, _)| {
        let before = line[..*byte]
            .chars()
            .next_back()
            .is_none_or(|c| !is_word(c));
        let after = line[byte + symbol.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_word(c));
        before && after
    });
    let byte = whole.map(|(b, _)| b).or_else(|| line.find(symbol))?;
    Some(line[..byte].encode_utf16().count() as u32)
}

/// The largest document sent to a language server (the seeds'
/// `maxDocumentBytes`).
const MAX_DOCUMENT_BYTES: u64 = 4_000_000;

async fn file_text(path: &Path, env: &ToolEnv<'_>) -> Result<String, String> {
    super::fs::read_text(path, MAX_DOCUMENT_BYTES, env).await
}

pub async fn run(target: &Target, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let operation = target.operation.clone();
    if path.is_dir() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!("{} is a directory; lsp needs a file.", path.display()),
        );
    }
    let text = match file_text(path, env).await {
        Ok(text) => text,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let position = if operation.needs_position() {
        let Some(line_number) = target.line else {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                "line is required (1-based) for this operation.",
            );
        };
        let Some(line) = text.lines().nth(line_number as usize - 1) else {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "line {line_number} is past the end of {} ({} lines).",
                    path.display(),
                    text.lines().count()
                ),
            );
        };
        let character = match &target.column {
            Column::Symbol(symbol) => match symbol_column(line, symbol) {
                Some(column) => column,
                None => {
                    return ToolOutcome::failed(
                        ErrorCode::InvalidToolArgs,
                        format!("`{symbol}` does not appear on line {line_number}: {:?}. Check the line number.", line.trim()),
                    )
                }
            },
            Column::Utf16(character) => character - 1,
            Column::None => {
                return ToolOutcome::failed(
                    ErrorCode::InvalidToolArgs,
                    "Give the position as symbol (a name on that line) or character (1-based).",
                )
            }
        };
        Some(Position {
            line: line_number - 1,
            character,
        })
    } else {
        None
    };
    let bridge = (env.lsp)();
    let query = Query {
        file: path.to_path_buf(),
        text: text.clone(),
        position,
        operation,
    };
    match bridge.query(&query).await {
        Ok(answer) => render(answer, path, &text, env),
        Err(error) => {
            let code = match &error {
                LspError::Unavailable { .. } => ErrorCode::LspUnavailable,
                LspError::NotReady { .. } => ErrorCode::LspNotReady,
                LspError::TimedOut { .. } => ErrorCode::LspTimedOut,
                LspError::Crashed { .. } => ErrorCode::LspCrashed,
                _ => ErrorCode::LspFailed,
            };
            let prefix = if code == ErrorCode::LspUnavailable {
                "LSP_UNAVAILABLE: "
            } else {
                ""
            };
            ToolOutcome::failed(code, format!("{prefix}{error}"))
        }
    }
}

/// Source lines for rendering, from the query text for the queried file and
/// from disk for others (each file read once).
struct Sources<'a> {
    queried: &'a Path,
    text: &'a str,
    cache: BTreeMap<PathBuf, Vec<String>>,
    /// Other files are quoted only inside these roots…
    roots: &'a [PathBuf],
    /// …and never from a secret location.
    hidden: &'a [PathBuf],
}

impl Sources<'_> {
    fn line(&mut self, path: &Path, line: u32) -> String {
        if path == self.queried {
            return self
                .text
                .lines()
                .nth(line as usize)
                .unwrap_or("")
                .trim()
                .to_owned();
        }
        // A location is the language server's word (a server from the
        // workspace is the repository's): its line is quoted only from a
        // regular file inside the roots, outside the hidden paths, opened
        // without following a link, and at most 1 MiB of it is read.
        let (roots, hidden) = (self.roots, self.hidden);
        let lines = self.cache.entry(path.to_path_buf()).or_insert_with(|| {
            let allowed = roots.iter().any(|root| path.starts_with(root))
                && !hidden.iter().any(|dir| path.starts_with(dir));
            if !allowed {
                return Vec::new();
            }
            let mut text = String::new();
            let read = crate::beneath::open_read(path).ok().and_then(|file| {
                std::io::Read::read_to_string(&mut std::io::Read::take(file, 1 << 20), &mut text)
                    .ok()
            });
            read.map(|_| text.lines().map(str::to_owned).collect())
                .unwrap_or_default()
        });
        lines
            .get(line as usize)
            .map(|l| l.trim().to_owned())
            .unwrap_or_default()
    }
}

fn render(answer: Answer, path: &Path, text: &str, env: &ToolEnv<'_>) -> ToolOutcome {
    let cwd = env.cwd;
    let mut sources = Sources {
        queried: path,
        text,
        cache: BTreeMap::new(),
        roots: env.roots,
        hidden: env.hidden,
    };
    let mut out = String::new();
    let mut locations = Vec::new();
    let mut omitted = 0usize;
    let mut entries: Vec<(PathBuf, u32, u32, String)> = Vec::new();
    match answer {
        Answer::Hover(markdown) if markdown.trim().is_empty() => {
            out.push_str("No hover information at this position.\n")
        }
        Answer::Hover(markdown) => out.push_str(&markdown),
        Answer::Locations(found) => {
            for location in found {
                let line = sources.line(&location.path, location.line);
                entries.push((location.path, location.line, location.character, line));
            }
        }
        Answer::Symbols(found) => {
            for symbol in found {
                let container = symbol
                    .container
                    .map(|c| format!(" (in {c})"))
                    .unwrap_or_default();
                entries.push((
                    symbol.location.path,
                    symbol.location.line,
                    symbol.location.character,
                    format!("{} {}{container}", symbol.kind, symbol.name),
                ));
            }
        }
        Answer::Calls(found) => {
            for call in found {
                let line = sources.line(&call.location.path, call.location.line);
                entries.push((
                    call.location.path,
                    call.location.line,
                    call.location.character,
                    format!("{} — {line}", call.name),
                ));
            }
        }
        Answer::Diagnostics(found) => {
            if found.is_empty() {
                out.push_str(
                    "No diagnostics: the language server reports no problems in this file.\n",
                );
            }
            for diagnostic in found {
                let source = diagnostic
                    .source
                    .map(|s| format!(" [{s}]"))
                    .unwrap_or_default();
                entries.push((
                    diagnostic.location.path,
                    diagnostic.location.line,
                    diagnostic.location.character,
                    format!("{}: {}{source}", diagnostic.severity, diagnostic.message),
                ));
            }
        }
    }
    if out.is_empty() && entries.is_empty() {
        out.push_str("No results.\n");
    }
    // Grouped by file, in first-seen order.
    let mut order: Vec<PathBuf> = Vec::new();
    for (file, ..) in &entries {
        if !order.contains(file) {
            order.push(file.clone());
        }
    }
    let total = entries.len();
    let mut shown = 0usize;
    'files: for file in &order {
        let header = format!("{}\n", display_path(file, cwd));
        if out.len() + header.len() > MAX_CHARS {
            break;
        }
        out.push_str(&header);
        for (_, line, character, detail) in entries.iter().filter(|(f, ..)| f == file) {
            if shown >= MAX_LOCATIONS {
                break 'files;
            }
            let row = format!("  {}:{}  {}\n", line + 1, character + 1, detail);
            if out.len() + row.len() > MAX_CHARS {
                break 'files;
            }
            out.push_str(&row);
            locations.push(FileLocation {
                path: file.display().to_string(),
                line: Some(line + 1),
            });
            shown += 1;
        }
    }
    if shown < total {
        omitted = total - shown;
    }
    if omitted > 0 {
        out.push_str(&format!("({omitted} more omitted)\n"));
    }
    if out.len() > MAX_CHARS {
        let kept = dsh_protocol::content::head_bytes(&out, MAX_CHARS).len();
        out.truncate(kept);
        out.push_str("\n(output truncated)\n");
    }
    let locations = if locations.is_empty() {
        vec![FileLocation {
            path: path.display().to_string(),
            line: None,
        }]
    } else {
        locations
    };
    ToolOutcome::ok(
        out,
        ToolView {
            locations,
            ..ToolView::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_columns_are_utf16_and_whole_words_first() {
        assert_eq!(
            symbol_column("let helper_x = helper();", "helper"),
            Some(15)
        );
        assert_eq!(symbol_column("// héllo 😀 helper()", "helper"), Some(12));
        assert_eq!(symbol_column("nothing here", "helper"), None);
    }

    /// A location the language server names is quoted only from inside
    /// the roots, never from a hidden path or through a link.
    #[cfg(unix)]
    #[test]
    fn lines_are_quoted_only_from_files_inside_the_roots() {
        let work = tempfile::tempdir().unwrap();
        let far = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(work.path()).unwrap();
        let outside = dunce::canonicalize(far.path()).unwrap();
        std::fs::create_dir(root.join(".ssh")).unwrap();
        std::fs::write(root.join("a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(root.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
        std::fs::write(outside.join("b.rs"), "SECRET OUTSIDE\n").unwrap();
        std::os::unix::fs::symlink(outside.join("b.rs"), root.join("link.rs")).unwrap();
        let roots = [root.clone()];
        let hidden = [root.join(".ssh")];
        let mut sources = Sources {
            queried: Path::new("/nowhere"),
            text: "",
            cache: BTreeMap::new(),
            roots: &roots,
            hidden: &hidden,
        };
        assert_eq!(sources.line(&root.join("a.rs"), 0), "fn a() {}");
        assert_eq!(sources.line(&root.join(".ssh/id_rsa"), 0), "");
        assert_eq!(sources.line(&outside.join("b.rs"), 0), "");
        assert_eq!(sources.line(&root.join("link.rs"), 0), "");
    }
}
