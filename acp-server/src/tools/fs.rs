//! `read`, `write` and `edit`. Reads and writes go through the client's file
//! system when it advertises one (so reads see unsaved buffers and writes
//! land in the editor's review list), else the disk.
//!
//! Bad files cannot hurt the process: only regular files are opened (a FIFO,
//! socket or device is refused without blocking: files are opened
//! non-blocking and checked after opening), every disk access and diff runs
//! off the async workers, and memory per call is bounded whatever the file:
//! - `read` streams the file and keeps at most its output (256 KiB, 2,000
//!   characters a line), counting lines past its window only in files up to
//!   64 MiB; the editor is asked for files up to 8 MiB;
//! - an image is an image when its header says so *and* the start of the
//!   file is not text, up to 5 MiB;
//! - `write` reads the old file for its diff only up to 2 MiB, `edit`
//!   changes files up to 32 MiB;
//! - diffs shown to the editor are whole-file up to 2 MiB a side, else a
//!   summary; the line counts of a change are computed with a deadline.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use dsh_protocol::tool::{FileDiff, FileLocation, ToolContent, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{display_path, ToolEnv};
use dsh_protocol::tool::ToolOutcome;

pub const READ_DESCRIPTION: &str = "Read a UTF-8 text file. Returns numbered lines (1-based). Use offset and limit to read part of a large file. Binary files are refused.";
pub const WRITE_DESCRIPTION: &str = "Create or fully replace a UTF-8 text file.";
pub const EDIT_DESCRIPTION: &str = "Replace text in an existing UTF-8 file. old_string must match literally and exactly once unless replace_all is true; an empty new_string deletes the match.";

const DEFAULT_LIMIT: u64 = 2000;
const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line kept while streaming (enough for its shown part).
const LINE_KEEP_BYTES: usize = MAX_LINE_CHARS * 4;
const MAX_READ_BYTES: usize = 256 * 1024;
/// Past its window, `read` counts the file's lines only up to this size.
const COUNT_LINES_UP_TO: u64 = 64 * 1024 * 1024;
/// Files up to this size are read through the editor when it offers to.
const MAX_CLIENT_READ_BYTES: u64 = 8 * 1024 * 1024;
/// Largest image `read` hands to the model.
const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Largest side of a diff shown to the editor, and of an old file read for it.
const MAX_DIFF_BYTES: u64 = 2 * 1024 * 1024;
/// Largest file `edit` changes (it holds the file in memory twice).
const MAX_EDIT_BYTES: u64 = 32 * 1024 * 1024;
/// How long counting the changed lines of a write or edit may take.
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

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

/// Runs blocking file work off the async workers. A panic in it is the
/// caller's panic (the turn catches it); a runtime shutting down is an
/// error.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(_) => Err("dsh is shutting down".to_owned()),
    }
}

/// What a path is, for the refusal of anything but a regular file.
fn special_kind(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        "a named pipe (FIFO)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

fn not_regular(path: &Path, kind: &str) -> String {
    format!(
        "{} is {kind}; only regular files can be read or written.",
        path.display()
    )
}

/// Opens a file for reading only if it is a regular file, without blocking
/// on a FIFO that appeared in its place.
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| format!("Cannot read {}: {err}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|err| format!("Cannot read {}: {err}", path.display()))?;
    if !meta.is_file() {
        return Err(not_regular(path, special_kind(meta.file_type())));
    }
    Ok(file)
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

/// Sniffs an image format from content (not the extension): (kind, MIME).
/// The magic number alone does not make an image: a text file may start
/// with `GIF89a`; the caller also checks the head is not text.
fn image_kind(head: &[u8]) -> Option<(&'static str, &'static str)> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") && head.get(12..16) == Some(b"IHDR") {
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

/// Whether a head of a file reads as UTF-8 text (a character cut at the end
/// of a full window is fine).
fn looks_like_text(head: &[u8], full_window: bool) -> bool {
    let utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(err) => err.error_len().is_none() && full_window,
    };
    utf8 && !head.contains(&0)
}

/// Looks at a path (blocking).
fn probe(path: &Path) -> Result<Probe, String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Probe::Missing),
        Err(err) => return Err(format!("Cannot access {}: {err}", path.display())),
    };
    if meta.is_dir() {
        return Ok(Probe::Directory);
    }
    if !meta.is_file() {
        return Err(not_regular(path, special_kind(meta.file_type())));
    }
    let mut head = vec![0u8; 8192];
    let n = open_regular(path)?
        .read(&mut head)
        .map_err(|err| format!("Cannot read {}: {err}", path.display()))?;
    head.truncate(n);
    let text = looks_like_text(&head, n == 8192);
    if let Some((kind, mime)) = image_kind(&head).filter(|_| !text) {
        return Ok(Probe::Image {
            mime,
            what: format!("{kind}, {} bytes", meta.len()),
            size: meta.len(),
        });
    }
    if !text {
        return Ok(Probe::Binary(format!("binary data, {} bytes", meta.len())));
    }
    Ok(Probe::Text { size: meta.len() })
}

/// The numbered lines `read` returns: a window of `limit` lines from
/// `offset`, at most [`MAX_READ_BYTES`], each line cut at
/// [`MAX_LINE_CHARS`]. Fed one line at a time, so a file never has to be in
/// memory.
struct Window {
    offset: u64,
    limit: u64,
    out: String,
    shown: u64,
    /// Lines seen so far.
    total: u64,
    capped: bool,
    /// Some bytes were not UTF-8 and are shown as U+FFFD.
    lossy: bool,
}

impl Window {
    fn new(offset: u64, limit: u64) -> Window {
        Window {
            offset,
            limit,
            out: String::new(),
            shown: 0,
            total: 0,
            capped: false,
            lossy: false,
        }
    }

    /// Whether the window has all it will show.
    fn full(&self) -> bool {
        self.shown >= self.limit || self.capped
    }

    /// Takes the next line: `kept` is its start (at most
    /// [`LINE_KEEP_BYTES`]), `chars` its full length in characters.
    fn push(&mut self, kept: &[u8], chars: usize) {
        self.total += 1;
        if self.total < self.offset || self.full() {
            return;
        }
        if self.out.len() > MAX_READ_BYTES {
            self.capped = true;
            return;
        }
        let text = String::from_utf8_lossy(kept);
        if matches!(text, std::borrow::Cow::Owned(_)) {
            self.lossy = true;
        }
        let text = text.trim_end_matches('\r');
        let number = self.total;
        if chars > MAX_LINE_CHARS {
            let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            self.out.push_str(&format!(
                "{number:>6}\t{cut}… [line truncated: {chars} characters]\n"
            ));
        } else {
            self.out.push_str(&format!("{number:>6}\t{text}\n"));
        }
        self.shown += 1;
    }

    /// Feeds a whole text (an editor buffer).
    fn feed_text(&mut self, text: &str) {
        for line in text.lines() {
            let kept = dsh_protocol::content::head_bytes(line, LINE_KEEP_BYTES);
            self.push(kept.as_bytes(), line.chars().count());
        }
    }
}

/// How much of the file a disk read saw.
enum Seen {
    /// Every line (the total is exact).
    All,
    /// Stopped after the window in a file too large to count through.
    Window,
}

/// Streams a file from disk into `window` (blocking); stops when cancelled.
fn stream_into(
    path: &Path,
    size: u64,
    window: &mut Window,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Seen, String> {
    let mut file = open_regular(path)?;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut chars = 0usize;
    let mut pending = false;
    loop {
        if cancel.is_cancelled() {
            return Err("Cancelled while reading.".to_owned());
        }
        if window.full() && size > COUNT_LINES_UP_TO {
            return Ok(Seen::Window);
        }
        let n = file
            .read(&mut chunk)
            .map_err(|err| format!("Cannot read {}: {err}", path.display()))?;
        if n == 0 {
            break;
        }
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (part, ended) = match rest.iter().position(|b| *b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            if window.full() {
                // Past the window only the count matters.
                if ended {
                    window.total += 1;
                    pending = false;
                } else {
                    pending = true;
                }
            } else {
                let room = LINE_KEEP_BYTES.saturating_sub(line.len());
                line.extend_from_slice(&part[..part.len().min(room)]);
                chars += part.iter().filter(|b| (**b & 0xC0) != 0x80).count();
                pending = true;
                if ended {
                    window.push(&line, chars);
                    line.clear();
                    chars = 0;
                    pending = false;
                }
            }
            rest = if ended { &rest[part.len() + 1..] } else { &[] };
        }
    }
    if pending {
        if window.full() {
            window.total += 1;
        } else {
            window.push(&line, chars);
        }
    }
    Ok(Seen::All)
}

pub async fn read(args: &ReadArgs, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, DEFAULT_LIMIT);
    let owned = path.to_path_buf();
    let size = match blocking(move || probe(&owned)).await {
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
        Ok(Probe::Missing) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("File not found: {}", path.display()),
            )
        }
        Ok(Probe::Directory) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("{} is a directory; use glob to list files.", path.display()),
            )
        }
        Ok(Probe::Binary(what)) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "{} is not a text file ({what}); read only handles UTF-8 text.",
                    path.display()
                ),
            )
        }
        Ok(Probe::Image { mime, what, size }) => return read_image(path, mime, what, size).await,
        Ok(Probe::Text { size }) => size,
    };
    let window = if env.frontend.caps().read_text_file && size <= MAX_CLIENT_READ_BYTES {
        match env.frontend.read_text_file(path).await {
            Ok(text) => {
                let mut window = Window::new(offset, limit);
                window.feed_text(&text);
                Ok((window, Seen::All))
            }
            Err(message) => Err(message),
        }
    } else {
        let owned = path.to_path_buf();
        let cancel = env.cancel.clone();
        blocking(move || {
            let mut window = Window::new(offset, limit);
            let seen = stream_into(&owned, size, &mut window, &cancel)?;
            Ok((window, seen))
        })
        .await
    };
    let (mut window, seen) = match window {
        Ok(read) => read,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let total = window.total;
    if total == 0 {
        window.out.push_str("(empty file)\n");
    } else if window.shown == 0 {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!(
                "offset {offset} is past the end of {} ({total} lines).",
                path.display()
            ),
        );
    }
    let last = offset + window.shown.saturating_sub(1);
    let of_total = match seen {
        Seen::All => format!(" of {total}"),
        Seen::Window => String::new(),
    };
    let more = matches!(seen, Seen::Window) || last < total;
    if window.capped {
        window.out.push_str(&format!(
            "[output capped at {} KiB; showing lines {offset}-{last}{of_total}; continue with offset={}]\n",
            MAX_READ_BYTES / 1024,
            last + 1
        ));
    } else if more {
        window.out.push_str(&format!(
            "(showing lines {offset}-{last}{of_total}; continue with offset={})\n",
            last + 1
        ));
    }
    if window.lossy {
        window
            .out
            .push_str("(some bytes are not valid UTF-8 and are shown as �)\n");
    }
    let view = ToolView {
        locations: vec![location(path, offset as u32)],
        ..ToolView::default()
    };
    ToolOutcome::ok(window.out, view)
}

/// Hands an image to the model: it follows the tool results as a user
/// message (image-capable models see it; others get a note saying so).
async fn read_image(path: &Path, mime: &'static str, what: String, size: u64) -> ToolOutcome {
    use base64::Engine as _;
    if size > MAX_IMAGE_BYTES {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!(
                "{} is an image ({what}) larger than the {} MiB limit.",
                path.display(),
                MAX_IMAGE_BYTES >> 20
            ),
        );
    }
    let owned = path.to_path_buf();
    let bytes = match blocking(move || {
        let mut bytes = Vec::new();
        open_regular(&owned)?
            .take(MAX_IMAGE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| format!("Cannot read {}: {err}", owned.display()))?;
        Ok(bytes)
    })
    .await
    {
        Ok(bytes) => bytes,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let mut outcome = ToolOutcome::ok(
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

/// The current content of a file about to change.
enum Current {
    /// There is no file yet.
    Missing,
    /// Its text.
    Text(String),
    /// A text file larger than the caller's cap, of this many bytes.
    TooLarge(u64),
}

/// Reads the current text of a file for an edit or a diff basis, up to
/// `cap` bytes: through the client when it can, else from disk.
async fn current_text(path: &Path, cap: u64, env: &ToolEnv<'_>) -> Result<Current, String> {
    let owned = path.to_path_buf();
    match blocking(move || probe(&owned)).await? {
        Probe::Missing => Ok(Current::Missing),
        Probe::Directory => Err(format!("{} is a directory.", path.display())),
        Probe::Binary(what) | Probe::Image { what, .. } => Err(format!(
            "{} is not a text file ({what}); only UTF-8 text can be edited.",
            path.display()
        )),
        Probe::Text { size } if size > cap => Ok(Current::TooLarge(size)),
        Probe::Text { size }
            if env.frontend.caps().read_text_file && size <= MAX_CLIENT_READ_BYTES =>
        {
            env.frontend.read_text_file(path).await.map(Current::Text)
        }
        Probe::Text { .. } => {
            let owned = path.to_path_buf();
            blocking(move || {
                let mut text = String::new();
                open_regular(&owned)?
                    .take(cap + 1)
                    .read_to_string(&mut text)
                    .map_err(|err| format!("Cannot read {}: {err}", owned.display()))?;
                Ok(Current::Text(text))
            })
            .await
        }
    }
}

/// The text of an existing file up to `cap` bytes, through the editor when
/// it can (the `lsp` tool's documents).
pub(super) async fn read_text(path: &Path, cap: u64, env: &ToolEnv<'_>) -> Result<String, String> {
    match current_text(path, cap, env).await? {
        Current::Text(text) => Ok(text),
        Current::Missing => Err(format!("File not found: {}", path.display())),
        Current::TooLarge(size) => Err(format!(
            "{} is {size} bytes, more than the {cap} bytes dsh sends a language server.",
            path.display()
        )),
    }
}

/// Writes a file: through the client when it can, else to disk — a
/// regular file only, never through a link (the path is already resolved),
/// never blocking on a FIFO.
async fn store(path: &Path, content: &str, env: &ToolEnv<'_>) -> Result<(), String> {
    if env.frontend.caps().write_text_file {
        return env.frontend.write_text_file(path, content.to_owned()).await;
    }
    let owned = path.to_path_buf();
    let content = content.to_owned();
    blocking(move || {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(parent) = owned.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| format!("Cannot create {}: {err}", parent.display()))?;
        }
        let write_error = |err: std::io::Error| format!("Cannot write {}: {err}", owned.display());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&owned)
            .map_err(write_error)?;
        let meta = file.metadata().map_err(write_error)?;
        if !meta.is_file() {
            return Err(not_regular(&owned, special_kind(meta.file_type())));
        }
        file.set_len(0).map_err(write_error)?;
        file.write_all(content.as_bytes()).map_err(write_error)
    })
    .await
}

/// The 1-based line where `new` first differs from `old`, within `new`
/// (line 1 when nothing changed).
fn first_changed_line(old: &str, new: &str) -> u32 {
    let same = old
        .lines()
        .zip(new.lines())
        .take_while(|(a, b)| a == b)
        .count();
    if old == new {
        return 1;
    }
    (same + 1).min(new.lines().count().max(1)) as u32
}

/// "+3 -1 lines": counted with a deadline, so a pathological rewrite costs
/// at most [`DIFF_DEADLINE`] (the count is then approximate).
fn change_summary(old: &str, new: &str) -> String {
    let started = std::time::Instant::now();
    let diff = similar::TextDiff::configure()
        .deadline(started + DIFF_DEADLINE)
        .diff_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    if started.elapsed() >= DIFF_DEADLINE {
        format!("about +{added} -{removed} lines")
    } else {
        format!("+{added} -{removed} lines")
    }
}

/// The final view of a change: a whole-file diff the editor can review,
/// or a summary when a side is over [`MAX_DIFF_BYTES`].
fn diff_view(path: &Path, old: &Current, new: &str) -> ToolView {
    let (old_text, old_len) = match old {
        Current::Missing => (None, 0),
        Current::Text(text) => (Some(text.as_str()), text.len() as u64),
        Current::TooLarge(size) => (None, *size),
    };
    let line = first_changed_line(old_text.unwrap_or(""), new);
    let too_big = matches!(old, Current::TooLarge(_))
        || old_len > MAX_DIFF_BYTES
        || new.len() as u64 > MAX_DIFF_BYTES;
    let content = if too_big {
        vec![ToolContent::Text {
            text: format!(
                "{} changed ({old_len} → {} bytes); the diff is too large to show (over {} MiB a side).",
                path.display(),
                new.len(),
                MAX_DIFF_BYTES / (1024 * 1024)
            ),
        }]
    } else {
        vec![ToolContent::Diff(FileDiff {
            path: path.display().to_string(),
            old_text: old_text.map(str::to_owned),
            new_text: new.to_owned(),
        })]
    };
    ToolView {
        locations: vec![location(path, line)],
        content,
        ..ToolView::default()
    }
}

/// Summary and view of a change, computed off the async workers.
async fn describe_change(path: &Path, old: Current, new: String) -> (String, ToolView) {
    let owned = path.to_path_buf();
    let described = blocking(move || {
        let summary = match &old {
            Current::Text(old) => change_summary(old, &new),
            Current::Missing => format!("+{} lines", new.lines().count()),
            Current::TooLarge(size) => format!("replaced {size} bytes"),
        };
        Ok((summary, diff_view(&owned, &old, &new)))
    })
    .await;
    described.unwrap_or_else(|message| (message, ToolView::default()))
}

pub async fn write(args: &WriteArgs, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let old = match current_text(path, MAX_DIFF_BYTES, env).await {
        Ok(old) => old,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if let Err(message) = store(path, &args.content, env).await {
        return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message);
    }
    let lines = args.content.lines().count();
    let created = matches!(old, Current::Missing);
    let (summary, view) = describe_change(path, old, args.content.clone()).await;
    let output = if created {
        format!("Created {} ({lines} lines).", path.display())
    } else {
        format!("Wrote {} ({lines} lines; {summary}).", path.display())
    };
    ToolOutcome::ok(output, view)
}

pub async fn edit(args: &EditArgs, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    if args.old_string.is_empty() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            "old_string is empty; use write to create or replace a whole file.",
        );
    }
    if args.old_string == args.new_string {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            "old_string and new_string are identical; nothing to change.",
        );
    }
    let old = match current_text(path, MAX_EDIT_BYTES, env).await {
        Ok(Current::Text(old)) => old,
        Ok(Current::Missing) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "File not found: {}; use write to create it.",
                    path.display()
                ),
            )
        }
        Ok(Current::TooLarge(size)) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "{} is {size} bytes; edit handles files up to {} MiB. Use bash (sed, a script) for a file this large.",
                    path.display(),
                    MAX_EDIT_BYTES >> 20
                ),
            )
        }
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let (old_string, new_string, replace_all) = (
        args.old_string.clone(),
        args.new_string.clone(),
        args.replace_all,
    );
    let owned = path.to_path_buf();
    let replaced = blocking(move || {
        let starts: Vec<usize> = old
            .match_indices(&old_string)
            .map(|(index, _)| index)
            .collect();
        let line_of = |byte: usize| old[..byte].matches('\n').count() + 1;
        if starts.is_empty() {
            return Err(not_found_message(&old, &old_string, &owned));
        }
        if starts.len() > 1 && !replace_all {
            let lines: Vec<String> = starts
                .iter()
                .take(10)
                .map(|s| line_of(*s).to_string())
                .collect();
            return Err(format!(
                "old_string matches {} places in {} (lines {}{}). Include more surrounding context to make it unique, or set replace_all to true.",
                starts.len(),
                owned.display(),
                lines.join(", "),
                if starts.len() > 10 { ", …" } else { "" }
            ));
        }
        let new = if replace_all {
            old.replace(&old_string, &new_string)
        } else {
            old.replacen(&old_string, &new_string, 1)
        };
        let first_line = line_of(starts[0]);
        Ok((old, new, starts.len(), first_line))
    })
    .await;
    let (old, new, count, first_line) = match replaced {
        Ok(replaced) => replaced,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if let Err(message) = store(path, &new, env).await {
        return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message);
    }
    let (summary, view) = describe_change(path, Current::Text(old), new).await;
    let output = format!(
        "Edited {}: replaced {count} occurrence{} at line {first_line} ({summary}).",
        path.display(),
        if count == 1 { "" } else { "s" },
    );
    ToolOutcome::ok(output, view)
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
        let big = "y".repeat(MAX_DIFF_BYTES as usize + 1);
        let view = diff_view(
            Path::new("/w/big.txt"),
            &Current::Text("old\n".into()),
            &big,
        );
        assert!(
            matches!(&view.content[0], ToolContent::Text { text } if text.contains("too large"))
        );
        let view = diff_view(Path::new("/w/small.txt"), &Current::Missing, "new\n");
        assert!(matches!(&view.content[0], ToolContent::Diff(diff) if diff.old_text.is_none()));
        let view = diff_view(
            Path::new("/w/huge.txt"),
            &Current::TooLarge(1 << 30),
            "new\n",
        );
        assert!(matches!(&view.content[0], ToolContent::Text { .. }));
    }

    /// Issue 10, items 13 and 20.
    #[test]
    fn first_changed_line_and_not_found_hints() {
        assert_eq!(first_changed_line("a\nb\nc\n", "a\nB\nc\n"), 2);
        assert_eq!(first_changed_line("a\n", "a\nb\n"), 2);
        assert_eq!(first_changed_line("one line\n", "one line\n"), 1);
        assert_eq!(first_changed_line("a\nb\n", "a\n"), 1);
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

    /// Issue 10, item 13: rewriting a 1.2 MB file of distinct lines (the
    /// worst case for a line diff) costs about the deadline, not a minute.
    #[test]
    fn the_change_count_has_a_deadline() {
        let old: String = (0..60_000u64)
            .map(|i| format!("line {i} {}\n", i * 7919 % 10007))
            .collect();
        let new: String = (0..60_000u64)
            .map(|i| format!("row {i} {}\n", i * 104729 % 10007))
            .collect();
        let started = std::time::Instant::now();
        let summary = change_summary(&old, &new);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(summary.contains('+'), "{summary}");
    }

    /// Issue 10, item 12: a window of a file with a 3 MB line and many short
    /// lines keeps only what it shows.
    #[test]
    fn streaming_keeps_only_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        let mut text = "x".repeat(3_000_000);
        text.push('\n');
        for i in 0..10 {
            text.push_str(&format!("line {i}\n"));
        }
        std::fs::write(&path, &text).unwrap();
        let mut window = Window::new(1, 3);
        let cancel = tokio_util::sync::CancellationToken::new();
        let seen = stream_into(&path, text.len() as u64, &mut window, &cancel).unwrap();
        assert!(matches!(seen, Seen::All));
        assert_eq!(window.total, 11);
        assert_eq!(window.shown, 3);
        assert!(window.out.len() < 10_000, "{}", window.out.len());
        assert!(window.out.contains("[line truncated: 3000000 characters]"));
        assert!(window.out.contains("     3\tline 1\n"));
    }

    #[test]
    fn a_text_file_with_an_image_magic_is_text() {
        let mut head = b"GIF89a is how this note starts\n".to_vec();
        head.resize(200, b'a');
        assert!(image_kind(&head).is_some());
        assert!(looks_like_text(&head, false));
        let gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00";
        assert!(!looks_like_text(gif, false));
    }
}
