//! The memory of the agent's sessions: the task that drops idle
//! sessions' histories, free pages given back to the system, and the
//! history a request would carry (the budget for histories in memory is
//! `session/residency.rs`).

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use dsh_protocol::model::ChatMessage;
use dsh_protocol::SessionId;

use super::Agent;
use crate::error::AgentError;
use crate::session::Session;

/// How often turns give free memory back to the system, at most.
const GIVE_BACK_EVERY: Duration = Duration::from_secs(20);

impl Agent {
    /// A session is live here from now on; the first one starts the task
    /// that evicts idle sessions' histories (`[session] idle_evict_s`).
    pub(super) fn track(&self, session: &Arc<Session>) {
        self.sessions().insert(session.id.clone(), session.clone());
        let Some(idle) = self.config.idle_evict else {
            return;
        };
        if self
            .sweeping
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let (agent, stop) = (self.me.clone(), self.shutdown.clone());
        let every = (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(15));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let Some(agent) = agent.upgrade() else {
                    return;
                };
                agent.evict_idle(idle).await;
            }
        });
    }

    /// Drops from memory the model history of every live session idle for
    /// `idle` or longer (no turn, no running background job, nothing
    /// recorded): its next reader (the next request) folds it again from
    /// the log. Kept background subagents (below the sessions, not in
    /// their table) are swept too. The
    /// eviction task calls it every `idle / 4` (1–15 s); tests call it to
    /// force an eviction. How many histories were dropped.
    pub async fn evict_idle(&self, idle: Duration) -> usize {
        let mut sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        let mut below = 0;
        while below < sessions.len() {
            let kept = sessions[below].kept_agents();
            sessions.extend(kept);
            below += 1;
        }
        let mut evicted = 0;
        for session in &sessions {
            evicted += usize::from(session.evict_idle_history(idle).await);
        }
        if evicted > 0 {
            tracing::debug!(evicted, "idle sessions' histories evicted");
            self.give_back_memory(true);
        }
        evicted
    }

    /// Gives the allocator's free pages back to the system, on a blocking
    /// thread: when a session closed, and at most every
    /// [`GIVE_BACK_EVERY`] after turns (what a turn frees — request
    /// bodies, tool output — would otherwise stay in the process).
    pub(super) fn give_back_memory(&self, now: bool) {
        let mut last = self
            .gave_back
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !now && last.elapsed() < GIVE_BACK_EVERY {
            return;
        }
        *last = Instant::now();
        drop(last);
        tokio::task::spawn_blocking(dsh_process::give_back_free_memory);
    }

    /// The model history a new request would carry (for tests and tools;
    /// an evicted one is folded again from the log first).
    ///
    /// # Errors
    /// The session is not open, or its log cannot be read.
    pub async fn history(&self, id: &SessionId) -> Result<Vec<ChatMessage>, AgentError> {
        self.session(id)?.history().await
    }
}
