//! `session/list`: stored sessions newest first, filtered by cwd, paged
//! with an opaque cursor (`<updated ms>:<id>` of the last entry shown);
//! the subagents' logs it leaves out, deleted with their parent. Each
//! listed session shows its unfinished goal ([`latest_goal`]).

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use dsh_protocol::log::{EventData, Goal, GoalChangeKind, GoalPhase};

use crate::error::AgentError;
use crate::store::{SessionStore, SessionSummary};

/// A listed session.
#[derive(Debug, Clone)]
pub struct SessionListing {
    /// Id.
    pub id: String,
    /// Working directory.
    pub cwd: String,
    /// Extra roots.
    pub roots: Vec<String>,
    /// Title.
    pub title: Option<String>,
    /// RFC 3339 time of the last write.
    pub updated_at: String,
    /// Its goal, unless there is none or it is complete.
    pub goal: Option<Goal>,
}

/// A page of sessions.
#[derive(Debug, Clone)]
pub struct SessionPage {
    /// Sessions, newest first.
    pub sessions: Vec<SessionListing>,
    /// Cursor for the next page.
    pub next_cursor: Option<String>,
}

fn millis(summary: &SessionSummary) -> u128 {
    summary
        .updated_at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// One page of the store's sessions (blocking: it reads the store).
pub(super) fn page(
    store: &SessionStore,
    cwd: Option<&Path>,
    cursor: Option<&str>,
    page_size: usize,
    subagents: bool,
) -> Result<SessionPage, AgentError> {
    let wanted = cwd.map(|cwd| {
        let canonical = dunce::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        (
            cwd.to_string_lossy().into_owned(),
            canonical.to_string_lossy().into_owned(),
        )
    });
    let after = cursor
        .map(|cursor| {
            cursor
                .split_once(':')
                .and_then(|(after, id)| Some((after.parse::<u128>().ok()?, id)))
                .ok_or_else(|| {
                    AgentError::InvalidParams(format!("invalid session/list cursor {cursor:?}"))
                })
        })
        .transpose()?;
    let keep = |cwd: &str, parent: Option<&str>| {
        (subagents || parent.is_none())
            && wanted
                .as_ref()
                .is_none_or(|(raw, canonical)| cwd == raw || cwd == canonical)
    };
    let (page, more) = store.page(&keep, after, page_size);
    let next_cursor = more
        .then(|| {
            page.last()
                .map(|last| format!("{}:{}", millis(last), last.id))
        })
        .flatten();
    let sessions = page
        .iter()
        .map(|summary| SessionListing {
            id: summary.id.to_string(),
            cwd: summary.cwd.to_string(),
            roots: summary.roots.to_vec(),
            title: summary.title.as_deref().map(str::to_owned),
            updated_at: humantime::format_rfc3339_millis(summary.updated_at).to_string(),
            goal: store
                .path(&summary.id)
                .ok()
                .and_then(|path| latest_goal(&path))
                .filter(|goal| goal.phase != GoalPhase::Complete),
        })
        .collect();
    Ok(SessionPage {
        sessions,
        next_cursor,
    })
}

/// How far each log was read for its goal, and the goal found: logs only
/// grow, so a listing reads only what was written since the last one.
static GOALS: Mutex<Option<HashMap<PathBuf, ReadFor>>> = Mutex::new(None);

/// How far a log was read, and the goal it ended with there.
type ReadFor = (u64, Option<Goal>);

/// The goal a log ends with (its last `goal/change`; none after a clear),
/// read from where the last call left off (blocking).
pub(super) fn latest_goal(path: &Path) -> Option<Goal> {
    let len = std::fs::metadata(path).ok()?.len();
    let mut goals = GOALS.lock().unwrap_or_else(|p| p.into_inner());
    let known = goals.get_or_insert_with(HashMap::new);
    let (mut read, mut goal) = known.get(path).cloned().unwrap_or((0, None));
    if read > len {
        (read, goal) = (0, None);
    }
    if read < len {
        let mut file = std::fs::File::open(path).ok()?;
        file.seek(std::io::SeekFrom::Start(read)).ok()?;
        let mut bytes = Vec::new();
        file.take(len - read).read_to_end(&mut bytes).ok()?;
        // Whole lines only: a line being written is read next time.
        let whole = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at + 1);
        for line in bytes[..whole].split(|b| *b == b'\n') {
            if !line.windows(13).any(|w| w == b"\"goal/change\"") {
                continue;
            }
            let Ok(event) = serde_json::from_slice::<dsh_protocol::log::Event>(line) else {
                continue;
            };
            if let EventData::GoalChange { change, goal: now } = event.data {
                goal = (change != GoalChangeKind::Cleared).then_some(now);
            }
        }
        read += whole as u64;
        known.insert(path.to_path_buf(), (read, goal.clone()));
    }
    goal
}

/// Deletes the logs and checkpoints of `parent`'s subagents, and theirs
/// (blocking): they hold its work, and no editor lists them.
pub(super) fn delete_subagents(store: &SessionStore, home: &Path, parent: String) {
    let mut parents = vec![parent];
    while let Some(parent) = parents.pop() {
        for child in store.list() {
            if child.parent.as_deref() != Some(parent.as_str()) {
                continue;
            }
            if let Err(error) = store.delete(&child.id) {
                tracing::warn!(session = %child.id, %error, "a subagent's log was not deleted");
                continue;
            }
            crate::checkpoint::Store::new(home, &child.id).remove();
            parents.push(child.id.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::log::SessionHeader;
    use dsh_protocol::SessionId;

    /// Sessions written in the same millisecond whose nanoseconds run
    /// against their ids: paging one at a time shows each once, in the
    /// cursor's order (newer millisecond, then id).
    #[test]
    fn pages_walk_every_session_once_in_the_cursors_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path().to_path_buf());
        let at =
            |secs: u64, nanos: u32| std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
        // (id, seconds, nanoseconds): a, b, c share a millisecond with
        // later nanoseconds for earlier ids; d is a millisecond older.
        let logs = [
            ("a", 1_000, 5_000_100),
            ("b", 1_000, 5_000_500),
            ("c", 1_000, 5_000_900),
            ("d", 1_000, 4_999_999),
            ("e", 2_000, 0),
        ];
        for (id, secs, nanos) in logs {
            let header = SessionHeader::new(SessionId::new(id), 1, "/w".to_owned(), Vec::new());
            let path = dir.path().join(format!("{id}.jsonl"));
            std::fs::write(&path, serde_json::to_string(&header).unwrap() + "\n").unwrap();
            let times = std::fs::FileTimes::new()
                .set_accessed(at(secs, nanos))
                .set_modified(at(secs, nanos));
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_times(times)
                .unwrap();
        }
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = page(&store, None, cursor.as_deref(), 1, false).unwrap();
            seen.extend(page.sessions.iter().map(|s| s.id.clone()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
            assert!(seen.len() <= logs.len(), "{seen:?}");
        }
        assert_eq!(seen, ["e", "a", "b", "c", "d"]);
        // A page of all of them: the same order, no cursor.
        let all = page(&store, None, None, 10, false).unwrap();
        let ids: Vec<&str> = all.sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["e", "a", "b", "c", "d"]);
        assert!(all.next_cursor.is_none());
    }
}
