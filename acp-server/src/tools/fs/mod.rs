//! `read`, `write`, `edit`, `read_image` and `str_replace_editor`. Reads
//! and writes go through the client's file system when it advertises one
//! (so reads see unsaved buffers and writes land in the editor's review
//! list), else the disk.
//!
//! Bad files cannot hurt the process: only regular files are opened (a FIFO,
//! socket or device is refused without blocking: files are opened
//! non-blocking and checked after opening), every disk access and diff runs
//! off the async workers, and memory per call is bounded whatever the file:
//! - `read` streams the file and keeps at most its output (256 KiB, 2,000
//!   characters a line), counting lines past its window only in files up to
//!   64 MiB; the editor is asked for files up to 8 MiB;
//! - an image is an image when its header says so *and* the start of the
//!   file is not text, up to 20 MiB, checked and scaled down for the model
//!   (`image.rs`);
//! - `write` reads the old file for its diff only up to 2 MiB, `edit`
//!   changes files up to 32 MiB;
//! - diffs shown to the editor are whole-file up to 2 MiB a side, else a
//!   summary; the line counts of a change are computed with a deadline.

mod change;
mod disk;
mod image;
mod read;
mod str_replace;

use std::path::Path;
use std::time::Duration;

use dsh_protocol::tool::{FileLocation, ToolKind, ToolView};
use serde::Deserialize;

use super::display_path;

pub use change::{edit, write};
pub(super) use disk::read_text;
pub use image::{present_read_image, read_image, ReadImageArgs, READ_IMAGE_DESCRIPTION};
pub use read::read;
pub use str_replace::{EditorArgs, EditorCall, STR_REPLACE_EDITOR_DESCRIPTION};

pub const READ_DESCRIPTION: &str =
    "Read a UTF-8 text file and return its content with line numbers.";
pub const WRITE_DESCRIPTION: &str = "Create or completely replace a UTF-8 text file.";
pub const EDIT_DESCRIPTION: &str = "Edit an existing UTF-8 text file by replacing literal text.";

const DEFAULT_LIMIT: u64 = 2000;
const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line kept while streaming (enough for its shown part).
const LINE_KEEP_BYTES: usize = MAX_LINE_CHARS * 4;
const MAX_READ_BYTES: usize = 256 * 1024;
/// Past its window, `read` counts the file's lines only up to this size.
const COUNT_LINES_UP_TO: u64 = 64 * 1024 * 1024;
/// Files up to this size are read through the editor when it offers to.
const MAX_CLIENT_READ_BYTES: u64 = 8 * 1024 * 1024;
/// Largest side of a diff shown to the editor, and of an old file read for it.
const MAX_DIFF_BYTES: u64 = 2 * 1024 * 1024;
/// Largest file `edit` changes (it holds the file in memory twice).
const MAX_EDIT_BYTES: u64 = 32 * 1024 * 1024;
/// How long counting the changed lines of a write or edit may take.
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

#[derive(Debug, Deserialize)]
pub struct ReadArgs {
    pub file_path: String,
    #[serde(default, deserialize_with = "read::whole_number")]
    pub offset: Option<u64>,
    #[serde(default, deserialize_with = "read::whole_number")]
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
