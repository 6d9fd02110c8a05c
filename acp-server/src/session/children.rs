//! A session's children: every subagent while it lives (they follow the
//! session's mode and web switch), and the continuable ones — background
//! subagents kept between their turns, each by its agent id (its session
//! id), until the session closes.
//!
//! A continuable child's turns run as the parent's jobs (`turn/agents.rs`);
//! what is kept here is what outlives a turn: the child itself, its
//! latest turn's job (what `interrupt_agent` stops), its last answer (what
//! `list_agents` shows), and the messages an interrupt held back (given to
//! it with the next `send_message`).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::{lock, Session};

/// A session's children.
#[derive(Default)]
pub(crate) struct Children(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    /// Every child while it lives, foreground ones too, oldest first.
    followers: Vec<Weak<Session>>,
    /// The continuable children, oldest first.
    agents: Vec<Agent>,
}

/// A continuable child.
struct Agent {
    session: Arc<Session>,
    /// The job (the parent's) that runs or ran its latest turn.
    job: Option<Arc<crate::jobs::Job>>,
    /// Its latest turn's answer.
    last_answer: Option<String>,
    /// Messages queued for a turn that an interrupt stopped: they open
    /// the next message's turn.
    held: Vec<String>,
    /// How many times it was interrupted: a message queued before an
    /// interrupt is held, not run, when its turn comes.
    interrupts: u64,
}

impl Children {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.0)
    }
}

impl Session {
    /// `child` is a subagent of this session: while it lives, every change
    /// of this session's mode is its change too.
    pub(crate) fn adopt(&self, child: &Arc<Session>) {
        let mut inner = self.children.inner();
        inner.followers.retain(|child| child.strong_count() > 0);
        inner.followers.push(Arc::downgrade(child));
    }

    /// The children alive and open now, oldest first.
    pub(crate) fn live_children(&self) -> Vec<Arc<Session>> {
        self.children
            .inner()
            .followers
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|child| !child.closed.is_cancelled())
            .collect()
    }

    /// Keeps `child` (a background subagent) between its turns, until
    /// this session closes.
    pub(crate) fn keep_agent(&self, child: Arc<Session>) {
        self.children.inner().agents.push(Agent {
            session: child,
            job: None,
            last_answer: None,
            held: Vec::new(),
            interrupts: 0,
        });
    }

    /// Makes room for one more continuable child when `max_kept` (at
    /// least 1) are kept already: the oldest idle one (no turn, no
    /// running job) leaves the records and is returned for the caller to
    /// close (and say so). Each kept child is a live session (open log,
    /// lock, history), so their number is bounded.
    ///
    /// # Errors
    /// As many are kept and every one works: how many (none may be added).
    pub(crate) fn make_room_for_agent(
        &self,
        max_kept: usize,
    ) -> Result<Option<Arc<Session>>, usize> {
        // Read out first: the children's own locks are not taken under
        // this session's children's lock.
        let kept: Vec<(Arc<Session>, Option<Arc<crate::jobs::Job>>)> = {
            let inner = self.children.inner();
            if inner.agents.len() < max_kept.max(1) {
                return Ok(None);
            }
            inner
                .agents
                .iter()
                .map(|agent| (agent.session.clone(), agent.job.clone()))
                .collect()
        };
        let idle = kept.iter().find(|(child, job)| {
            !child.is_busy() && job.as_ref().is_none_or(|job| job.has_ended())
        });
        let Some((child, _)) = idle else {
            return Err(kept.len());
        };
        self.forget_agent(child.id.as_str());
        Ok(Some(child.clone()))
    }

    /// The continuable children's sessions, oldest first (the idle sweep
    /// drops their histories as it does the sessions').
    pub(crate) fn kept_agents(&self) -> Vec<Arc<Session>> {
        self.children
            .inner()
            .agents
            .iter()
            .map(|agent| agent.session.clone())
            .collect()
    }

    /// Forgets the continuable child `id` (its task's turn did not start).
    pub(crate) fn forget_agent(&self, id: &str) {
        self.children
            .inner()
            .agents
            .retain(|agent| agent.session.id.as_str() != id);
    }

    /// The continuable child `id`, if it is this session's.
    pub(crate) fn agent(&self, id: &str) -> Option<Arc<Session>> {
        self.children
            .inner()
            .agents
            .iter()
            .find(|agent| agent.session.id.as_str() == id)
            .map(|agent| agent.session.clone())
    }

    /// Whether `child` is one of this session's continuable children.
    pub(crate) fn is_agent(&self, child: &Session) -> bool {
        self.agent(child.id.as_str()).is_some()
    }

    /// The continuable children's ids, oldest first.
    pub(crate) fn agent_ids(&self) -> Vec<String> {
        self.children
            .inner()
            .agents
            .iter()
            .map(|agent| agent.session.id.to_string())
            .collect()
    }

    /// Runs `change` on the record of the continuable child `id`.
    fn with_agent<T>(&self, id: &str, change: impl FnOnce(&mut Agent) -> T) -> Option<T> {
        let mut inner = self.children.inner();
        inner
            .agents
            .iter_mut()
            .find(|agent| agent.session.id.as_str() == id)
            .map(change)
    }

    /// `job` runs the continuable child `id`'s turn now.
    pub(crate) fn agent_turn(&self, id: &str, job: &Arc<crate::jobs::Job>) {
        self.with_agent(id, |agent| agent.job = Some(job.clone()));
    }

    /// The job of the child `id`'s turn, while it runs.
    pub(crate) fn agent_job(&self, id: &str) -> Option<Arc<crate::jobs::Job>> {
        self.with_agent(id, |agent| agent.job.clone())
            .flatten()
            .filter(|job| !job.has_ended())
    }

    /// The child `id`'s turn ended with `answer` (none: it gave none).
    pub(crate) fn agent_answered(&self, id: &str, answer: &str) {
        let answer = Some(answer.trim().to_owned()).filter(|answer| !answer.is_empty());
        self.with_agent(id, |agent| {
            if answer.is_some() {
                agent.last_answer = answer;
            }
        });
    }

    /// The child `id`'s last answer.
    pub(crate) fn agent_answer(&self, id: &str) -> Option<String> {
        self.with_agent(id, |agent| agent.last_answer.clone())
            .flatten()
    }

    /// How many times the child `id` was interrupted so far.
    pub(crate) fn agent_interrupts(&self, id: &str) -> u64 {
        self.with_agent(id, |agent| agent.interrupts).unwrap_or(0)
    }

    /// The child `id` was interrupted: the messages queued for it now are
    /// held when their turn comes.
    pub(crate) fn agent_interrupted(&self, id: &str) {
        self.with_agent(id, |agent| agent.interrupts += 1);
    }

    /// Holds `message` for the child `id`'s next message.
    pub(crate) fn hold_message(&self, id: &str, message: String) {
        self.with_agent(id, |agent| agent.held.push(message));
    }

    /// How many messages are held for the child `id`.
    pub(crate) fn held_count(&self, id: &str) -> usize {
        self.with_agent(id, |agent| agent.held.len()).unwrap_or(0)
    }

    /// The messages held for the child `id`, taken.
    pub(crate) fn take_held(&self, id: &str) -> Vec<String> {
        self.with_agent(id, |agent| std::mem::take(&mut agent.held))
            .unwrap_or_default()
    }

    /// Cancels the running turn of `target`, leaving the prompts waiting
    /// for it in line (`interrupt_agent`; [`Session::cancel_turn`] empties
    /// the line too). Whether a turn ran.
    pub(crate) async fn interrupt_turn(&self) -> bool {
        self.mailbox
            .ask(super::owner::Command::Interrupt)
            .await
            .unwrap_or(false)
    }

    /// Stops the session and its continuable children's trees: each
    /// child (deepest first), then the session, as [`Self::close_one`]
    /// says; `grace` is each one's time for its turn to stop. Every turn
    /// of the tree is cancelled before the first wait: they stop
    /// together, within one grace, not one grace after another.
    pub(crate) async fn close(&self, grace: Duration) {
        self.closed.cancel();
        let tree = self.agent_tree();
        for child in &tree {
            child.closed.cancel();
            child.cancel_turn();
        }
        self.cancel_turn();
        for child in tree {
            child.close_one(grace).await;
        }
        self.close_one(grace).await;
    }

    /// The continuable children below the session, taken out of their
    /// parents' records, deepest first.
    fn agent_tree(&self) -> Vec<Arc<Session>> {
        let take = |session: &Session| -> Vec<Arc<Session>> {
            std::mem::take(&mut session.children.inner().agents)
                .into_iter()
                .map(|agent| agent.session)
                .collect()
        };
        let mut tree = Vec::new();
        let mut next = take(self);
        while let Some(child) = next.pop() {
            next.extend(take(&child));
            tree.push(child);
        }
        tree.reverse();
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::Scratch;
    use super::*;

    #[tokio::test]
    async fn a_continuable_childs_record_keeps_its_answer_and_held_messages() {
        let (parent, child) = (Scratch::new("", |_| {}), Scratch::new("", |_| {}));
        let (parent, child) = (&parent.session, &child.session);
        let id = child.id.to_string();
        parent.adopt(child);
        parent.keep_agent(child.clone());
        assert!(parent.is_agent(child));
        assert_eq!(parent.agent_ids(), std::slice::from_ref(&id));
        assert!(parent.agent("someone-else").is_none());
        assert_eq!(parent.live_children().len(), 1);
        // An empty answer leaves the last one.
        parent.agent_answered(&id, "  Found it.\n");
        parent.agent_answered(&id, " ");
        assert_eq!(parent.agent_answer(&id).as_deref(), Some("Found it."));
        // An interrupt is counted; held messages come back once, in order.
        assert_eq!(parent.agent_interrupts(&id), 0);
        parent.agent_interrupted(&id);
        assert_eq!(parent.agent_interrupts(&id), 1);
        parent.hold_message(&id, "one".into());
        parent.hold_message(&id, "two".into());
        assert_eq!(parent.held_count(&id), 2);
        assert_eq!(parent.take_held(&id), ["one", "two"]);
        assert!(parent.take_held(&id).is_empty());
        // No turn runs: nothing to interrupt, no job.
        assert!(!child.interrupt_turn().await);
        assert!(parent.agent_job(&id).is_none());
        parent.forget_agent(&id);
        assert!(!parent.is_agent(child));
    }

    #[tokio::test]
    async fn past_max_kept_the_oldest_idle_child_leaves_or_none_is_added() {
        let scratches: Vec<Scratch> = (0..3).map(|_| Scratch::new("", |_| {})).collect();
        let [parent, first, second] = [0, 1, 2].map(|n| scratches[n].session.clone());
        assert!(matches!(parent.make_room_for_agent(2), Ok(None)));
        parent.keep_agent(first.clone());
        parent.keep_agent(second.clone());
        // The first works: the second, idle, leaves.
        let _turn = first.begin_turn().await.unwrap();
        match parent.make_room_for_agent(2) {
            Ok(Some(child)) => assert_eq!(child.id, second.id),
            _ => panic!("the idle child should leave"),
        }
        assert_eq!(parent.agent_ids(), [first.id.to_string()]);
        // Below the most again; at one kept, all working: none is added.
        assert!(matches!(parent.make_room_for_agent(2), Ok(None)));
        assert!(matches!(parent.make_room_for_agent(1), Err(1)));
        assert_eq!(parent.kept_agents().len(), 1);
    }

    /// Each turn stops only once every turn of the tree was asked to: a
    /// close that waited for one before cancelling the next would take
    /// a grace per member.
    #[tokio::test]
    async fn closing_cancels_every_turn_of_the_tree_before_waiting_for_one() {
        let scratches: Vec<Scratch> = (0..3).map(|_| Scratch::new("", |_| {})).collect();
        let [parent, child, grandchild] = [0, 1, 2].map(|n| scratches[n].session.clone());
        parent.keep_agent(child.clone());
        child.keep_agent(grandchild.clone());
        let asked = Arc::new(tokio::sync::Semaphore::new(0));
        for session in [&parent, &child, &grandchild] {
            let ticket = session.begin_turn().await.unwrap();
            let asked = asked.clone();
            tokio::spawn(async move {
                ticket.cancel_token().cancelled().await;
                asked.add_permits(1);
                // Held until all three were asked to stop.
                let _all = asked.acquire_many(3).await;
                drop(ticket);
            });
        }
        let closed = tokio::time::timeout(
            Duration::from_secs(10),
            parent.close(Duration::from_secs(30)),
        )
        .await;
        assert!(closed.is_ok(), "the turns were cancelled one at a time");
    }

    #[tokio::test]
    async fn closing_a_session_closes_its_continuable_children_deepest_first() {
        let scratches: Vec<Scratch> = (0..3).map(|_| Scratch::new("", |_| {})).collect();
        let [parent, child, grandchild] = [0, 1, 2].map(|n| scratches[n].session.clone());
        parent.keep_agent(child.clone());
        child.keep_agent(grandchild.clone());
        assert_eq!(
            parent
                .agent_tree()
                .iter()
                .map(|s| s.id.clone())
                .collect::<Vec<_>>(),
            [grandchild.id.clone(), child.id.clone()]
        );
        // Taken out: kept again for the close.
        parent.keep_agent(child.clone());
        child.keep_agent(grandchild.clone());
        parent.close(Duration::from_secs(1)).await;
        for session in [&parent, &child, &grandchild] {
            let written = session.record(
                dsh_protocol::log::EventData::Notice {
                    text: "late".into(),
                },
                &crate::frontend::Nobody,
            );
            assert!(written.is_err(), "{} is still open", session.id);
        }
        assert!(parent.agent_ids().is_empty() && child.agent_ids().is_empty());
    }
}
