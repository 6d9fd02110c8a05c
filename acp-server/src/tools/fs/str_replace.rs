//! `str_replace_editor` (opt-in: `[tools] enable`): view a file (`cat -n`
//! lines, or a range of them) or a directory (two levels, hidden entries
//! left out), create a file, replace one unique literal string, insert
//! lines after a line. Everything around a change is `write`'s and
//! `edit`'s: the current text through the editor when it has the file
//! open ([`current_text`]), the write through the editor or dsh's
//! link-safe writer ([`store`]), the same diff shown to the editor and the
//! same summary ([`describe_change`]); planning gives the permission policy
//! a read for `view` and a write for the others, so the turn keeps what a
//! write replaces for `/undo` exactly as for `edit`.
//!
//! `path` is absolute in the catalog; a relative one is accepted too and
//! resolved against the session's working directory, like every other
//! file tool's.

use std::path::{Path, PathBuf};

use dsh_protocol::tool::{ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::change::{describe_change, find, in_line_endings};
use super::disk::{blocking, current_text, probe, store, Current, Probe};
use super::{location, MAX_DIFF_BYTES, MAX_EDIT_BYTES, MAX_LINE_CHARS, MAX_READ_BYTES};
use crate::tools::{display_path, Refusal, ToolEnv};

pub const STR_REPLACE_EDITOR_DESCRIPTION: &str = "A custom editing tool for viewing, creating and editing files.
* State is persistent across command calls and discussions with the user.
* If `path` is a file, `view` displays the result of applying `cat -n`. If `path` is a directory, `view` lists non-hidden files and directories up to 2 levels deep.
* The `create` command cannot be used if the specified `path` already exists as a file.
* If a `command` generates a long output, it will be truncated and marked with `<response clipped>`.
* A parameter the current command does not use may be a null placeholder: it is treated as not provided. Required parameters must still have values; to delete the matched text, omit `new_str` of `str_replace` rather than setting it to null.

Notes for using the `str_replace` command:
* The `old_str` parameter should match EXACTLY one or more consecutive lines from the original file. Be mindful of whitespace!
* If the `old_str` parameter is not unique in the file, the replacement will not be performed. Make sure to include enough context in `old_str` to make it unique.
* The `new_str` parameter should contain the edited lines that should replace the `old_str`.";

/// Lines of context around a change in the snippet the model is shown.
const SNIPPET_CONTEXT: usize = 4;
/// Longest snippet, in lines.
const SNIPPET_LINES: usize = 60;
/// Directory levels `view` lists.
const VIEW_DEPTH: usize = 2;
/// Entries of one directory `view` keeps (and sorts); the rest are counted.
const VIEW_ENTRIES: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Command {
    View,
    Create,
    StrReplace,
    Insert,
}

/// The arguments as the catalog has them.
#[derive(Debug, Deserialize)]
pub struct EditorArgs {
    command: Command,
    pub path: String,
    #[serde(default)]
    file_text: Option<String>,
    #[serde(default)]
    insert_line: Option<i64>,
    /// Omitted (`None`) and null (`Some(None)`) differ for `str_replace`.
    #[serde(default, deserialize_with = "given")]
    new_str: Option<Option<String>>,
    #[serde(default)]
    old_str: Option<String>,
    #[serde(default)]
    view_range: Option<Vec<i64>>,
}

/// A parameter that is there, null or not.
fn given<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(de).map(Some)
}

/// A checked call.
#[derive(Debug)]
pub enum EditorCall {
    /// Lines `first..=last` (`None`: to the end) of a file, or a directory.
    View {
        first: u64,
        last: Option<u64>,
    },
    Create {
        text: String,
    },
    Replace {
        old: String,
        new: String,
    },
    /// `text` after line `after` (0: at the start).
    Insert {
        after: u64,
        text: String,
    },
}

impl EditorCall {
    /// Checks the arguments a command needs (null placeholders are
    /// omitted parameters, but for `new_str` of `str_replace`).
    ///
    /// # Errors
    /// A parameter the command needs is missing or out of range.
    pub fn check(args: EditorArgs) -> Result<EditorCall, Refusal> {
        check(args)
    }

    /// Whether it changes the file.
    pub fn writes(&self) -> bool {
        !matches!(self, EditorCall::View { .. })
    }

    /// The pending presentation of a call on `path`.
    pub fn present(&self, path: &Path, cwd: &Path) -> ToolView {
        present(self, path, cwd)
    }

    /// Runs it on `path`.
    pub async fn run(&self, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
        run(self, path, env).await
    }
}

fn refused(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::InvalidToolArgs, message)
}

fn check(args: EditorArgs) -> Result<EditorCall, Refusal> {
    match args.command {
        Command::View => {
            let Some(range) = args.view_range else {
                return Ok(EditorCall::View {
                    first: 1,
                    last: None,
                });
            };
            let [first, last] = range[..] else {
                return Err(refused(format!(
                    "view_range must be two integers, [start_line, end_line] (got {} values).",
                    range.len()
                )));
            };
            if first < 1 {
                return Err(refused(format!(
                    "view_range starts at {first}; lines are numbered from 1."
                )));
            }
            if last != -1 && last < first {
                return Err(refused(format!(
                    "view_range [{first}, {last}] ends before it starts; use -1 as the end to show every line from {first}."
                )));
            }
            Ok(EditorCall::View {
                first: first as u64,
                last: (last != -1).then_some(last as u64),
            })
        }
        Command::Create => match args.file_text {
            Some(text) => Ok(EditorCall::Create { text }),
            None => Err(refused(
                "create needs file_text, the content of the file to create.",
            )),
        },
        Command::StrReplace => {
            let old = args.old_str.unwrap_or_default();
            if old.is_empty() {
                return Err(refused(
                    "str_replace needs old_str, the exact text to replace (it may not be empty).",
                ));
            }
            let new = match args.new_str {
                None => String::new(),
                Some(Some(new)) => new,
                Some(None) => {
                    return Err(refused(
                        "new_str is null: to delete old_str, omit new_str instead of setting it to null.",
                    ))
                }
            };
            if old == new {
                return Err(refused(
                    "old_str and new_str are identical; nothing to change.",
                ));
            }
            Ok(EditorCall::Replace { old, new })
        }
        Command::Insert => {
            let Some(after) = args.insert_line else {
                return Err(refused(
                    "insert needs insert_line, the line after which new_str goes (0: at the start).",
                ));
            };
            let after = u64::try_from(after).map_err(|_| {
                refused(format!(
                    "insert_line is {after}; it is a line number, 0 to insert at the start."
                ))
            })?;
            let Some(Some(text)) = args.new_str else {
                return Err(refused("insert needs new_str, the text to insert."));
            };
            Ok(EditorCall::Insert { after, text })
        }
    }
}

fn present(call: &EditorCall, path: &Path, cwd: &Path) -> ToolView {
    let shown = display_path(path, cwd);
    let (title, line) = match call {
        EditorCall::View {
            first: 1,
            last: None,
        } => (format!("View {shown}"), 1),
        EditorCall::View { first, .. } => (format!("View {shown} (from line {first})"), *first),
        EditorCall::Create { .. } => (format!("Create {shown}"), 1),
        EditorCall::Replace { .. } => (format!("Edit {shown}"), 1),
        EditorCall::Insert { after, .. } => {
            (format!("Insert into {shown} after line {after}"), after + 1)
        }
    };
    let kind = if call.writes() {
        ToolKind::Edit
    } else {
        ToolKind::Read
    };
    ToolView {
        title,
        kind: Some(kind),
        locations: vec![location(path, line as u32)],
        content: Vec::new(),
    }
}

async fn run(call: &EditorCall, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let result = match call {
        EditorCall::View { first, last } => view(path, *first, *last, env).await,
        EditorCall::Create { text } => create(path, text, env).await,
        EditorCall::Replace { old, new } => replace(path, old, new, env).await,
        EditorCall::Insert { after, text } => insert(path, *after, text, env).await,
    };
    result.unwrap_or_else(|message| ToolOutcome::failed(ErrorCode::InvalidToolArgs, message))
}

async fn view(
    path: &Path,
    first: u64,
    last: Option<u64>,
    env: &ToolEnv<'_>,
) -> Result<ToolOutcome, String> {
    let owned = path.to_path_buf();
    match blocking(move || probe(&owned)).await? {
        Probe::Missing => return Err(format!("File not found: {}", path.display())),
        Probe::Directory if first == 1 && last.is_none() => {
            let (owned, secrets) = (path.to_path_buf(), env.hidden.to_vec());
            let cancel = env.cancel.clone();
            let listing = blocking(move || Ok(list(&owned, &secrets, &cancel))).await?;
            let view = ToolView {
                locations: vec![location(path, 1)],
                ..ToolView::default()
            };
            return Ok(ToolOutcome::ok(listing, view));
        }
        Probe::Directory => {
            return Err(format!(
                "{} is a directory; view_range applies to files only.",
                path.display()
            ))
        }
        Probe::Image { what, .. } => {
            return Err(format!(
                "{} is an image ({what}), not text; view shows text files.",
                path.display()
            ))
        }
        Probe::Binary(what) => {
            return Err(format!(
                "{} is not a text file ({what}); view shows UTF-8 text files.",
                path.display()
            ))
        }
        Probe::Text { .. } => {}
    }
    let text = match current_text(path, MAX_EDIT_BYTES, env).await? {
        Current::Text(text) => text,
        Current::Missing => return Err(format!("File not found: {}", path.display())),
        Current::TooLarge(size) => {
            return Err(format!(
                "{} is {size} bytes; view shows files up to {} MiB.",
                path.display(),
                MAX_EDIT_BYTES >> 20
            ))
        }
    };
    let total = text.lines().count() as u64;
    if total == 0 && first == 1 {
        let view = ToolView {
            locations: vec![location(path, 1)],
            ..ToolView::default()
        };
        return Ok(ToolOutcome::ok("(empty file)\n".to_owned(), view));
    }
    if first > total {
        return Err(format!(
            "view_range starts at line {first}, past the end of {} ({total} lines).",
            path.display()
        ));
    }
    let last = last.unwrap_or(total).min(total);
    let out = numbered(&text, first, last, total);
    let view = ToolView {
        locations: vec![location(path, first as u32)],
        ..ToolView::default()
    };
    Ok(ToolOutcome::ok(out, view))
}

/// Lines `first..=last` of `text` (of `total` lines), numbered like
/// `cat -n`, clipped at [`MAX_READ_BYTES`] with a note saying what is
/// left.
fn numbered(text: &str, first: u64, last: u64, total: u64) -> String {
    let mut out = String::new();
    let mut shown = first - 1;
    for (index, line) in text.lines().enumerate().skip(first as usize - 1) {
        let number = index as u64 + 1;
        if number > last {
            break;
        }
        let numbered = format!("{number:>6}\t{line}\n");
        if out.len() + numbered.len() > MAX_READ_BYTES {
            if out.is_empty() {
                out.push_str(dsh_protocol::content::head_bytes(&numbered, MAX_READ_BYTES));
                out.push_str(&format!(
                    "\n<response clipped><NOTE>Line {number} is longer than the {} KiB output cap; only its start is shown. Search the file for what you need in it.</NOTE>\n",
                    MAX_READ_BYTES / 1024
                ));
                return out;
            }
            break;
        }
        out.push_str(&numbered);
        shown = number;
    }
    if shown < last {
        out.push_str(&format!(
            "<response clipped><NOTE>Only lines {first}-{shown} of {total} are shown (output is capped at {} KiB). View the rest with view_range [{}, {last}], or search the file for the lines you need.</NOTE>\n",
            MAX_READ_BYTES / 1024,
            shown + 1
        ));
    }
    out
}

/// The non-hidden files and directories up to [`VIEW_DEPTH`] levels below
/// `dir`, by name, directories marked with `/`; the secret locations are
/// left out, links are not followed, at most [`VIEW_ENTRIES`] entries of a
/// directory are kept (the rest counted), and a cancelled turn stops it
/// (blocking).
fn list(dir: &Path, secrets: &[PathBuf], cancel: &CancellationToken) -> String {
    let mut out = format!(
        "Files and directories up to {VIEW_DEPTH} levels deep in {}, excluding hidden items:\n",
        dir.display()
    );
    out.push_str(&format!("{}/\n", dir.display()));
    if !list_below(dir, 1, secrets, cancel, &mut out) && cancel.is_cancelled() {
        out.push_str("<NOTE>Cancelled; the listing is incomplete.</NOTE>\n");
    }
    out
}

/// Lists the entries of `dir` (at `depth`) into `out`, and those of its
/// subdirectories while `depth` < [`VIEW_DEPTH`]; false when it stopped
/// (the output cap, or cancelled).
fn list_below(
    dir: &Path,
    depth: usize,
    secrets: &[PathBuf],
    cancel: &CancellationToken,
    out: &mut String,
) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    let mut kept: Vec<(std::ffi::OsString, bool)> = Vec::new();
    let mut more = 0u64;
    for (index, entry) in entries.enumerate() {
        if index % 1024 == 0 && cancel.is_cancelled() {
            return false;
        }
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        if secrets.iter().any(|s| dir.join(&name).starts_with(s)) {
            continue;
        }
        if kept.len() >= VIEW_ENTRIES {
            more += 1;
            continue;
        }
        // The entry's own type: a link is listed, not followed.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        kept.push((name, is_dir));
    }
    kept.sort_unstable();
    for (name, is_dir) in kept {
        let path = dir.join(&name);
        let slash = if is_dir { "/" } else { "" };
        let line = format!("{}{slash}\n", path.display());
        if out.len() + line.len() > MAX_READ_BYTES {
            out.push_str("<response clipped><NOTE>The listing is too long; view a subdirectory, or use glob.</NOTE>\n");
            return false;
        }
        out.push_str(&line);
        if is_dir && depth < VIEW_DEPTH && !list_below(&path, depth + 1, secrets, cancel, out) {
            return false;
        }
    }
    if more > 0 {
        let line = format!(
            "{}/… {more} more entries (only the first {VIEW_ENTRIES} read are listed; view a subdirectory, or use glob)\n",
            dir.display()
        );
        if out.len() + line.len() > MAX_READ_BYTES {
            out.push_str("<response clipped><NOTE>The listing is too long; view a subdirectory, or use glob.</NOTE>\n");
            return false;
        }
        out.push_str(&line);
    }
    true
}

async fn create(path: &Path, text: &str, env: &ToolEnv<'_>) -> Result<ToolOutcome, String> {
    let exists = || {
        format!(
            "{} already exists; create does not overwrite a file. Change it with str_replace or insert.",
            path.display()
        )
    };
    match current_text(path, MAX_DIFF_BYTES, env).await? {
        Current::Missing => {}
        Current::Text(_) | Current::TooLarge(_) => return Err(exists()),
    }
    if env.frontend.caps().write_text_file {
        store(path, text, env).await?;
    } else {
        // A file that appeared since the check (a job, the editor) is kept,
        // not replaced: `/undo` would delete it as created.
        let (owned, bytes) = (path.to_path_buf(), text.as_bytes().to_vec());
        let written = blocking(move || Ok(crate::beneath::write_new(&owned, &bytes, true))).await?;
        match written {
            Ok(()) => {}
            Err(crate::beneath::FsError::Io(_, err))
                if err.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                return Err(exists())
            }
            Err(crate::beneath::FsError::Io(path, err)) => {
                return Err(format!("Cannot write {}: {err}", path.display()))
            }
            Err(other) => return Err(other.to_string()),
        }
    }
    let lines = text.lines().count();
    let (_, view) = describe_change(path, Current::Missing, text.to_owned()).await;
    Ok(ToolOutcome::ok(
        format!("Created {} ({lines} lines).", path.display()),
        view,
    ))
}

/// The current text of a file to change.
async fn existing(path: &Path, env: &ToolEnv<'_>) -> Result<String, String> {
    match current_text(path, MAX_EDIT_BYTES, env).await? {
        Current::Text(text) => Ok(text),
        Current::Missing => Err(format!(
            "File not found: {}; use create to make it.",
            path.display()
        )),
        Current::TooLarge(size) => Err(format!(
            "{} is {size} bytes; str_replace_editor changes files up to {} MiB.",
            path.display(),
            MAX_EDIT_BYTES >> 20
        )),
    }
}

async fn replace(
    path: &Path,
    old_str: &str,
    new_str: &str,
    env: &ToolEnv<'_>,
) -> Result<ToolOutcome, String> {
    let old = existing(path, env).await?;
    let new_lines = new_str.lines().count();
    let (owned, old_str, new_str) = (path.to_path_buf(), old_str.to_owned(), new_str.to_owned());
    let (old, new, line) = blocking(move || {
        let (old_str, new_str) = in_line_endings(&old, old_str, new_str);
        let found = find(&old, &old_str, "old_str", &owned)?;
        if found.count > 1 {
            return Err(format!(
                "No replacement was made: old_str occurs {} times in {} (at lines {}). Include enough surrounding context in old_str to make it unique.",
                found.count,
                owned.display(),
                found.lines_shown(),
            ));
        }
        let at = found.first;
        let new = format!("{}{new_str}{}", &old[..at], &old[at + old_str.len()..]);
        Ok((old, new, found.lines[0]))
    })
    .await?;
    let last = line + new_lines.saturating_sub(1);
    finish(path, old, new, (line, last), "Replaced old_str", env).await
}

async fn insert(
    path: &Path,
    after: u64,
    text: &str,
    env: &ToolEnv<'_>,
) -> Result<ToolOutcome, String> {
    let old = existing(path, env).await?;
    let total = old.lines().count() as u64;
    if after > total {
        return Err(format!(
            "insert_line {after} is past the end of {} ({total} lines); it may be 0 to {total}.",
            path.display()
        ));
    }
    let new = inserted(&old, after as usize, text);
    let first = after as usize + 1;
    let last = after as usize + text.lines().count().max(1);
    finish(
        path,
        old,
        new,
        (first, last),
        &format!(
            "Inserted {} lines after line {after}",
            text.lines().count().max(1)
        ),
        env,
    )
    .await
}

/// `text` as whole lines after line `after` of `old`.
fn inserted(old: &str, after: usize, text: &str) -> String {
    let at = if after == 0 {
        0
    } else {
        old.match_indices('\n')
            .nth(after - 1)
            .map_or(old.len(), |(index, _)| index + 1)
    };
    let mut new = String::with_capacity(old.len() + text.len() + 2);
    new.push_str(&old[..at]);
    // After a last line without a newline, the text starts a line.
    if at == old.len() && !old.is_empty() && !old.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(text);
    // The text ends its line, but as the file's last line without one.
    let unterminated_end = at == old.len() && !old.is_empty() && !old.ends_with('\n');
    if !text.ends_with('\n') && !unterminated_end {
        new.push('\n');
    }
    new.push_str(&old[at..]);
    new
}

/// Stores a change and reports it: the summary, a snippet of the new text
/// around lines `first..=last`, and the diff for the editor.
async fn finish(
    path: &Path,
    old: String,
    new: String,
    (first, last): (usize, usize),
    what: &str,
    env: &ToolEnv<'_>,
) -> Result<ToolOutcome, String> {
    store(path, &new, env).await?;
    let shown = snippet(&new, first, last);
    let (summary, view) = describe_change(path, Current::Text(old), new).await;
    Ok(ToolOutcome::ok(
        format!(
            "{what} in {} ({summary}). The result around the change:\n{shown}Check that it is as intended; edit again if not.",
            path.display()
        ),
        view,
    ))
}

/// Lines `first..=last` of `text` with [`SNIPPET_CONTEXT`] lines around
/// them, numbered like `view`, at most [`SNIPPET_LINES`] lines.
fn snippet(text: &str, first: usize, last: usize) -> String {
    let from = first.saturating_sub(SNIPPET_CONTEXT).max(1);
    let to = (last + SNIPPET_CONTEXT).min(from + SNIPPET_LINES - 1);
    let mut out = String::new();
    for (index, line) in text.lines().enumerate().take(to).skip(from - 1) {
        let cut = if line.chars().count() > MAX_LINE_CHARS {
            let head: String = line.chars().take(MAX_LINE_CHARS).collect();
            format!("{head}…")
        } else {
            line.to_owned()
        };
        out.push_str(&format!("{:>6}\t{cut}\n", index + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: serde_json::Value) -> Result<EditorCall, Refusal> {
        check(serde_json::from_value(json).unwrap())
    }

    #[test]
    fn null_placeholders_are_omitted_parameters_but_new_str_of_str_replace() {
        let view = args(
            serde_json::json!({"command": "view", "path": "/a", "file_text": null, "view_range": null, "new_str": null}),
        );
        assert!(matches!(
            view,
            Ok(EditorCall::View {
                first: 1,
                last: None
            })
        ));
        let delete =
            args(serde_json::json!({"command": "str_replace", "path": "/a", "old_str": "x"}));
        assert!(matches!(delete, Ok(EditorCall::Replace { new, .. }) if new.is_empty()));
        let null = args(
            serde_json::json!({"command": "str_replace", "path": "/a", "old_str": "x", "new_str": null}),
        );
        assert!(null.unwrap_err().message.contains("omit new_str"));
        let insert = args(
            serde_json::json!({"command": "insert", "path": "/a", "insert_line": 0, "new_str": null}),
        );
        assert!(insert.unwrap_err().message.contains("needs new_str"));
        let create =
            args(serde_json::json!({"command": "create", "path": "/a", "file_text": null}));
        assert!(create.unwrap_err().message.contains("needs file_text"));
        let range =
            args(serde_json::json!({"command": "view", "path": "/a", "view_range": [3, -1]}));
        assert!(matches!(
            range,
            Ok(EditorCall::View {
                first: 3,
                last: None
            })
        ));
        let bad = args(serde_json::json!({"command": "view", "path": "/a", "view_range": [0, 2]}));
        assert!(bad.is_err());
    }

    #[test]
    fn insert_puts_whole_lines_after_a_line() {
        assert_eq!(inserted("a\nb\n", 0, "x"), "x\na\nb\n");
        assert_eq!(inserted("a\nb\n", 1, "x\ny\n"), "a\nx\ny\nb\n");
        assert_eq!(inserted("a\nb\n", 2, "x"), "a\nb\nx\n");
        assert_eq!(inserted("a\nb", 2, "x"), "a\nb\nx");
        assert_eq!(inserted("", 0, "x"), "x\n");
    }

    #[test]
    fn long_views_are_clipped_with_a_marker() {
        let text: String = (1..=100_000).map(|i| format!("line {i}\n")).collect();
        let out = numbered(&text, 1, 100_000, 100_000);
        assert!(out.len() < MAX_READ_BYTES + 400, "{}", out.len());
        assert!(
            out.contains("<response clipped>") && out.contains("view_range ["),
            "{out}"
        );
        let long = "y".repeat(MAX_READ_BYTES * 2);
        let out = numbered(&long, 1, 1, 1);
        assert!(
            out.contains("Line 1 is longer"),
            "{}",
            &out[out.len() - 200..]
        );
        assert_eq!(numbered("a\nb\n", 2, 2, 2), "     2\tb\n");
    }

    #[test]
    fn snippets_show_the_change_with_context() {
        let text: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let shown = snippet(&text, 10, 10);
        assert!(shown.starts_with("     6\tl6\n"), "{shown}");
        assert!(shown.ends_with("    14\tl14\n"), "{shown}");
    }

    /// A huge directory costs what is kept of it, not all of it, and a
    /// cancelled turn stops the listing.
    #[test]
    fn directory_views_keep_a_bounded_part_of_each_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("many");
        std::fs::create_dir(&dir).unwrap();
        for i in 0..VIEW_ENTRIES + 250 {
            std::fs::write(dir.join(format!("f{i:05}")), "").unwrap();
        }
        std::fs::create_dir(root.path().join("a")).unwrap();
        std::fs::write(root.path().join(".hidden"), "").unwrap();
        let secret = root.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        let cancel = CancellationToken::new();
        // Paths in the system's own form; compared with `/` (Windows: `\\`).
        let out = list(root.path(), std::slice::from_ref(&secret), &cancel).replace('\\', "/");
        let shown = out.lines().filter(|l| l.contains("/many/f")).count();
        assert_eq!(shown, VIEW_ENTRIES, "{out}");
        assert!(out.contains("250 more entries"), "{out}");
        assert!(!out.contains(".hidden") && !out.contains("secret"), "{out}");
        let a = out.find("/a/\n").unwrap();
        let many = out.find("/many/\n").unwrap();
        assert!(a < many, "sorted by name: {out}");
        cancel.cancel();
        let out = list(root.path(), &[], &cancel);
        assert!(
            out.contains("Cancelled") && !out.contains("/many/f"),
            "{out}"
        );
    }
}
