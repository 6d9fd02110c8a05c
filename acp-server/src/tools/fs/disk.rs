//! The disk side of the file tools: only regular files are opened (a FIFO,
//! socket or device is refused without blocking), every access runs off the
//! async workers, and what a path holds — text, an image, binary data — is
//! decided from its content.

use std::io::Read;
use std::path::Path;

use super::MAX_CLIENT_READ_BYTES;
use crate::tools::ToolEnv;

/// Runs blocking file work off the async workers. A panic in it is the
/// caller's panic (the turn catches it); a runtime shutting down is an
/// error.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(_) => Err("dsh is shutting down".to_owned()),
    }
}

/// What a path is, for the refusal of anything but a regular file.
pub(super) fn special_kind(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a named pipe (FIFO)";
        } else if file_type.is_socket() {
            return "a socket";
        } else if file_type.is_block_device() || file_type.is_char_device() {
            return "a device";
        }
    }
    #[cfg(not(unix))]
    let _ = file_type;
    "not a regular file"
}

pub(super) fn not_regular(path: &Path, kind: &str) -> String {
    format!(
        "{} is {kind}; only regular files can be read or written.",
        path.display()
    )
}

/// Opens a file for reading only if it is a regular file, without blocking
/// on a FIFO that appeared in its place, and without following a link that
/// appeared on the way since the path was resolved ([`crate::beneath`]).
pub(super) fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    crate::beneath::open_read(path).map_err(|err| match err {
        crate::beneath::FsError::Io(path, err) => {
            format!("Cannot read {}: {err}", path.display())
        }
        other => other.to_string(),
    })
}

/// What is on disk at a path.
pub(super) enum Probe {
    Missing,
    Directory,
    Binary(String),
    Image { what: String, size: u64 },
    Text { size: u64 },
}

/// Sniffs an image format from content (not the extension): (kind, MIME).
/// The magic number alone does not make an image: a text file may start
/// with `GIF89a`; the caller also checks the head is not text.
pub(super) fn image_kind(head: &[u8]) -> Option<(&'static str, &'static str)> {
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
pub(super) fn looks_like_text(head: &[u8], full_window: bool) -> bool {
    let utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(err) => err.error_len().is_none() && full_window,
    };
    utf8 && !head.contains(&0)
}

/// Looks at a path (blocking).
pub(super) fn probe(path: &Path) -> Result<Probe, String> {
    let meta = match crate::beneath::metadata(path) {
        Ok(Some(meta)) => meta,
        Ok(None) => return Ok(Probe::Missing),
        Err(crate::beneath::FsError::Io(_, err)) => {
            return Err(format!("Cannot access {}: {err}", path.display()))
        }
        Err(err) => return Err(err.to_string()),
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
    if let Some((kind, _)) = image_kind(&head).filter(|_| !text) {
        return Ok(Probe::Image {
            what: format!("{kind}, {} bytes", meta.len()),
            size: meta.len(),
        });
    }
    if !text {
        return Ok(Probe::Binary(format!("binary data, {} bytes", meta.len())));
    }
    Ok(Probe::Text { size: meta.len() })
}

/// The current content of a file about to change.
pub(super) enum Current {
    /// There is no file yet.
    Missing,
    /// Its text.
    Text(String),
    /// A text file larger than the caller's cap, of this many bytes.
    TooLarge(u64),
}

/// Reads the current text of a file for an edit or a diff basis, up to
/// `cap` bytes: through the client when it can, else from disk.
pub(super) async fn current_text(
    path: &Path,
    cap: u64,
    env: &ToolEnv<'_>,
) -> Result<Current, String> {
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
pub(in crate::tools) async fn read_text(
    path: &Path,
    cap: u64,
    env: &ToolEnv<'_>,
) -> Result<String, String> {
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
/// regular file only, replaced through a handle of its directory, never
/// through a link (the path is already resolved; a link that appears on
/// the way since is refused: [`crate::beneath::write`]).
pub(super) async fn store(path: &Path, content: &str, env: &ToolEnv<'_>) -> Result<(), String> {
    if env.frontend.caps().write_text_file {
        return env.frontend.write_text_file(path, content.to_owned()).await;
    }
    let owned = path.to_path_buf();
    let content = content.to_owned();
    blocking(move || {
        crate::beneath::write(&owned, content.as_bytes(), true).map_err(|err| match err {
            crate::beneath::FsError::Io(path, err) => {
                format!("Cannot write {}: {err}", path.display())
            }
            other => other.to_string(),
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

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
