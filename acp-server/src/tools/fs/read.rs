//! `read`: a window of a text file, streamed from disk (or taken from the
//! editor's buffer), or an image handed to the model. When a cap cuts the
//! window (its bytes, or a long line), the window's lines, whole, are
//! saved in the call's spill file, and the model is told where (unless
//! the file read is itself in the session's spill directory).

use std::io::Read;

use serde::Deserialize;
use std::path::Path;

use dsh_protocol::tool::{ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;

use super::disk::{blocking, open_regular, probe, Probe};
use super::{
    location, ReadArgs, COUNT_LINES_UP_TO, DEFAULT_LIMIT, LINE_KEEP_BYTES, MAX_CLIENT_READ_BYTES,
    MAX_LINE_CHARS, MAX_READ_BYTES,
};
use crate::tools::spill::{SpillTarget, SpillWriter, Spilled};
use crate::tools::ToolEnv;

/// `offset` and `limit` are JSON numbers (the catalog's `number`): `12`
/// and `12.0` are the same line; `1.5` or a negative number is refused.
pub(super) fn whole_number<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<u64>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(de)? else {
        return Ok(None);
    };
    if let Some(whole) = number.as_u64() {
        return Ok(Some(whole));
    }
    match number.as_f64().and_then(crate::tools::whole_number) {
        Some(whole) => Ok(Some(whole)),
        None => Err(serde::de::Error::custom(format!(
            "{number} is not a line number: offset and limit are whole numbers of lines (e.g. 12)"
        ))),
    }
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
    /// A line was cut at [`MAX_LINE_CHARS`].
    cut_lines: bool,
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
            cut_lines: false,
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
            self.cut_lines = true;
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

/// Writes lines `first..=last` of `source`, whole and numbered like the
/// window, to `spill` (blocking), until it is full.
fn spill_window(
    mut source: impl Read,
    first: u64,
    last: u64,
    spill: &mut SpillWriter,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(), String> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut number = 1u64;
    let mut at_start = true;
    while number <= last {
        if cancel.is_cancelled() {
            return Err("Cancelled while reading.".to_owned());
        }
        let n = source.read(&mut chunk).map_err(|err| err.to_string())?;
        if n == 0 {
            if !at_start {
                spill.write(b"\n");
            }
            return Ok(());
        }
        let mut rest = &chunk[..n];
        while !rest.is_empty() && number <= last {
            let (part, ended) = match rest.iter().position(|b| *b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            if number >= first {
                if at_start && !spill.write(format!("{number:>6}\t").as_bytes()) {
                    return Ok(());
                }
                let part = if ended {
                    part.strip_suffix(b"\r").unwrap_or(part)
                } else {
                    part
                };
                if !spill.write(part) || (ended && !spill.write(b"\n")) {
                    return Ok(());
                }
            }
            at_start = ended;
            if ended {
                number += 1;
                rest = &rest[part.len() + 1..];
            } else {
                rest = &[];
            }
        }
    }
    Ok(())
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
        Ok(Probe::Image { what, size, .. }) => return super::image::attach(path, what, size).await,
        Ok(Probe::Text { size }) => size,
    };
    // The editor's buffer, kept for a spill.
    let mut buffer = None;
    let window = if env.frontend.caps().read_text_file && size <= MAX_CLIENT_READ_BYTES {
        match env.frontend.read_text_file(path).await {
            Ok(text) => {
                let mut window = Window::new(offset, limit);
                window.feed_text(&text);
                buffer = Some(text);
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
    if SpillTarget::holds(env, path) {
        // A spill file is never spilled again (each read would write
        // another, the long line still unseen).
        if window.cut_lines {
            window.out.push_str(&format!(
                "[a line was cut at {MAX_LINE_CHARS} characters; this is a spill file, which is not saved again: grep it for what you need, or read on with offset]\n"
            ));
        }
    } else if window.capped || window.cut_lines {
        let end = match seen {
            Seen::All => (offset + limit - 1).min(total),
            Seen::Window => offset + limit - 1,
        };
        let spilled = spill(path, buffer, offset, end, env).await;
        window.out.push_str(&format!(
            "[{}]\n",
            spilled.sentence(&format!(
                "output of this read (lines {offset}-{end}, every line whole)"
            ))
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

/// Saves lines `first..=last` of the file (or of the editor's `buffer`),
/// whole, in the call's spill file.
async fn spill(
    path: &Path,
    buffer: Option<String>,
    first: u64,
    last: u64,
    env: &ToolEnv<'_>,
) -> Spilled {
    let target = SpillTarget::new(env, "txt");
    let owned = path.to_path_buf();
    let cancel = env.cancel.clone();
    let spilled = blocking(move || {
        let mut writer = SpillWriter::create(&target);
        let written = match &buffer {
            Some(text) => spill_window(text.as_bytes(), first, last, &mut writer, &cancel),
            None => open_regular(&owned)
                .and_then(|file| spill_window(file, first, last, &mut writer, &cancel)),
        };
        let mut spilled = writer.finish();
        if let (Err(err), Ok(_)) = (written, &spilled.saved) {
            spilled.saved = Err(err);
        }
        Ok(spilled)
    })
    .await;
    spilled.unwrap_or_else(Spilled::failed)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// `offset`/`limit` are the catalog's `number`: 12.0 is line 12, 1.5
    /// is refused with a message saying why.
    #[test]
    fn line_numbers_are_whole_json_numbers() {
        let args: crate::tools::fs::ReadArgs =
            serde_json::from_str(r#"{"file_path":"a","offset":12.0,"limit":3}"#).unwrap();
        assert_eq!((args.offset, args.limit), (Some(12), Some(3)));
        let err =
            serde_json::from_str::<crate::tools::fs::ReadArgs>(r#"{"file_path":"a","offset":1.5}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("1.5 is not a line number"), "{err}");
        assert!(serde_json::from_str::<crate::tools::fs::ReadArgs>(
            r#"{"file_path":"a","limit":-2}"#
        )
        .is_err());
    }

    /// The spill of a window holds its lines whole, numbered.
    #[test]
    fn a_spilled_window_keeps_its_lines_whole() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("one\r\n{}\nthree\nfour", "y".repeat(5000));
        let target = SpillTarget::at(dir.path(), "c1", "txt");
        let mut writer = SpillWriter::create(&target);
        let cancel = tokio_util::sync::CancellationToken::new();
        spill_window(text.as_bytes(), 2, 3, &mut writer, &cancel).unwrap();
        let path = writer.finish().saved.unwrap();
        let saved = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            saved,
            format!("     2\t{}\n     3\tthree\n", "y".repeat(5000))
        );
    }
}
