//! Which sessions' model histories are in memory: at most `[session]
//! max_history_bytes` of them in one process (default 32 MiB), those
//! nothing else holds dropped first, then those a request being made
//! holds, the least recently active first in each (a request ready to
//! send holds its session's spool, not its history: see
//! [`Session::spool`]). A dropped history is folded again from
//! the log when it is next read ([`Session::resident`]), mid-turn too:
//! every reader asks for it under the session's lock, so an eviction can
//! fall between two reads but never under one.
//!
//! Sessions at rest leave memory after `[session] idle_evict_s` as well
//! ([`Session::evict_idle_history`]); the budget is for those that never
//! rest — twenty sessions that keep turning would otherwise hold every
//! word of their conversations, up to their models' context windows.

use std::sync::{Arc, Mutex, Weak};

use super::{lock, Session};

/// The sessions of one process (subagents included), for the budget.
pub(crate) struct Residency {
    /// Bytes of history text allowed in memory; `None`: no limit.
    budget: Option<u64>,
    sessions: Mutex<Vec<Weak<Session>>>,
    /// Held while a history is folded again: one at a time, so sessions
    /// that all come back at once do not all hold a history being built
    /// on top of the budget. The fold holds it (not the task that waits
    /// for it, which a cancel may drop).
    rebuilding: Arc<tokio::sync::Mutex<()>>,
}

impl Residency {
    pub(crate) fn new(budget: Option<u64>) -> Arc<Residency> {
        Arc::new(Residency {
            budget,
            sessions: Mutex::default(),
            rebuilding: Arc::default(),
        })
    }

    /// The ids of the sessions of this process (loaded, not yet dropped):
    /// the session-query tools' `live` sessions.
    pub(crate) fn live(&self) -> Vec<String> {
        // Out of the lock before any is let go of.
        let sessions: Vec<Arc<Session>> = lock(&self.sessions)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        sessions
            .iter()
            .map(|session| session.id.to_string())
            .collect()
    }

    /// The turn to fold a history again (see `rebuilding`).
    pub(super) async fn rebuilding(&self) -> tokio::sync::OwnedMutexGuard<()> {
        self.rebuilding.clone().lock_owned().await
    }

    /// `session` counts from now on (until it is dropped); it is listed
    /// by [`Residency::live`] even without a budget.
    pub(super) fn enter(&self, session: &Arc<Session>) {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|session| session.strong_count() > 0);
        sessions.push(Arc::downgrade(session));
    }

    /// When the histories in memory hold more than the budget, drops the
    /// least recently active ones until they hold three quarters of it,
    /// never `keep`'s (it is about to be read). Those no request holds go
    /// first; then those a request being made still holds (their memory
    /// goes once it is ready: a request ready to send holds the spool, not
    /// the history). Each session's lock is taken on
    /// its own, never two at once. How many were dropped.
    pub(super) fn settle(&self, keep: &Session) -> usize {
        let Some(budget) = self.budget else {
            return 0;
        };
        let sessions: Vec<Arc<Session>> = lock(&self.sessions)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut total = 0u64;
        let mut others = Vec::new();
        for session in &sessions {
            let locked = session.locked();
            if locked.log.is_none() || locked.state.evicted() {
                continue;
            }
            let (bytes, shared) = locked.state.history.footprint();
            let bytes = bytes as u64;
            total += bytes;
            if !std::ptr::eq(session.as_ref(), keep) {
                others.push(((shared, locked.active_at), bytes, session));
            }
        }
        if total <= budget {
            return 0;
        }
        // Down to three quarters, so the next reads do not each drop one.
        let goal = budget / 4 * 3;
        others.sort_by_key(|(order, _, _)| *order);
        let mut dropped = 0;
        let mut held = 0;
        for ((shared, _), bytes, session) in others {
            if total <= goal {
                break;
            }
            if session.evict_history() {
                total = total.saturating_sub(bytes);
                dropped += 1;
                held += usize::from(shared);
            }
        }
        if dropped > 0 {
            tracing::debug!(
                dropped,
                held,
                total,
                budget,
                "histories over the budget dropped (held: by a request being made)"
            );
        }
        dropped
    }
}

impl Session {
    /// Where its log is (and the other sessions' logs, and their index).
    pub(crate) fn store(&self) -> &crate::store::SessionStore {
        &self.store
    }

    /// Where its requests are sent from ([`crate::model::spool`]): a
    /// request holds the spool, not the history, which can then leave
    /// memory while the request waits. The spool is made by the request
    /// that first needs it, again when the last was retired (mostly
    /// messages no request carries any longer) or let go with the history.
    pub(crate) fn spool(&self) -> Arc<crate::model::spool::SpoolSlot> {
        self.spool.clone()
    }

    /// Drops its model history from memory (under the session's lock), and
    /// its spool: a history folded again is new messages, written to a new
    /// spool (a request that holds the old one keeps it until it is sent).
    pub(super) fn let_go_of_history(&self, state: &mut super::state::SessionState) {
        state.evict_history();
        self.spool.clear();
    }
}

impl Session {
    /// A turn's ticket is given back: the session is active now, and its
    /// log was written (the search index catches up, when there is one).
    pub(super) fn turn_over(&self) {
        self.locked().active_at = std::time::Instant::now();
        self.store.search().note_written(self.id.as_str());
    }
}
