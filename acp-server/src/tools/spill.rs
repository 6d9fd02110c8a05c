//! Spilled output: what a tool's capped result leaves out, saved for the
//! model to read or search later (the catalog's spill store, local). Each
//! call spills at most one file, `<spill dir>/<call id>.<ext>`: the
//! session's spill directory is created 0700, the file 0600 and only if it
//! does not exist (never through a planted file or link); it keeps at most
//! [`SPILL_BYTES`]. The model's `read` and `grep` may read the directory
//! (the permission policy's "session's spilled outputs").
//!
//! `bash` streams its output into one ([`SpillTarget::open`]); `glob`,
//! `grep` and `read` write theirs from a blocking walk ([`SpillWriter`]);
//! MCP results spill their text at once ([`cap_output`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use dsh_protocol::tool::{ToolContent, ToolOutcome};

use super::ToolEnv;

/// How much a spill file keeps (its head).
pub const SPILL_BYTES: u64 = 64 * 1024 * 1024;

/// The text of an MCP result the model gets inline; the rest spills.
pub const MCP_RESULT_BYTES: usize = 64 * 1024;

/// Where a call's spill file goes.
#[derive(Debug, Clone)]
pub struct SpillTarget {
    path: PathBuf,
}

impl SpillTarget {
    /// `<spill dir>/<call id>.<ext>`, the id made safe as a file name.
    pub fn new(env: &ToolEnv<'_>, ext: &str) -> SpillTarget {
        SpillTarget::at(env.spill_dir, env.call_id.as_str(), ext)
    }

    /// `<dir>/<call id>.<ext>`.
    pub fn at(dir: &Path, call_id: &str, ext: &str) -> SpillTarget {
        let name = call_id.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
            "_",
        );
        SpillTarget {
            path: dir.join(format!("{name}.{ext}")),
        }
    }

    /// Creates the file (blocking): the directory 0700 if needed, the file
    /// 0600, exclusively.
    pub fn create(&self) -> Result<std::fs::File, String> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|err| format!("{}: {err}", dir.display()))?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|err| format!("{}: {err}", self.path.display()))
    }

    /// [`SpillTarget::create`] off the async workers, as a Tokio file.
    pub async fn open(&self) -> Result<(tokio::fs::File, PathBuf), String> {
        let target = self.clone();
        let file = tokio::task::spawn_blocking(move || target.create())
            .await
            .map_err(|err| err.to_string())??;
        Ok((tokio::fs::File::from_std(file), self.path.clone()))
    }
}

/// A spill file written from blocking code, up to [`SPILL_BYTES`]; what
/// does not fit is counted, not kept.
pub struct SpillWriter {
    file: Result<std::io::BufWriter<std::fs::File>, String>,
    path: PathBuf,
    written: u64,
    cut: bool,
}

impl SpillWriter {
    /// Creates the file (an error is kept and reported by [`Spilled`]).
    pub fn create(target: &SpillTarget) -> SpillWriter {
        SpillWriter {
            file: target
                .create()
                .map(|file| std::io::BufWriter::with_capacity(64 * 1024, file)),
            path: target.path.clone(),
            written: 0,
            cut: false,
        }
    }

    /// Appends `bytes`; false once nothing more is kept (full or failed).
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        let Ok(file) = self.file.as_mut() else {
            return false;
        };
        let room = SPILL_BYTES.saturating_sub(self.written) as usize;
        let part = &bytes[..bytes.len().min(room)];
        if part.len() < bytes.len() {
            self.cut = true;
        }
        if let Err(err) = file.write_all(part) {
            self.file = Err(format!("{}: {err}", self.path.display()));
            return false;
        }
        self.written += part.len() as u64;
        !self.cut
    }

    /// Flushes and says what the file holds.
    pub fn finish(self) -> Spilled {
        let saved = match self.file {
            Ok(mut file) => file
                .flush()
                .map(|()| self.path.clone())
                .map_err(|err| format!("{}: {err}", self.path.display())),
            Err(err) => Err(err),
        };
        Spilled {
            saved,
            cut: self.cut,
        }
    }
}

/// What a spill kept.
#[derive(Debug)]
pub struct Spilled {
    /// The file, or why it could not be written.
    pub saved: Result<PathBuf, String>,
    /// It holds only the first [`SPILL_BYTES`].
    pub cut: bool,
}

impl Spilled {
    /// Writes `text` to the call's spill file at once (off the async
    /// workers).
    pub async fn save(target: SpillTarget, text: String) -> Spilled {
        tokio::task::spawn_blocking(move || {
            let mut writer = SpillWriter::create(&target);
            writer.write(text.as_bytes());
            writer.finish()
        })
        .await
        .unwrap_or_else(|err| Spilled {
            saved: Err(err.to_string()),
            cut: false,
        })
    }

    /// The sentence that tells the model where the rest is: "The complete
    /// `what` is saved in PATH; read or grep that file for the rest."
    pub fn sentence(&self, what: &str) -> String {
        match (&self.saved, self.cut) {
            (Ok(path), false) => format!(
                "The complete {what} is saved in {}; read or grep that file for the rest.",
                path.display()
            ),
            (Ok(path), true) => format!(
                "The first {} MiB of the complete {what} are saved in {} (it was cut there); read or grep that file for the rest.",
                SPILL_BYTES >> 20,
                path.display()
            ),
            (Err(err), _) => format!("The complete {what} could not be saved ({err})."),
        }
    }
}

/// Caps a text result at `max` bytes for the model: a longer one is saved
/// whole in the call's spill file, and the model gets its head and the
/// sentence saying where the rest is (the error message, when it failed,
/// likewise). Views are left as they are.
pub async fn cap_output(mut outcome: ToolOutcome, max: usize, env: &ToolEnv<'_>) -> ToolOutcome {
    if outcome.output.len() <= max {
        return outcome;
    }
    let total = outcome.output.len();
    let full = std::mem::take(&mut outcome.output);
    let head = dsh_protocol::content::head_bytes(&full, max).to_owned();
    let spilled = Spilled::save(SpillTarget::new(env, "txt"), full).await;
    outcome.output = format!(
        "{head}\n[result truncated: showing the first {} of {total} bytes. {}]",
        head.len(),
        spilled.sentence("result")
    );
    if let Some(error) = outcome.error.as_mut() {
        error.message = outcome.output.clone();
        if let Some(ToolContent::Text { text }) = outcome.view.content.first_mut() {
            *text = outcome.output.clone();
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directory is private, the file private and never reused, and
    /// a spill keeps at most its cap.
    #[test]
    fn spill_files_are_private_exclusive_and_bounded() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("spill/s1");
        let target = SpillTarget::at(&dir, "call/../1", "txt");
        let mut writer = SpillWriter::create(&target);
        assert!(writer.write(b"hello\n"));
        let spilled = writer.finish();
        let path = spilled.saved.as_ref().unwrap();
        assert_eq!(path, &dir.join("call____1.txt"));
        assert_eq!(std::fs::read_to_string(path).unwrap(), "hello\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(path)), (0o700, 0o600));
        assert!(spilled
            .sentence("list")
            .contains("The complete list is saved in"));
        // A second spill of the same call does not overwrite the first.
        let again = SpillWriter::create(&target).finish();
        assert!(again.saved.is_err());
        assert!(again.sentence("list").contains("could not be saved"));

        let big = SpillTarget::at(&dir, "big", "txt");
        let mut writer = SpillWriter::create(&big);
        let chunk = vec![b'a'; 1 << 20];
        let mut chunks = 0;
        while writer.write(&chunk) {
            chunks += 1;
        }
        assert_eq!(chunks, SPILL_BYTES >> 20);
        let spilled = writer.finish();
        assert!(spilled.cut);
        assert_eq!(
            std::fs::metadata(spilled.saved.as_ref().unwrap())
                .unwrap()
                .len(),
            SPILL_BYTES
        );
        assert!(spilled.sentence("list").contains("The first 64 MiB"));
    }
}
