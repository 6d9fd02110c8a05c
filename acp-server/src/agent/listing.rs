//! `session/list`: stored sessions newest first, filtered by cwd, paged
//! with an opaque cursor (`<updated ms>:<id>` of the last entry shown);
//! the subagents' logs it leaves out, deleted with their parent.

use std::path::Path;
use std::time::UNIX_EPOCH;

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
        let canonical = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        (
            cwd.to_string_lossy().into_owned(),
            canonical.to_string_lossy().into_owned(),
        )
    });
    let all: Vec<SessionSummary> = store
        .list()
        .into_iter()
        .filter(|summary| subagents || summary.parent.is_none())
        .filter(|summary| {
            wanted
                .as_ref()
                .is_none_or(|(raw, canonical)| *summary.cwd == **raw || *summary.cwd == **canonical)
        })
        .collect();
    let start = match cursor {
        None => 0,
        Some(cursor) => {
            let (after, id) = cursor
                .split_once(':')
                .and_then(|(after, id)| Some((after.parse::<u128>().ok()?, id)))
                .ok_or_else(|| {
                    AgentError::InvalidParams(format!("invalid session/list cursor {cursor:?}"))
                })?;
            all.iter()
                .position(|summary| {
                    let updated = millis(summary);
                    updated < after || (updated == after && &*summary.id > id)
                })
                .unwrap_or(all.len())
        }
    };
    let page: Vec<&SessionSummary> = all[start..].iter().take(page_size).collect();
    let next_cursor = (start + page.len() < all.len())
        .then(|| {
            page.last()
                .map(|last| format!("{}:{}", millis(last), last.id))
        })
        .flatten();
    let sessions = page
        .into_iter()
        .map(|summary| SessionListing {
            id: summary.id.to_string(),
            cwd: summary.cwd.to_string(),
            roots: summary.roots.to_vec(),
            title: summary.title.as_deref().map(str::to_owned),
            updated_at: humantime::format_rfc3339_millis(summary.updated_at).to_string(),
        })
        .collect();
    Ok(SessionPage {
        sessions,
        next_cursor,
    })
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
