//! `read`, `write` and `edit`. Reads and writes go through the client's file
//! system when it advertises one (so reads see unsaved buffers and writes
//! land in the editor's review list), else the disk. Binary files are
//! refused; huge files are read as a window; diffs over 10 MiB a side
//! degrade to a text summary.

use std::io::{BufRead, Read};
use std::path::Path;

use dsh_protocol::tool::{FileDiff, FileLocation, ToolContent, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{display_path, Outcome, ToolEnv};

pub const READ_DESCRIPTION: &str = "Read a UTF-8 text file. Returns numbered lines (1-based). Use offset and limit to read part of a large file. Binary files are refused.";
pub const WRITE_DESCRIPTION: &str = "Create or fully replace a UTF-8 text file.";
pub const EDIT_DESCRIPTION: &str = "Replace text in an existing UTF-8 file. old_string must match literally and exactly once unless replace_all is true; an empty new_string deletes the match.";

const DEFAULT_LIMIT: u64 = 2000;
const MAX_LINE_CHARS: usize = 2000;
const MAX_READ_BYTES: usize = 256 * 1024;
const MAX_DIFF_BYTES: usize = 10 * 1024 * 1024;
const STREAM_ABOVE_BYTES: u64 = 64 * 1024 * 1024;

pub fn read_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "file_path": { "type": "string", "description": "Path of the file (absolute, or relative to the working directory)" },
            "offset": { "type": "integer", "description": "First line to read, 1-based (default 1)" },
            "limit": { "type": "integer", "description": "Number of lines to read (default 2000)" }
        },
        "required": ["file_path"],
        "additionalProperties": false
    })
}

pub fn write_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "file_path": { "type": "string", "description": "Path of the file to create or replace" },
            "content": { "type": "string", "description": "The complete new content" }
        },
        "required": ["file_path", "content"],
        "additionalProperties": false
    })
}

pub fn edit_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "file_path": { "type": "string", "description": "Path of the file to edit" },
            "old_string": { "type": "string", "description": "The exact text to replace" },
            "new_string": { "type": "string", "description": "The replacement text" },
            "replace_all": { "type": "boolean", "description": "Replace every occurrence (default false)" }
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": false
    })
}

#[derive(Debug, Deserialize)]
pub struct ReadArgs {
    pub file_path: String,
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub limit: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct WriteArgs {
    pub file_path: String,
    pub content: String,
}

#[derive(Debug, Deserialize)]
pub struct EditArgs {
    pub file_path: String,
    pub old_string: String,
    pub new_string: String,
    #[serde(default)]
    pub replace_all: bool,
}

fn location(path: &Path, line: u32) -> FileLocation {
    FileLocation {
        path: path.display().to_string(),
        line: Some(line.max(1)),
    }
}

pub fn present_read(args: &ReadArgs, path: &Path, cwd: &Path) -> ToolView {
    let offset = args.offset.unwrap_or(1).max(1);
    let shown = display_path(path, cwd);
    let title = match (args.offset, args.limit) {
        (None, None) => format!("Read {shown}"),
        _ => format!("Read {shown} (from line {offset})"),
    };
    ToolView {
        title,
        kind: Some(ToolKind::Read),
        locations: vec![location(path, offset as u32)],
        content: Vec::new(),
    }
}

pub fn present_write(path: &Path, cwd: &Path) -> ToolView {
    ToolView {
        title: format!("Write {}", display_path(path, cwd)),
        kind: Some(ToolKind::Edit),
        locations: vec![location(path, 1)],
        content: Vec::new(),
    }
}

pub fn present_edit(path: &Path, cwd: &Path) -> ToolView {
    ToolView {
        title: format!("Edit {}", display_path(path, cwd)),
        kind: Some(ToolKind::Edit),
        locations: vec![location(path, 1)],
        content: Vec::new(),
    }
}

/// What is on disk at a path.
enum Probe {
    Missing,
    Directory,
    Binary(String),
    Image {
        mime: &'static str,
        what: String,
        size: u64,
    },
    Text {
        size: u64,
    },
}

/// Largest image `read` hands to the model.
const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// Sniffs an image format from content (not the extension): (kind, MIME).
fn image_kind(head: &[u8]) -> Option<(&'static str, &'static str)> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(("PNG image", "image/png"))
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(("JPEG image", "image/jpeg"))
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some(("GIF image", "image/gif"))
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some(("WebP image", "image/webp"))
    } else {
        None
    }
}

fn probe(path: &Path) -> Result<Probe, String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Probe::Missing),
        Err(err) => return Err(format!("Cannot access {}: {err}", path.display())),
    };
    if meta.is_dir() {
        return Ok(Probe::Directory);
    }
    let mut head = vec![0u8; 8192];
    let n = std::fs::File::open(path)
        .and_then(|mut file| file.read(&mut head))
        .map_err(|err| format!("Cannot read {}: {err}", path.display()))?;
    head.truncate(n);
    if let Some((kind, mime)) = image_kind(&head) {
        return Ok(Probe::Image {
            mime,
            what: format!("{kind}, {} bytes", meta.len()),
            size: meta.len(),
        });
    }
    let utf8_ok = match std::str::from_utf8(&head) {
        Ok(_) => true,
        // A multi-byte character cut at the end of the sniff window is fine.
        Err(err) => err.error_len().is_none() && n == head.capacity().min(8192),
    };
    if head.contains(&0) || !utf8_ok {
        return Ok(Probe::Binary(format!("binary data, {} bytes", meta.len())));
    }
    Ok(Probe::Text { size: meta.len() })
}

/// Reads the current text of a file for an edit or a diff basis: through the
/// client when it can, else from disk. `Ok(None)` when the file is missing.
async fn current_text(path: &Path, env: &ToolEnv<'_>) -> Result<Option<String>, String> {
    match probe(path)? {
        Probe::Missing => Ok(None),
        Probe::Directory => Err(format!("{} is a directory.", path.display())),
        Probe::Binary(what) | Probe::Image { what, .. } => Err(format!(
            "{} is not a text file ({what}); only UTF-8 text can be edited.",
            path.display()
        )),
        Probe::Text { .. } if env.frontend.caps().read_text_file => {
            env.frontend.read_text_file(path).await.map(Some)
        }
        Probe::Text { .. } => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|err| format!("Cannot read {}: {err}", path.display())),
    }
}

async fn store(path: &Path, content: &str, env: &ToolEnv<'_>) -> Result<(), String> {
    if env.frontend.caps().write_text_file {
        return env.frontend.write_text_file(path, content.to_owned()).await;
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("Cannot create {}: {err}", parent.display()))?;
    }
    std::fs::write(path, content).map_err(|err| format!("Cannot write {}: {err}", path.display()))
}

fn numbered(text: &str, offset: u64, limit: u64, out: &mut String) -> (u64, u64, bool) {
    // Returns (lines shown, total lines, capped).
    let mut shown = 0;
    let mut total = 0;
    let mut capped = false;
    for (index, line) in text.lines().enumerate() {
        total += 1;
        let number = index as u64 + 1;
        if number < offset || shown >= limit || capped {
            continue;
        }
        if out.len() > MAX_READ_BYTES {
            capped = true;
            continue;
        }
        push_line(out, number, line);
        shown += 1;
    }
    (shown, total, capped)
}

fn push_line(out: &mut String, number: u64, line: &str) {
    let chars = line.chars().count();
    if chars > MAX_LINE_CHARS {
        let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
        out.push_str(&format!(
            "{number:>6}\t{cut}… [line truncated: {chars} characters]\n"
        ));
    } else {
        out.push_str(&format!("{number:>6}\t{line}\n"));
    }
}

pub async fn read(args: &ReadArgs, path: &Path, env: &ToolEnv<'_>) -> Outcome {
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, DEFAULT_LIMIT);
    let size = match probe(path) {
        Err(message) => return Outcome::failed(ErrorCode::InvalidToolArgs, message),
        Ok(Probe::Missing) => {
            return Outcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("File not found: {}", path.display()),
            )
        }
        Ok(Probe::Directory) => {
            return Outcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("{} is a directory; use glob to list files.", path.display()),
            )
        }
        Ok(Probe::Binary(what)) => {
            return Outcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "{} is not a text file ({what}); read only handles UTF-8 text.",
                    path.display()
                ),
            )
        }
        Ok(Probe::Image { mime, what, size }) => return read_image(path, mime, &what, size),
        Ok(Probe::Text { size }) => size,
    };
    let mut out = String::new();
    let (shown, total, capped) = if env.frontend.caps().read_text_file {
        match env.frontend.read_text_file(path).await {
            Ok(text) => numbered(&text, offset, limit, &mut out),
            Err(message) => return Outcome::failed(ErrorCode::InvalidToolArgs, message),
        }
    } else if size > STREAM_ABOVE_BYTES {
        match stream_window(path, offset, limit, &mut out) {
            Ok(counts) => counts,
            Err(message) => return Outcome::failed(ErrorCode::InvalidToolArgs, message),
        }
    } else {
        match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => numbered(&text, offset, limit, &mut out),
                Err(_) => {
                    return Outcome::failed(
                        ErrorCode::InvalidToolArgs,
                        format!(
                            "{} is not valid UTF-8; read only handles UTF-8 text.",
                            path.display()
                        ),
                    )
                }
            },
            Err(err) => {
                return Outcome::failed(
                    ErrorCode::InvalidToolArgs,
                    format!("Cannot read {}: {err}", path.display()),
                )
            }
        }
    };
    if total == 0 {
        out.push_str("(empty file)\n");
    } else if shown == 0 {
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            format!(
                "offset {offset} is past the end of {} ({total} lines).",
                path.display()
            ),
        );
    }
    let last = offset + shown.saturating_sub(1);
    if capped {
        out.push_str(&format!(
            "[output capped at {} KiB; showing lines {offset}-{last} of {total}; continue with offset={}]\n",
            MAX_READ_BYTES / 1024,
            last + 1
        ));
    } else if last < total {
        out.push_str(&format!(
            "(showing lines {offset}-{last} of {total}; continue with offset={})\n",
            last + 1
        ));
    }
    let view = ToolView {
        locations: vec![location(path, offset as u32)],
        ..ToolView::default()
    };
    Outcome::ok(out, view)
}

/// Hands an image to the model: it follows the tool results as a user
/// message (image-capable models see it; others get a note saying so).
fn read_image(path: &Path, mime: &'static str, what: &str, size: u64) -> Outcome {
    use base64::Engine as _;
    if size > MAX_IMAGE_BYTES {
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            format!(
                "{} is an image ({what}) larger than the {} MiB limit.",
                path.display(),
                MAX_IMAGE_BYTES >> 20
            ),
        );
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) => {
            return Outcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("Cannot read {}: {err}", path.display()),
            )
        }
    };
    let mut outcome = Outcome::ok(
        format!(
            "{} is an image ({what}); it is attached after the tool results.",
            path.display()
        ),
        ToolView {
            locations: vec![location(path, 1)],
            ..ToolView::default()
        },
    );
    outcome.attachments.push(dsh_protocol::UserContent::Image {
        mime_type: mime.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    });
    outcome
}

/// Reads a window of a very large file line by line.
fn stream_window(
    path: &Path,
    offset: u64,
    limit: u64,
    out: &mut String,
) -> Result<(u64, u64, bool), String> {
    let file = std::fs::File::open(path)
        .map_err(|err| format!("Cannot read {}: {err}", path.display()))?;
    let mut reader = std::io::BufReader::new(file);
    let (mut shown, mut total, mut capped) = (0, 0, false);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader
            .read_until(b'\n', &mut line)
            .map_err(|err| err.to_string())?
            == 0
        {
            break;
        }
        total += 1;
        if total < offset || shown >= limit || capped {
            continue;
        }
        if out.len() > MAX_READ_BYTES {
            capped = true;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        push_line(out, total, text.trim_end_matches(['\n', '\r']));
        shown += 1;
    }
    Ok((shown, total, capped))
}

fn first_changed_line(old: &str, new: &str) -> u32 {
    old.lines()
        .zip(new.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| old.lines().count().min(new.lines().count())) as u32
        + 1
}

fn change_summary(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    format!("+{added} -{removed} lines")
}

fn diff_view(path: &Path, old: Option<&str>, new: &str) -> ToolView {
    let line = first_changed_line(old.unwrap_or(""), new);
    let too_big = old.is_some_and(|old| old.len() > MAX_DIFF_BYTES) || new.len() > MAX_DIFF_BYTES;
    let content = if too_big {
        vec![ToolContent::Text {
            text: format!(
                "{} changed ({} → {} bytes); the diff is too large to show (over {} MiB a side).",
                path.display(),
                old.map(str::len).unwrap_or(0),
                new.len(),
                MAX_DIFF_BYTES / (1024 * 1024)
            ),
        }]
    } else {
        vec![ToolContent::Diff(FileDiff {
            path: path.display().to_string(),
            old_text: old.map(str::to_owned),
            new_text: new.to_owned(),
        })]
    };
    ToolView {
        locations: vec![location(path, line)],
        content,
        ..ToolView::default()
    }
}

pub async fn write(args: &WriteArgs, path: &Path, env: &ToolEnv<'_>) -> Outcome {
    let old = match current_text(path, env).await {
        Ok(old) => old,
        Err(message) => return Outcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if let Err(message) = store(path, &args.content, env).await {
        return Outcome::failed(ErrorCode::InvalidToolArgs, message);
    }
    let lines = args.content.lines().count();
    let output = match &old {
        None => format!("Created {} ({lines} lines).", path.display()),
        Some(old) => format!(
            "Wrote {} ({lines} lines; {}).",
            path.display(),
            change_summary(old, &args.content)
        ),
    };
    Outcome::ok(output, diff_view(path, old.as_deref(), &args.content))
}

pub async fn edit(args: &EditArgs, path: &Path, env: &ToolEnv<'_>) -> Outcome {
    if args.old_string.is_empty() {
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            "old_string is empty; use write to create or replace a whole file.",
        );
    }
    if args.old_string == args.new_string {
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            "old_string and new_string are identical; nothing to change.",
        );
    }
    let old = match current_text(path, env).await {
        Ok(Some(old)) => old,
        Ok(None) => {
            return Outcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "File not found: {}; use write to create it.",
                    path.display()
                ),
            )
        }
        Err(message) => return Outcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let starts: Vec<usize> = old
        .match_indices(&args.old_string)
        .map(|(index, _)| index)
        .collect();
    let line_of = |byte: usize| old[..byte].matches('\n').count() + 1;
    if starts.is_empty() {
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            not_found_message(&old, &args.old_string, path),
        );
    }
    if starts.len() > 1 && !args.replace_all {
        let lines: Vec<String> = starts
            .iter()
            .take(10)
            .map(|s| line_of(*s).to_string())
            .collect();
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            format!(
                "old_string matches {} places in {} (lines {}{}). Include more surrounding context to make it unique, or set replace_all to true.",
                starts.len(),
                path.display(),
                lines.join(", "),
                if starts.len() > 10 { ", …" } else { "" }
            ),
        );
    }
    let new = if args.replace_all {
        old.replace(&args.old_string, &args.new_string)
    } else {
        old.replacen(&args.old_string, &args.new_string, 1)
    };
    if let Err(message) = store(path, &new, env).await {
        return Outcome::failed(ErrorCode::InvalidToolArgs, message);
    }
    let output = format!(
        "Edited {}: replaced {} occurrence{} at line {} ({}).",
        path.display(),
        starts.len(),
        if starts.len() == 1 { "" } else { "s" },
        line_of(starts[0]),
        change_summary(&old, &new)
    );
    Outcome::ok(output, diff_view(path, Some(&old), &new))
}

/// Explains a failed match: zero matches, and where the first line of
/// `old_string` does appear (with nearby lines) when it does.
fn not_found_message(text: &str, needle: &str, path: &Path) -> String {
    let mut message = format!(
        "old_string was not found in {} (0 matches).",
        path.display()
    );
    let first = needle
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let lines: Vec<&str> = text.lines().collect();
    let hits: Vec<usize> = if first.is_empty() {
        Vec::new()
    } else {
        lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains(first))
            .map(|(i, _)| i)
            .take(3)
            .collect()
    };
    if hits.is_empty() {
        message.push_str(
            " Read the file again and copy the exact text, including whitespace and indentation.",
        );
        return message;
    }
    message.push_str(" Its first line appears here; check whitespace and the following lines:\n");
    for hit in hits {
        for (index, line) in lines
            .iter()
            .enumerate()
            .take(hit + 3)
            .skip(hit.saturating_sub(2))
        {
            message.push_str(&format!("{:>6}\t{}\n", index + 1, line));
        }
        message.push_str("   ...\n");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_diffs_degrade_to_a_summary() {
        let big = "y".repeat(MAX_DIFF_BYTES + 1);
        let view = diff_view(Path::new("/w/big.txt"), Some("old\n"), &big);
        assert!(
            matches!(&view.content[0], ToolContent::Text { text } if text.contains("too large"))
        );
        let view = diff_view(Path::new("/w/small.txt"), None, "new\n");
        assert!(matches!(&view.content[0], ToolContent::Diff(diff) if diff.old_text.is_none()));
    }

    #[test]
    fn first_changed_line_and_not_found_hints() {
        assert_eq!(first_changed_line("a\nb\nc\n", "a\nB\nc\n"), 2);
        assert_eq!(first_changed_line("a\n", "a\nb\n"), 2);
        let hint = not_found_message(
            "fn main() {\n    let x = 1;\n}\n",
            "    let x = 2;",
            Path::new("/w/m.rs"),
        );
        assert!(hint.contains("0 matches"));
        let hint = not_found_message(
            "fn main() {\n    let  x = 1;\n}\n",
            "fn main() {\n  let x",
            Path::new("/w/m.rs"),
        );
        assert!(hint.contains("     1\tfn main() {"), "{hint}");
    }
}
