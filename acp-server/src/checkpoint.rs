//! Checkpoints: before a turn first changes a file, dsh keeps what the
//! file was, so `/undo` can put it back.
//!
//! - `write` and `edit` name their file: its content is copied before the
//!   tool runs (content-addressed, SHA-256, under
//!   `$DSH_HOME/checkpoints/<session>/`, 0600 in a 0700 directory).
//! - A command can change anything: the workspace is scanned (size and
//!   mtime of every file `.gitignore` does not exclude, at most
//!   [`MAX_SCAN_FILES`]) before and after it. Files it created are removed
//!   by an undo; files it changed or deleted that dsh had not copied are
//!   listed as not restorable (their earlier content was never read).
//! - At the turn's end the `checkpoint` event records every changed file
//!   with its hashes before and after.
//!
//! Caps: files over [`MAX_FILE`], or past [`MAX_TURN`] kept in one turn,
//! are recorded but not kept; `/undo` then says so and changes nothing.
//! A session's store has a budget (`[checkpoints] max_bytes_per_session`,
//! [`store`]): the oldest turns' contents are evicted to keep within it,
//! and `/undo` of an evicted turn says so and changes nothing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use dsh_protocol::checkpoint::CheckpointFile;
use dsh_protocol::log::EventData;
use sha2::Digest;

mod store;

pub use store::{Index, Store, DEFAULT_MAX_BYTES};

/// The largest file whose earlier content is kept.
pub const MAX_FILE: u64 = 8 * 1024 * 1024;
/// The most a turn keeps, in all.
pub const MAX_TURN: u64 = 64 * 1024 * 1024;
/// The most files a scan looks at.
pub const MAX_SCAN_FILES: usize = 50_000;
/// Before a turn's first command, files up to this size are read and held
/// (in memory, for the turn), in case a command changes them...
pub const PRECOPY_FILE: u64 = 1024 * 1024;
/// ... up to this much in all. Only what a command then changes is stored.
pub const PRECOPY_TOTAL: u64 = 32 * 1024 * 1024;

/// `[checkpoints]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSettings {
    /// What a session's checkpoint store may hold, in bytes; past it, the
    /// oldest turns' kept contents are evicted first.
    #[serde(default = "max_bytes_per_session")]
    pub max_bytes_per_session: u64,
}

fn max_bytes_per_session() -> u64 {
    DEFAULT_MAX_BYTES
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        CheckpointSettings {
            max_bytes_per_session: max_bytes_per_session(),
        }
    }
}

/// A file as a checkpoint sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// It does not exist.
    Missing,
    /// Its content.
    Content(Vec<u8>),
    /// Not kept: why.
    Unkept(String),
}

impl Snapshot {
    /// Looks at `path` on disk (blocking): a regular file up to
    /// [`MAX_FILE`] is read (opened non-blocking: a FIFO in its place
    /// never hangs the turn); anything else is not kept. A symbolic link
    /// anywhere on the way is never followed: the file is not kept, and an
    /// undo refuses it ([`crate::beneath`]).
    pub fn on_disk(path: &Path) -> Snapshot {
        match crate::beneath::metadata(path) {
            Ok(None) => return Snapshot::Missing,
            Err(crate::beneath::FsError::Symlink(_)) => {
                return Snapshot::Unkept(
                    "a symbolic link is now on its path (dsh does not follow it)".to_owned(),
                )
            }
            Err(err) => return Snapshot::Unkept(format!("it could not be read ({err})")),
            Ok(Some(meta)) if !meta.is_file() => {
                return Snapshot::Unkept("it is not a regular file".to_owned())
            }
            Ok(Some(meta)) if meta.len() > MAX_FILE => {
                return Snapshot::Unkept(format!(
                    "it is {} bytes, over the {} MiB a checkpoint keeps of a file",
                    meta.len(),
                    MAX_FILE >> 20
                ))
            }
            Ok(Some(_)) => {}
        }
        let read = crate::beneath::open_read(path)
            .map_err(|err| err.to_string())
            .and_then(|file| {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(file, MAX_FILE + 1),
                    &mut bytes,
                )
                .map_err(|err| err.to_string())?;
                Ok(bytes)
            });
        match read {
            Ok(bytes) if bytes.len() as u64 > MAX_FILE => {
                Snapshot::Unkept("it grew past what a checkpoint keeps".to_owned())
            }
            Ok(bytes) => Snapshot::Content(bytes),
            Err(err) => Snapshot::Unkept(err),
        }
    }

    /// Its hash; `None` when missing or not kept.
    pub fn hash(&self) -> Option<String> {
        match self {
            Snapshot::Content(bytes) => Some(hash(bytes)),
            Snapshot::Missing | Snapshot::Unkept(_) => None,
        }
    }
}

/// SHA-256, hex.
pub fn hash(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a scan saw of a file.
type Seen = (u64, Option<SystemTime>);

/// The workspace's files at one moment.
#[derive(Debug, Default)]
pub struct Scan {
    files: HashMap<PathBuf, Seen>,
    /// Files past [`MAX_SCAN_FILES`] were not looked at.
    pub truncated: bool,
}

impl Scan {
    /// Walks `roots` (honouring `.gitignore`; `.git` skipped).
    pub fn of(roots: &[PathBuf]) -> Scan {
        let mut scan = Scan::default();
        for root in roots {
            let walk = ignore::WalkBuilder::new(root)
                .hidden(false)
                .require_git(false)
                .filter_entry(|entry| entry.file_name() != ".git")
                .build();
            for entry in walk.flatten() {
                if scan.files.len() >= MAX_SCAN_FILES {
                    scan.truncated = true;
                    return scan;
                }
                if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                    continue;
                }
                if let Ok(meta) = entry.metadata() {
                    scan.files
                        .insert(entry.into_path(), (meta.len(), meta.modified().ok()));
                }
            }
        }
        scan
    }

    /// How many files it saw.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether it saw none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// What a turn changed so far.
#[derive(Debug, Default)]
pub struct TurnCapture {
    files: BTreeMap<PathBuf, Captured>,
    kept: u64,
    /// Files read before the turn's first command, in case a command
    /// changes them: path → content.
    candidates: HashMap<PathBuf, Vec<u8>>,
    precopied: bool,
    /// What the store holds, loaded at the turn's first keep.
    index: Option<Index>,
}

#[derive(Debug, Clone)]
struct Captured {
    before: Option<String>,
    lost: Option<String>,
}

impl TurnCapture {
    /// Keeps `bytes` in `store`, within its budget (older turns' contents
    /// are evicted first).
    fn put(&mut self, store: &Store, bytes: &[u8]) -> std::io::Result<String> {
        let index = self.index.get_or_insert_with(|| store.load());
        store.put_in(index, bytes)
    }

    /// Whether `path`'s earlier content is still to be kept this turn.
    pub fn wants(&self, path: &Path) -> bool {
        !self.files.contains_key(path)
    }

    /// Before a tool writes `path` (blocking): keeps `now`, what the file
    /// is now, once per turn.
    pub fn keep(&mut self, store: &Store, path: &Path, now: &Snapshot) {
        if !self.wants(path) {
            return;
        }
        let captured = match now {
            Snapshot::Missing => Captured {
                before: None,
                lost: None,
            },
            Snapshot::Unkept(why) => Captured {
                before: None,
                lost: Some(why.clone()),
            },
            Snapshot::Content(bytes) => {
                let size = bytes.len() as u64;
                if size > MAX_FILE || self.kept + size > MAX_TURN {
                    Captured {
                        before: Some(hash(bytes)),
                        lost: Some(format!(
                            "it was {size} bytes, over what a checkpoint keeps ({} MiB a file, {} MiB a turn)",
                            MAX_FILE >> 20,
                            MAX_TURN >> 20
                        )),
                    }
                } else {
                    match self.put(store, bytes) {
                        Ok(hash) => {
                            self.kept += size;
                            Captured {
                                before: Some(hash),
                                lost: None,
                            }
                        }
                        Err(err) => Captured {
                            before: Some(hash(bytes)),
                            lost: Some(format!("its earlier content could not be kept ({err})")),
                        },
                    }
                }
            }
        };
        self.files.insert(path.to_path_buf(), captured);
    }

    /// Whether the turn has not yet kept the workspace's small files for
    /// a command.
    pub fn wants_precopy(&self) -> bool {
        !self.precopied
    }

    /// Before the turn's first command (blocking): reads the small files
    /// `scan` saw (each up to [`PRECOPY_FILE`], [`PRECOPY_TOTAL`] in all),
    /// so a file a command changes or deletes can be put back; only those
    /// are stored ([`Self::after_command`]).
    pub fn precopy(&mut self, scan: &Scan) {
        self.precopied = true;
        let mut total = 0;
        let mut paths: Vec<(&PathBuf, &Seen)> = scan.files.iter().collect();
        paths.sort();
        for (path, (size, _)) in paths {
            if self.files.contains_key(path) || *size > PRECOPY_FILE || total + size > PRECOPY_TOTAL
            {
                continue;
            }
            if let Snapshot::Content(bytes) = Snapshot::on_disk(path) {
                total += bytes.len() as u64;
                self.candidates.insert(path.clone(), bytes);
            }
        }
    }

    /// After a command: what it created, changed or removed, between two
    /// scans (the earlier contents of what it changed are stored now).
    pub fn after_command(&mut self, store: &Store, before: &Scan, after: &Scan) {
        for (path, seen) in &after.files {
            if self.files.contains_key(path) {
                continue;
            }
            match before.files.get(path) {
                None if !before.truncated => {
                    self.files.insert(
                        path.clone(),
                        Captured {
                            before: None,
                            lost: None,
                        },
                    );
                }
                Some(old) if old != seen => self.changed_by_command(store, path),
                _ => {}
            }
        }
        for path in before.files.keys() {
            if !after.files.contains_key(path) && !after.truncated {
                self.changed_by_command(store, path);
            }
        }
    }

    fn changed_by_command(&mut self, store: &Store, path: &Path) {
        if self.files.contains_key(path) {
            return;
        }
        let candidate = self.candidates.remove(path);
        let captured = match candidate.map(|bytes| self.put(store, &bytes)) {
            Some(Ok(hash)) => Captured {
                before: Some(hash),
                lost: None,
            },
            Some(Err(err)) => Captured {
                before: None,
                lost: Some(format!("its earlier content could not be kept ({err})")),
            },
            None => Captured {
                before: None,
                lost: Some(
                    "a command changed it, and its earlier content was not kept (it was over what a checkpoint reads before commands)"
                        .to_owned(),
                ),
            },
        };
        self.files.insert(path.to_path_buf(), captured);
    }

    /// The files, for the turn's end: each with its hash before and why
    /// it cannot be put back (if so).
    pub fn take(self) -> Vec<(PathBuf, Option<String>, Option<String>)> {
        self.files
            .into_iter()
            .map(|(path, captured)| (path, captured.before, captured.lost))
            .collect()
    }
}

/// The checkpoint entry of a file whose content is now `after` (its
/// hash); `None` when the turn left it as it was.
pub fn entry(
    path: &Path,
    before: Option<String>,
    lost: Option<String>,
    after: Option<String>,
) -> Option<CheckpointFile> {
    if lost.is_none() && after == before {
        return None;
    }
    Some(CheckpointFile {
        path: path.display().to_string(),
        before,
        after,
        lost,
    })
}

/// The `checkpoint` event, `None` without entries.
pub fn event(turn: u64, files: Vec<CheckpointFile>) -> Option<EventData> {
    (!files.is_empty()).then_some(EventData::Checkpoint { turn, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_keeps_what_it_overwrote_and_notes_what_commands_did() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(work.path()).unwrap();
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        std::fs::write(root.join("b.txt"), "bee\n").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        let store = Store::new(home.path(), "s1");
        let mut capture = TurnCapture::default();
        let keep = |capture: &mut TurnCapture, name: &str| {
            let path = root.join(name);
            capture.keep(&store, &path, &Snapshot::on_disk(&path));
        };
        keep(&mut capture, "a.txt");
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        keep(&mut capture, "a.txt"); // kept once
        keep(&mut capture, "new.txt");
        std::fs::write(root.join("new.txt"), "n\n").unwrap();
        let before = Scan::of(std::slice::from_ref(&root));
        assert!(capture.wants_precopy());
        capture.precopy(&before);
        std::fs::write(root.join("made.txt"), "m\n").unwrap();
        std::fs::create_dir(root.join("target")).unwrap();
        std::fs::write(root.join("target/out.o"), "o").unwrap();
        std::fs::write(root.join("b.txt"), "changed by a command, longer\n").unwrap();
        let after = Scan::of(std::slice::from_ref(&root));
        capture.after_command(&store, &before, &after);
        let files: Vec<CheckpointFile> = capture
            .take()
            .into_iter()
            .filter_map(|(path, before, lost)| {
                entry(&path, before, lost, Snapshot::on_disk(&path).hash())
            })
            .collect();
        let Some(EventData::Checkpoint { turn, files }) = event(3, files) else {
            panic!("a checkpoint")
        };
        assert_eq!(turn, 3);
        let by_name: HashMap<String, CheckpointFile> = files
            .into_iter()
            .map(|f| {
                (
                    Path::new(&f.path)
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    f,
                )
            })
            .collect();
        let mut names: Vec<&String> = by_name.keys().collect();
        names.sort();
        assert_eq!(
            names,
            ["a.txt", "b.txt", "made.txt", "new.txt"],
            "ignored files are not scanned"
        );
        let a = &by_name["a.txt"];
        assert_eq!(store.get(a.before.as_deref().unwrap()).unwrap(), b"one\n");
        assert_eq!(a.after.as_deref(), Some(hash(b"two\n").as_str()));
        assert!(a.restorable());
        assert_eq!(by_name["new.txt"].before, None);
        assert_eq!(by_name["made.txt"].before, None);
        assert!(by_name["made.txt"].restorable());
        let b = &by_name["b.txt"];
        assert!(b.restorable(), "read before the command");
        assert_eq!(store.get(b.before.as_deref().unwrap()).unwrap(), b"bee\n");
        let kept = home
            .path()
            .join("checkpoints/s1")
            .join(a.before.as_deref().unwrap());
        if cfg!(unix) {
            assert_eq!(
                crate::private::mode_of(&std::fs::metadata(kept).unwrap()),
                Some(0o600)
            );
        }
    }
}

#[cfg(test)]
mod precopy_tests {
    use super::*;

    #[test]
    fn only_what_a_command_changed_is_stored() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(work.path()).unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(root.join(name), name).unwrap();
        }
        let store = Store::new(home.path(), "s");
        let mut capture = TurnCapture::default();
        let before = Scan::of(std::slice::from_ref(&root));
        capture.precopy(&before);
        std::fs::remove_file(root.join("b")).unwrap();
        let after = Scan::of(std::slice::from_ref(&root));
        capture.after_command(&store, &before, &after);
        let stored = std::fs::read_dir(home.path().join("checkpoints/s"))
            .unwrap()
            .count();
        assert_eq!(stored, 1, "b only");
        assert!(!capture.wants_precopy());
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn a_file_too_large_to_keep_is_recorded_as_lost_with_the_reason() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let big = work.path().join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE + 1)
            .unwrap();
        let store = Store::new(home.path(), "s");
        let mut capture = TurnCapture::default();
        capture.keep(&store, &big, &Snapshot::on_disk(&big));
        let (_, before, lost) = capture.take().remove(0);
        assert_eq!(before, None);
        assert!(lost.unwrap().contains("over the 8 MiB"));
        assert!(
            !home.path().join("checkpoints/s").exists(),
            "nothing stored"
        );
    }
}
