//! Spilled output: what a tool's capped result leaves out, saved for the
//! model to read or search later (the catalog's spill store, local). Each
//! call spills at most one file, `<spill dir>/call-<encoded call id>.<ext>`
//! (background jobs: `job-<n>.log`; every spill file is made by
//! [`crate::jobs::spill_file::create`]): the session's spill directory is created 0700,
//! the file 0600 and only if it does not exist (never through a planted
//! file or link); it keeps at most [`SPILL_BYTES`], and all of a session's
//! spill files share the jobs' disk budget ([`crate::jobs::SpillBudget`]).
//! The model's `read` and `grep` may read the directory (the permission
//! policy's "session's spilled outputs"); `read` never spills a file of it
//! again. At start, spill files older than [`SWEEP_AFTER`] are deleted
//! ([`sweep`]).
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

/// Spill files older than this are deleted when dsh starts (the catalog's
/// `cleanupPeriodDays`, 30).
pub const SWEEP_AFTER: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 60 * 60);

/// Where a call's spill file goes.
#[derive(Clone)]
pub struct SpillTarget {
    path: PathBuf,
    /// Counts the file in the session's disk budget (a tool call's).
    claim: Option<std::sync::Arc<Claim>>,
}

/// A tool call's share of the session's spill budget; its file may be
/// deleted for the budget once the call is over (the last clone dropped).
struct Claim {
    budget: crate::jobs::SpillBudget,
    key: u64,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.budget.done(self.key);
    }
}

/// The call id as a file name, one-to-one: ASCII letters, digits and `-`
/// stay, every other byte is `_` and two hex digits.
fn encode(call_id: &str) -> String {
    let mut name = String::with_capacity(call_id.len());
    for byte in call_id.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            name.push(char::from(byte));
        } else {
            name.push_str(&format!("_{byte:02X}"));
        }
    }
    name
}

impl SpillTarget {
    /// `<spill dir>/call-<encoded call id>.<ext>`, counted in the
    /// session's spill budget.
    pub fn new(env: &ToolEnv<'_>, ext: &str) -> SpillTarget {
        SpillTarget::counted(
            env.spill_dir,
            env.call_id.as_str(),
            ext,
            env.jobs.spill_budget(),
        )
    }

    /// [`SpillTarget::at`], counted in `budget`.
    pub fn counted(
        dir: &Path,
        call_id: &str,
        ext: &str,
        budget: crate::jobs::SpillBudget,
    ) -> SpillTarget {
        let key = budget.key();
        SpillTarget {
            claim: Some(std::sync::Arc::new(Claim { budget, key })),
            ..SpillTarget::at(dir, call_id, ext)
        }
    }

    /// Whether `path` is this call's spill file.
    pub fn is(&self, path: &Path) -> bool {
        self.path == path
    }

    /// `<dir>/call-<encoded call id>.<ext>` (no budget).
    pub fn at(dir: &Path, call_id: &str, ext: &str) -> SpillTarget {
        SpillTarget {
            path: dir.join(format!("call-{}.{ext}", encode(call_id))),
            claim: None,
        }
    }

    /// How many of `wanted` more bytes the session's spill budget lets
    /// the file keep (blocking: older finished spill files may be deleted
    /// to make room).
    pub fn reserve(&self, wanted: u64) -> u64 {
        match &self.claim {
            Some(claim) => claim.budget.reserve(claim.key, &self.path, wanted),
            None => wanted,
        }
    }

    /// The session's spill budget, in bytes, if the file counts in one.
    pub fn budget(&self) -> Option<u64> {
        self.claim.as_ref().map(|claim| claim.budget.max())
    }

    /// Whether `path` is in the session's spill directory.
    pub fn holds(env: &ToolEnv<'_>, path: &Path) -> bool {
        path.starts_with(env.spill_dir)
            || dunce::canonicalize(env.spill_dir).is_ok_and(|dir| path.starts_with(dir))
    }

    /// Creates the file (blocking): the directory 0700 if needed, the file
    /// 0600, exclusively (the one maker of spill files,
    /// [`crate::jobs::spill_file::create`]).
    pub fn create(&self) -> Result<std::fs::File, String> {
        crate::jobs::spill_file::create(&self.path)
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
    target: SpillTarget,
    written: u64,
    cut: bool,
    /// The session's spill budget (bytes) cut it.
    over_budget: Option<u64>,
}

impl SpillWriter {
    /// Creates the file (an error is kept and reported by [`Spilled`]).
    pub fn create(target: &SpillTarget) -> SpillWriter {
        SpillWriter {
            file: target
                .create()
                .map(|file| std::io::BufWriter::with_capacity(64 * 1024, file)),
            target: target.clone(),
            written: 0,
            cut: false,
            over_budget: None,
        }
    }

    /// Appends `bytes`; false once nothing more is kept (full or failed).
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        let Ok(file) = self.file.as_mut() else {
            return false;
        };
        if self.over_budget.is_some() {
            return false;
        }
        let room = SPILL_BYTES.saturating_sub(self.written) as usize;
        let mut part = &bytes[..bytes.len().min(room)];
        if part.len() < bytes.len() {
            self.cut = true;
        }
        let granted = self.target.reserve(part.len() as u64) as usize;
        if granted < part.len() {
            part = &part[..granted];
            self.over_budget = self.target.budget();
        }
        if let Err(err) = file.write_all(part) {
            self.file = Err(format!("{}: {err}", self.target.path.display()));
            return false;
        }
        self.written += part.len() as u64;
        !self.cut && self.over_budget.is_none()
    }

    /// Flushes and says what the file holds.
    pub fn finish(self) -> Spilled {
        let path = &self.target.path;
        let saved = match self.file {
            Ok(mut file) => file
                .flush()
                .map(|()| path.clone())
                .map_err(|err| format!("{}: {err}", path.display())),
            Err(err) => Err(err),
        };
        Spilled {
            saved,
            cut: self.cut,
            over_budget: self.over_budget.map(|max| (max, self.written)),
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
    /// The session's spill budget (its bytes) was used up: the file holds
    /// only this many bytes.
    pub over_budget: Option<(u64, u64)>,
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
        .unwrap_or_else(|err| Spilled::failed(err.to_string()))
    }

    /// Nothing was saved, for this reason.
    pub fn failed(err: String) -> Spilled {
        Spilled {
            saved: Err(err),
            cut: false,
            over_budget: None,
        }
    }

    /// The sentence that tells the model where the rest is: "The complete
    /// `what` is saved in PATH; read or grep that file for the rest."
    pub fn sentence(&self, what: &str) -> String {
        if let (Ok(path), Some((max, kept))) = (&self.saved, self.over_budget) {
            return format!(
                "This session's spill budget ({max} bytes, [jobs] max_spill_bytes_per_session) is used up: only the first {kept} bytes of the complete {what} are saved in {}; read or grep that file for what it holds.",
                path.display()
            );
        }
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

/// Deletes the spill files under `root` (`$DSH_HOME/spill`) last
/// modified before `before` — only what dsh names there: a session's
/// directory `<root>/<session>/` and in it `call-…`, `job-….log` and
/// `terminal-….log` files, nothing deeper — then the session directories that leaves empty
/// (blocking; dsh runs it in the background at start; a spill file made
/// meanwhile makes its directory again). Links are never followed nor
/// deleted, and a directory someone else owns or may write in is left
/// alone, with all it holds.
pub fn sweep(root: &Path, before: std::time::SystemTime) {
    fn ours(meta: &std::fs::Metadata) -> bool {
        meta.is_dir() && crate::private::is_owned(meta, crate::private::GROUP_OTHER_WRITE)
    }
    fn spill_name(name: &std::ffi::OsStr) -> bool {
        let name = name.to_string_lossy();
        name.starts_with("call-")
            || ((name.starts_with("job-") || name.starts_with("terminal-"))
                && name.ends_with(".log"))
    }
    /// Sweeps a session's directory; whether it is now empty.
    fn sweep_session(dir: &Path, before: std::time::SystemTime) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        let mut empty = true;
        for entry in entries.flatten() {
            let path = entry.path();
            let gone = spill_name(&entry.file_name())
                && std::fs::symlink_metadata(&path).is_ok_and(|meta| {
                    meta.file_type().is_file() && meta.modified().is_ok_and(|at| at < before)
                })
                && std::fs::remove_file(&path).is_ok();
            empty &= gone;
        }
        empty
    }
    if !std::fs::symlink_metadata(root).is_ok_and(|meta| ours(&meta)) {
        return;
    }
    let Ok(sessions) = std::fs::read_dir(root) else {
        return;
    };
    for session in sessions.flatten() {
        let path = session.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|meta| ours(&meta))
            && sweep_session(&path, before)
        {
            let _ = std::fs::remove_dir(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directory is private, the file private and never reused, and
    /// a spill keeps at most its cap.
    #[test]
    fn spill_files_are_private_exclusive_and_bounded() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("spill/s1");
        let target = SpillTarget::at(&dir, "call/../1", "txt");
        let mut writer = SpillWriter::create(&target);
        assert!(writer.write(b"hello\n"));
        let spilled = writer.finish();
        let path = spilled.saved.as_ref().unwrap();
        assert_eq!(path, &dir.join("call-call_2F_2E_2E_2F1.txt"));
        assert_eq!(std::fs::read_to_string(path).unwrap(), "hello\n");
        let mode = |p: &Path| crate::private::mode_of(&std::fs::metadata(p).unwrap());
        if cfg!(unix) {
            assert_eq!((mode(&dir), mode(path)), (Some(0o700), Some(0o600)));
        }
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

#[cfg(test)]
mod more_tests {
    use super::*;

    /// Names are one-to-one and kind-prefixed: `x~2` and `x_2` differ, and
    /// a call named `job-3` does not take job 3's log.
    #[test]
    fn spill_names_are_one_to_one_and_apart_from_jobs() {
        let dir = Path::new("/s");
        let name = |id: &str| SpillTarget::at(dir, id, "log").path;
        assert_ne!(name("x~2"), name("x_2"));
        assert_ne!(name("a/b"), name("a_2Fb"));
        let job = crate::jobs::spill_file::job_path(dir, 3);
        assert_ne!(name("job-3"), job);
        assert_eq!(job, dir.join("job-3.log"));
        assert_eq!(name("toolu_01"), dir.join("call-toolu_5F01.log"));
    }

    /// Tool spills count in the session's spill budget with the jobs':
    /// past it the oldest finished ones are deleted first, and one alone
    /// over it keeps what fits and says the budget is used up.
    #[test]
    fn tool_spills_share_the_sessions_spill_budget() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("spill/s1");
        let settings = crate::jobs::JobSettings {
            max_spill_bytes_per_session: 3_000_000,
            ..Default::default()
        };
        let jobs = crate::jobs::Jobs::new(settings, dir.clone());
        let spill = |id: &str, bytes: usize| {
            let target = SpillTarget::counted(&dir, id, "txt", jobs.spill_budget());
            let mut writer = SpillWriter::create(&target);
            writer.write(&vec![b'x'; bytes]);
            writer.finish()
        };
        for id in ["a", "b", "c", "d"] {
            let spilled = spill(id, 1_000_000);
            assert!(
                spilled.over_budget.is_none(),
                "{}",
                spilled.sentence("list")
            );
        }
        let on_disk = |id: &str| dir.join(format!("call-{id}.txt")).exists();
        assert!(!on_disk("a") && on_disk("b") && on_disk("c") && on_disk("d"));
        let big = spill("e", 4_000_000);
        assert_eq!(big.over_budget, Some((3_000_000, 3_000_000)));
        assert!(
            big.sentence("list")
                .contains("This session's spill budget (3000000 bytes, [jobs] max_spill_bytes_per_session) is used up: only the first 3000000 bytes"),
            "{}",
            big.sentence("list")
        );
        assert!(!on_disk("b") && !on_disk("c") && !on_disk("d"));
        assert_eq!(
            std::fs::metadata(dir.join("call-e.txt")).unwrap().len(),
            3_000_000
        );
    }

    /// The sweep deletes old spill files and the directories emptied, and
    /// leaves new files, links (and what they point at) and directories
    /// others may write in.
    #[cfg(unix)]
    #[test]
    fn the_sweep_deletes_old_spill_files_only() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("spill");
        let old = std::time::SystemTime::now() - SWEEP_AFTER - std::time::Duration::from_secs(60);
        let plant = |path: &Path, aged: bool| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let file = std::fs::File::create(path).unwrap();
            if aged {
                file.set_modified(old).unwrap();
            }
        };
        plant(&root.join("s1/call-a.log"), true);
        plant(&root.join("s2/call-b.log"), true);
        plant(&root.join("s2/call-c.log"), false);
        plant(&root.join("open/call-d.log"), true);
        // Only dsh's names, one level down.
        plant(&root.join("s2/notes.txt"), true);
        plant(&root.join("s2/deep/call-e.log"), true);
        for (dir, mode) in [("", 0o700), ("s1", 0o700), ("s2", 0o700), ("open", 0o777)] {
            std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(mode))
                .unwrap();
        }
        let outside = home.path().join("keep.log");
        plant(&outside, true);
        std::fs::create_dir_all(root.join("s3")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("s3/link.log")).unwrap();
        std::os::unix::fs::symlink(home.path(), root.join("home")).unwrap();

        sweep(&root, std::time::SystemTime::now() - SWEEP_AFTER);
        assert!(!root.join("s1").exists());
        assert!(!root.join("s2/call-b.log").exists());
        assert!(root.join("s2/call-c.log").exists());
        assert!(root.join("open/call-d.log").exists());
        assert!(root.join("s2/notes.txt").exists());
        assert!(root.join("s2/deep/call-e.log").exists());
        assert!(outside.exists());
        assert!(root.join("s3/link.log").symlink_metadata().is_ok());
        assert!(root.join("home").symlink_metadata().is_ok());
    }
}
