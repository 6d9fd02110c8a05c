//! The session search index: a full-text index of every stored session's
//! events (SQLite FTS5, compiled in), derived from the logs, which stay the
//! truth. It lives beside the listing's index (`sessions/index/`, 0600),
//! is built on the first search, brought up to date before each search
//! (only the logs that changed since are read: their new lines, or the
//! whole log when it was truncated or rewritten by hand), and kept up to
//! date between searches by [`SearchIndex::note_written`] (batched, on a
//! thread of its own, never on the streaming path). A missing, corrupt or
//! older index is rebuilt from the logs; nothing loads a session from it.
//!
//! Who may see what is the caller's business ([`Scope`], [`Filter`]): the
//! session-query tools pass the calling session's workspace, `dsh sessions
//! search` the current directory's (or every workspace with `--all`).

mod db;
mod extract;
mod sync;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Where an event stands for the model: on its current context (`current`),
/// replaced by a compaction summary (`shadowed`), or never part of it
/// (`log-only`: titles, decisions, notices, job ends...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Surface {
    /// On the model's context.
    Current,
    /// Replaced by a compaction summary.
    Shadowed,
    /// Not a model-visible event.
    LogOnly,
}

impl Surface {
    /// The catalog's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Current => "current",
            Surface::Shadowed => "shadowed",
            Surface::LogOnly => "log-only",
        }
    }
}

/// Which sessions a query may return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Sessions whose working directory is one of these (as written in
    /// their headers).
    Workspaces(Vec<String>),
    /// Every stored session of this user.
    All,
}

/// A query's filters; `None` filters nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only these sessions.
    pub session_ids: Option<Vec<String>>,
    /// Sessions created at or after, epoch ms.
    pub created_from: Option<u64>,
    /// Sessions created at or before, epoch ms.
    pub created_to: Option<u64>,
    /// Only sessions whose direct parent is one of these (a subagent's
    /// parent is the session that started it; a fork's, the session it
    /// was forked from)...
    pub parents: Option<Vec<String>>,
    /// ...or that have no parent (with `parents`: `Some(vec![])` and this
    /// set keeps the top-level sessions alone; alone, it keeps them too).
    pub include_roots: bool,
    /// Leave out subagents' logs (forks stay): what a person searches.
    pub no_subagents: bool,
    /// Events at or after this seq.
    pub seq_from: Option<u64>,
    /// Events at or before this seq.
    pub seq_to: Option<u64>,
    /// Events at or after, epoch ms.
    pub time_from: Option<u64>,
    /// Events at or before, epoch ms.
    pub time_to: Option<u64>,
    /// Only these event types (`user/message`, `tool/result`...).
    pub event_types: Option<Vec<String>>,
    /// Only events on these surfaces.
    pub surfaces: Option<Vec<Surface>>,
}

/// One search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The text, literal: each word must occur (no operators, no
    /// wildcards; quotes and punctuation are just characters).
    pub text: String,
    /// Which sessions.
    pub scope: Scope,
    /// Filters.
    pub filter: Filter,
    /// One hit per session, its best (`session_search`); otherwise every
    /// matching event, best first (`session_event_search`).
    pub best_per_session: bool,
    /// At most this many hits.
    pub limit: usize,
    /// Best match first (FTS5's BM25), for a person's search; otherwise
    /// newest first: the order the index took the events in, which is
    /// the order their logs were written in (a session's newest matching
    /// event is its best; a common word costs what the first hits do). BM25
    /// weighs a word by how rare it is in the whole index — every
    /// workspace's sessions — so the order it gives would tell a search
    /// scoped to one workspace something of the others: the model's tools
    /// never ask for it.
    pub by_relevance: bool,
}

/// What the index knows of a session (from its header and title).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// Its id.
    pub id: String,
    /// Its working directory.
    pub cwd: String,
    /// Its title, when it has one.
    pub title: Option<String>,
    /// Creation time, epoch ms.
    pub created_at: u64,
    /// A subagent's log: the session that started it.
    pub subagent_of: Option<String>,
    /// A fork: the session it was forked from.
    pub forked_from: Option<String>,
}

impl SessionInfo {
    /// Its direct parent: the session that started it, or the one it was
    /// forked from.
    pub fn parent(&self) -> Option<&str> {
        self.subagent_of.as_deref().or(self.forked_from.as_deref())
    }
}

/// One matching event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// Its session.
    pub session: SessionInfo,
    /// The event's seq.
    pub seq: u64,
    /// The event's time, epoch ms.
    pub time: u64,
    /// The event's type.
    pub event_type: String,
    /// Its surface.
    pub surface: Surface,
    /// The matching text around the first match (at most
    /// [`SNIPPET_CHARS`] characters, on one line; raw: escape it where it
    /// is shown).
    pub snippet: String,
}

/// How long a snippet is, in characters.
pub const SNIPPET_CHARS: usize = 240;

/// The most hits one query returns.
pub const MAX_LIMIT: usize = 100;

/// A search that could not run.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query has no word to look for.
    #[error("the query has no word to search for")]
    EmptyQuery,
    /// The index could not be opened, built or read.
    #[error("the session index failed: {0}")]
    Index(String),
    /// Given up: its `stop` was set.
    #[error("the search was stopped")]
    Stopped,
}

/// The process's handle on the index of one sessions directory. Nothing is
/// opened until it is first used.
#[derive(Debug)]
pub struct SearchIndex {
    /// The sessions directory (the logs).
    dir: PathBuf,
    /// The index file.
    file: PathBuf,
    inner: Mutex<Option<sync::Synced>>,
    /// Sessions written since the index was last brought up to date by
    /// [`Self::note_written`]'s thread, and whether that thread runs.
    pending: Mutex<(Vec<String>, bool)>,
}

/// The index file, in the sessions directory's `index/` (beside the
/// listing's).
pub const FILE: &str = "index/search.v1.sqlite";

impl SearchIndex {
    /// The process's index of the logs in `dir`: every store of the same
    /// directory shares one (one connection, one thread catching up).
    pub fn shared(dir: &Path) -> Arc<SearchIndex> {
        static SHARED: Mutex<Vec<(PathBuf, std::sync::Weak<SearchIndex>)>> = Mutex::new(Vec::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        shared.retain(|(_, index)| index.strong_count() > 0);
        if let Some(index) = shared
            .iter()
            .find(|(known, _)| known == dir)
            .and_then(|(_, index)| index.upgrade())
        {
            return index;
        }
        let index = SearchIndex::new(dir);
        shared.push((dir.to_path_buf(), Arc::downgrade(&index)));
        index
    }

    /// An index of the logs in `dir` of its own (see [`Self::shared`]).
    pub fn new(dir: &Path) -> Arc<SearchIndex> {
        Arc::new(SearchIndex {
            dir: dir.to_path_buf(),
            file: dir.join(FILE),
            inner: Mutex::new(None),
            pending: Mutex::new((Vec::new(), false)),
        })
    }

    /// The index file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Runs `query` after bringing the index up to date with the logs
    /// (building it when missing). Blocking: call it off the runtime's
    /// threads.
    ///
    /// # Errors
    /// [`SearchError`].
    pub fn search(&self, query: &Query) -> Result<Vec<Hit>, SearchError> {
        self.search_until(query, &AtomicBool::new(false))
    }

    /// [`Self::search`], given up soon after `stop` is set (a cancelled
    /// turn, a deadline): [`SearchError::Stopped`]. What was read by then
    /// stays in the index.
    ///
    /// # Errors
    /// [`SearchError`].
    pub fn search_until(&self, query: &Query, stop: &AtomicBool) -> Result<Vec<Hit>, SearchError> {
        if extract::words(&query.text).is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        self.with(|synced| {
            synced.catch_up_all(stop)?;
            synced.search(query, stop)
        })
    }

    /// Every indexed session of `scope` (for lineage), after bringing the
    /// index up to date; given up soon after `stop` is set. Blocking.
    ///
    /// # Errors
    /// [`SearchError`].
    pub fn sessions_until(
        &self,
        scope: &Scope,
        stop: &AtomicBool,
    ) -> Result<Vec<SessionInfo>, SearchError> {
        self.with(|synced| {
            synced.catch_up_all(stop)?;
            synced.sessions(scope)
        })
    }

    /// Removes a deleted session from the index at once (when there is an
    /// index). Blocking.
    pub fn forget(&self, id: &str) {
        if !self.file.exists() {
            return;
        }
        if let Err(err) = self.with(|synced| synced.forget(id)) {
            tracing::warn!(%err, session = id, "could not remove a session from the search index");
        }
    }

    /// Says that a session's log was written (a turn ended): when there is
    /// an index, a thread of its own brings it up to date, for every
    /// session noted meanwhile at once. Never blocks.
    pub fn note_written(self: &Arc<Self>, id: &str) {
        if !self.file.exists() {
            return;
        }
        let start = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if !pending.0.iter().any(|known| known == id) {
                pending.0.push(id.to_owned());
            }
            !std::mem::replace(&mut pending.1, true)
        };
        if !start {
            return;
        }
        let index = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("dsh-search-index".to_owned())
            .spawn(move || index.drain());
        if let Err(err) = spawned {
            tracing::warn!(%err, "could not start the search index's thread");
            self.pending.lock().unwrap_or_else(|e| e.into_inner()).1 = false;
        }
    }

    /// The thread of [`Self::note_written`].
    fn drain(&self) {
        loop {
            // Batch: what is written within this pause goes in one
            // transaction.
            std::thread::sleep(std::time::Duration::from_millis(200));
            let ids = {
                let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                if pending.0.is_empty() {
                    pending.1 = false;
                    return;
                }
                std::mem::take(&mut pending.0)
            };
            let never = AtomicBool::new(false);
            if let Err(err) = self.with(|synced| synced.catch_up(&ids, &never)) {
                tracing::warn!(%err, "could not update the search index");
            }
        }
    }

    /// Runs `work` on the open index (opened, checked, or built, on first
    /// use). An index found damaged is removed and built again from the
    /// logs, once.
    fn with<T>(
        &self,
        work: impl Fn(&mut sync::Synced) -> Result<T, sync::Failure>,
    ) -> Result<T, SearchError> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // The file was removed (or replaced) under the open connection:
        // built anew, not written to a file no one will read.
        if inner
            .as_ref()
            .is_some_and(|synced| !synced.is_at(&self.file))
        {
            *inner = None;
        }
        for attempt in 0..2 {
            let done = match inner.as_mut() {
                Some(synced) => work(synced),
                None => sync::Synced::open(&self.dir, &self.file).and_then(|mut synced| {
                    let done = work(&mut synced);
                    *inner = Some(synced);
                    done
                }),
            };
            match done {
                Ok(value) => return Ok(value),
                Err(sync::Failure::Corrupt(message)) if attempt == 0 => {
                    tracing::warn!(error = %message, "the search index is damaged: built anew");
                    *inner = None;
                    db::remove(&self.file);
                }
                Err(failure) => return Err(failure.into()),
            }
        }
        unreachable!("the second attempt returns")
    }
}

#[cfg(test)]
mod tests;
