//! The session index: what `session/list` shows of every log (cwd, roots,
//! title), keyed by the log's size and modification time, so a listing
//! reads the directory and one `stat` per log and opens only the logs
//! written since the index was saved. It is a cache: kept in memory after
//! the first listing, saved next to the logs (`index.v1.json`, 0600,
//! replaced atomically; processes that race each write a whole, valid
//! index), rebuilt from the logs when missing, stale or unreadable. The
//! logs stay the truth.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_protocol::log::{Event, EventData, SessionHeader};
use serde::{Deserialize, Serialize};

use super::SessionSummary;

/// The index's file name in the sessions directory.
pub(super) const FILE: &str = "index.v1.json";

/// How far into a log its title is looked for (it is written with the
/// first prompt, near the top).
const TITLE_WINDOW: u64 = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    /// The log's size and modification time (ns) when summarized.
    len: u64,
    mtime_ns: u128,
    cwd: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    roots: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
}

#[derive(Serialize, Deserialize, Default)]
struct Saved {
    sessions: HashMap<String, Entry>,
}

#[derive(Debug)]
pub(super) struct Index {
    path: PathBuf,
    /// Loaded on the first listing.
    entries: Mutex<Option<HashMap<String, Entry>>>,
}

impl Index {
    pub(super) fn new(path: PathBuf) -> Index {
        Index {
            path,
            entries: Mutex::new(None),
        }
    }

    /// Every log in `dir`, summarized, newest first (ties by id).
    pub(super) fn list(&self, dir: &Path) -> Vec<SessionSummary> {
        let Ok(listing) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut guard = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let entries = guard.get_or_insert_with(|| self.load());
        let mut seen = HashMap::with_capacity(entries.len());
        let mut changed = false;
        for file in listing.filter_map(Result::ok) {
            let name = file.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            let Ok(meta) = file.metadata() else { continue };
            let Ok(modified) = meta.modified() else {
                continue;
            };
            let mtime_ns = modified
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let fresh = entries
                .get(id)
                .is_some_and(|entry| entry.len == meta.len() && entry.mtime_ns == mtime_ns);
            if !fresh {
                match summarize(&file.path()) {
                    Ok((header, title)) => {
                        entries.insert(
                            id.to_owned(),
                            Entry {
                                len: meta.len(),
                                mtime_ns,
                                cwd: header.cwd,
                                roots: header.roots,
                                title,
                            },
                        );
                        changed = true;
                    }
                    Err(err) => {
                        tracing::warn!(path = %file.path().display(), %err, "skipping unreadable session log");
                        changed |= entries.remove(id).is_some();
                        continue;
                    }
                }
            }
            seen.insert(id.to_owned(), ());
        }
        let before = entries.len();
        entries.retain(|id, _| seen.contains_key(id));
        changed |= entries.len() != before;
        if changed {
            self.save(entries);
        }
        let mut summaries: Vec<SessionSummary> = entries
            .iter()
            .map(|(id, entry)| SessionSummary {
                id: id.clone(),
                cwd: entry.cwd.clone(),
                roots: entry.roots.clone(),
                title: entry.title.clone(),
                updated_at: UNIX_EPOCH
                    + Duration::from_nanos(u64::try_from(entry.mtime_ns).unwrap_or(u64::MAX)),
            })
            .collect();
        summaries.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        summaries
    }

    fn load(&self) -> HashMap<String, Entry> {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return HashMap::new();
        };
        match serde_json::from_slice::<Saved>(&bytes) {
            Ok(saved) => saved.sessions,
            Err(err) => {
                tracing::warn!(path = %self.path.display(), %err, "session index unreadable; rebuilding it");
                HashMap::new()
            }
        }
    }

    fn save(&self, entries: &HashMap<String, Entry>) {
        #[derive(Serialize)]
        struct SavedRef<'a> {
            sessions: &'a HashMap<String, Entry>,
        }
        let result = (|| -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt;
            let bytes = serde_json::to_vec(&SavedRef { sessions: entries })?;
            let temp = self.path.with_extension(format!(
                "tmp.{}.{}",
                std::process::id(),
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_nanos()
            ));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            let written = file.write_all(&bytes).and_then(|()| {
                drop(file);
                std::fs::rename(&temp, &self.path)
            });
            if written.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            written
        })();
        if let Err(err) = result {
            tracing::debug!(path = %self.path.display(), %err, "cannot save the session index");
        }
    }
}

/// Reads a log's header and the title, a line at a time within its first
/// 64 KiB: the last `session/title` of the first turn (the first prompt's,
/// then the model's when it wrote one), stopping at that turn's end.
fn summarize(path: &Path) -> Result<(SessionHeader, Option<String>), String> {
    let file = std::fs::File::open(path).map_err(|err| err.to_string())?;
    let mut reader = BufReader::with_capacity(8 * 1024, file.take(TITLE_WINDOW));
    let mut line = Vec::new();
    reader
        .read_until(b'\n', &mut line)
        .map_err(|err| err.to_string())?;
    let header: SessionHeader =
        serde_json::from_slice(&line).map_err(|err| format!("bad header: {err}"))?;
    let mut found = None;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return Ok((header, found)),
            Ok(_) => {}
        }
        if found.is_some() && memfind(&line, b"\"turn/end\"") {
            return Ok((header, found));
        }
        if !memfind(&line, b"\"session/title\"") {
            continue;
        }
        if let Ok(Event {
            data: EventData::Title { title, .. },
            ..
        }) = serde_json::from_slice::<Event>(&line)
        {
            found = Some(title);
        }
    }
}

fn memfind(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &Path, id: &str, title: Option<&str>) {
        let header = SessionHeader::new(
            dsh_protocol::SessionId::new(id),
            1,
            format!("/work/{id}"),
            Vec::new(),
        );
        let mut text = serde_json::to_string(&header).unwrap() + "\n";
        if let Some(title) = title {
            let event = Event {
                seq: 1,
                time: 1,
                ignorable: false,
                data: EventData::Title {
                    title: title.to_owned(),
                    usage: None,
                },
            };
            text += &(serde_json::to_string(&event).unwrap() + "\n");
        }
        std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
    }

    #[test]
    fn the_index_follows_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        log(dir.path(), "a", Some("first"));
        log(dir.path(), "b", None);
        let index = Index::new(dir.path().join(FILE));
        let titles = |index: &Index| {
            let mut listed: Vec<(String, Option<String>)> = index
                .list(dir.path())
                .into_iter()
                .map(|s| (s.id, s.title))
                .collect();
            listed.sort();
            listed
        };
        assert_eq!(
            titles(&index),
            [("a".into(), Some("first".into())), ("b".into(), None)]
        );
        // Saved: a new process reads the index, not the logs.
        let saved: Saved =
            serde_json::from_slice(&std::fs::read(dir.path().join(FILE)).unwrap()).unwrap();
        assert_eq!(saved.sessions["a"].cwd, "/work/a");
        // A log written since, a new log and a deleted log.
        log(dir.path(), "b", Some("now titled"));
        log(dir.path(), "c", None);
        std::fs::remove_file(dir.path().join("a.jsonl")).unwrap();
        let fresh = Index::new(dir.path().join(FILE));
        let expected = [("b".into(), Some("now titled".into())), ("c".into(), None)];
        assert_eq!(titles(&fresh), expected);
        assert_eq!(titles(&index), expected);
        // A corrupt index is rebuilt.
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert_eq!(titles(&Index::new(dir.path().join(FILE))), expected);
    }
}
