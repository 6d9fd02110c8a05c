//! `session/list`: stored sessions newest first, filtered by cwd, paged
//! with an opaque cursor (`<updated ms>:<id>` of the last entry shown);
//! the subagents' logs it leaves out, deleted with their parent. Each
//! listed session shows its unfinished goal ([`latest_goal`]).

use std::collections::HashMap;
use std::io::{BufRead, Read, Seek};
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
    let paths: Vec<Option<PathBuf>> = page
        .iter()
        .map(|summary| store.path(&summary.id).ok())
        .collect();
    let sessions = page
        .iter()
        .zip(&paths)
        .map(|(summary, path)| SessionListing {
            id: summary.id.to_string(),
            cwd: summary.cwd.to_string(),
            roots: summary.roots.to_vec(),
            title: summary.title.as_deref().map(str::to_owned),
            updated_at: humantime::format_rfc3339_millis(summary.updated_at).to_string(),
            goal: path
                .as_deref()
                .and_then(latest_goal)
                .filter(|goal| goal.phase != GoalPhase::Complete),
        })
        .collect();
    forget_unlisted(&paths.into_iter().flatten().collect::<Vec<_>>());
    Ok(SessionPage {
        sessions,
        next_cursor,
    })
}

/// How far each log was read for its goal, and the goal found: logs only
/// grow, so a listing reads only what was written since the last one. The
/// lock is never held while a file is read.
static GOALS: Mutex<Option<HashMap<PathBuf, ReadFor>>> = Mutex::new(None);

/// How many logs [`GOALS`] remembers beyond the page being listed: past
/// it, the logs not on that page are forgotten (deleted sessions too).
const REMEMBERED: usize = 1024;

/// The longest line read for a goal: a `goal/change` is far smaller; a
/// longer line (a tool's large result) is skipped without being held.
const LINE_CAP: usize = 256 * 1024;

/// How far a log was read, and the goal it ended with there.
type ReadFor = (u64, Option<Goal>);

fn goals() -> std::sync::MutexGuard<'static, Option<HashMap<PathBuf, ReadFor>>> {
    GOALS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Forgets the logs not in `listed` once more than [`REMEMBERED`] are
/// known.
fn forget_unlisted(listed: &[PathBuf]) {
    let mut goals = goals();
    let Some(known) = goals.as_mut() else { return };
    if known.len() > REMEMBERED {
        known.retain(|path, _| listed.contains(path));
    }
}

/// The goal a log ends with (its last `goal/change`; none after a clear),
/// read from where the last call left off (blocking).
pub(super) fn latest_goal(path: &Path) -> Option<Goal> {
    let len = std::fs::metadata(path).ok()?.len();
    let known = goals().get_or_insert_with(HashMap::new).get(path).cloned();
    let (mut read, mut goal) = known.unwrap_or((0, None));
    if read > len {
        (read, goal) = (0, None);
    }
    if read < len {
        let mut file = std::fs::File::open(path).ok()?;
        file.seek(std::io::SeekFrom::Start(read)).ok()?;
        let mut reader = std::io::BufReader::new(file.take(len - read));
        read += scan_goals(&mut reader, &mut goal).ok()?;
        goals()
            .get_or_insert_with(HashMap::new)
            .insert(path.to_path_buf(), (read, goal.clone()));
    }
    goal
}

/// Reads `reader`'s whole lines one at a time (at most [`LINE_CAP`] bytes
/// of one held; a longer line is passed over), keeping the goal of the
/// last `goal/change` in `goal`; how many bytes the whole lines took (a
/// line being written is read next time).
fn scan_goals(reader: &mut impl BufRead, goal: &mut Option<Goal>) -> std::io::Result<u64> {
    let mut whole = 0u64;
    let mut line = Vec::new();
    let mut pending = 0u64;
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(whole);
        }
        let (part, ended) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        if !too_long && line.len() + part.len() <= LINE_CAP {
            line.extend_from_slice(part);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = part.len() + usize::from(ended);
        pending += used as u64;
        reader.consume(used);
        if ended {
            if !too_long {
                goal_of(&line, goal);
            }
            whole += pending;
            pending = 0;
            too_long = false;
            line.clear();
        }
    }
}

/// A line's goal, when it is a `goal/change`.
fn goal_of(line: &[u8], goal: &mut Option<Goal>) {
    if !line.windows(13).any(|w| w == b"\"goal/change\"") {
        return;
    }
    let Ok(event) = serde_json::from_slice::<dsh_protocol::log::Event>(line) else {
        return;
    };
    if let EventData::GoalChange { change, goal: now } = event.data {
        *goal = (change != GoalChangeKind::Cleared).then_some(now);
    }
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

    /// A line longer than the cap is passed over (not held), the lines
    /// around it are read, and a line not yet ended is left for next time.
    #[test]
    fn goals_are_read_a_line_at_a_time_past_a_line_too_long() {
        let goal = |objective: &str| Goal {
            id: "goal-1".to_owned(),
            revision: 1,
            objective: objective.to_owned(),
            phase: GoalPhase::Active,
            rounds_used: 0,
            max_rounds: 3,
            consecutive_rounds: 0,
            blocked_reason: None,
        };
        let line = |objective: &str| {
            let event = dsh_protocol::log::Event {
                seq: 1,
                time: 0,
                ignorable: true,
                data: EventData::GoalChange {
                    change: GoalChangeKind::Created,
                    goal: goal(objective),
                },
            };
            serde_json::to_string(&event).unwrap() + "\n"
        };
        let long = line(&"x".repeat(LINE_CAP + 10));
        let log = format!("{}{long}{}", line("first"), line("second"));
        let torn = "{\"seq\":9,\"type\":\"goal/change\"";
        let bytes = format!("{log}{torn}");
        // A small buffer: lines span many fills.
        let mut reader = std::io::BufReader::with_capacity(64, bytes.as_bytes());
        let mut found = None;
        let whole = scan_goals(&mut reader, &mut found).unwrap();
        assert_eq!(whole, log.len() as u64);
        assert_eq!(found.map(|goal| goal.objective), Some("second".to_owned()));
        let mut found = None;
        let only_long = format!("{}{long}", line("first"));
        scan_goals(&mut only_long.as_bytes(), &mut found).unwrap();
        assert_eq!(found.map(|goal| goal.objective), Some("first".to_owned()));
    }
}
