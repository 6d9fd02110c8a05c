//! Prompts that arrive while a turn runs: the session's inbox.
//!
//! One turn runs at a time (the turn lock). A prompt that finds it taken
//! waits here, in arrival order, up to [`LIMIT`] of them:
//!
//! - **queued** (the default), it starts its own turn when the turns ahead
//!   of it end — the ending turn hands the lock straight to the first one
//!   waiting ([`Handoff::Turn`]), so a prompt that arrives meanwhile cannot
//!   overtake the line;
//! - **steered**, the running turn takes it at its next step boundary
//!   ([`Session::take_steered`]) and records it as a user message; it is
//!   answered when that turn ends, with that turn's outcome
//!   ([`Handoff::Joined`]). A steer the turn never reached (the turn ended
//!   first) runs as an ordinary prompt when its place in line comes.
//!
//! `session/cancel` empties the inbox ([`Session::cancel_turn`]): every
//! waiting prompt is answered `cancelled`.

use std::collections::VecDeque;
use std::sync::Arc;

use dsh_protocol::error::ErrorInfo;
use dsh_protocol::log::StopReason;
use dsh_protocol::UserContent;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{lock, Session, TurnTicket};
use crate::error::AgentError;

/// How many prompts may wait behind a running turn.
pub const LIMIT: usize = 16;

/// How a prompt that arrives during a turn is delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PromptDelivery {
    /// After the running turn (and any queued before it), as its own turn.
    #[default]
    Queue,
    /// Into the running turn, at its next step boundary.
    Steer,
}

impl PromptDelivery {
    /// From the wire's word (`"queue"`, `"steer"`).
    ///
    /// # Errors
    /// Any other word.
    pub fn parse(word: &str) -> Result<PromptDelivery, AgentError> {
        match word {
            "queue" => Ok(PromptDelivery::Queue),
            "steer" => Ok(PromptDelivery::Steer),
            other => Err(AgentError::InvalidParams(format!(
                "delivery must be \"queue\" or \"steer\", got {other:?}"
            ))),
        }
    }
}

/// What a waiting prompt is given when its wait ends.
pub(crate) enum Handoff {
    /// The session's turn, for this prompt.
    Turn(TurnTicket),
    /// A steered prompt's turn ended: its outcome.
    Joined(Result<StopReason, ErrorInfo>),
}

/// Whether a turn runs, and the prompts waiting for it, in arrival order.
/// This is what admits a turn (under its mutex); the turn lock it hands
/// out is what `close` waits for.
#[derive(Default)]
pub(super) struct Inbox {
    /// A ticket holds the turn.
    pub(super) running: bool,
    waiting: VecDeque<Entry>,
    next_id: u64,
}

impl Inbox {
    pub(super) fn waiting_is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

struct Entry {
    id: u64,
    /// A steer's content (what the running turn records).
    steer: Option<Vec<UserContent>>,
    cancel: CancellationToken,
    handoff: oneshot::Sender<Handoff>,
}

/// A prompt's admission: its turn now, or a place in line.
pub enum Admission {
    /// The turn is free: this prompt's.
    Now(TurnTicket),
    /// A turn runs: the prompt waits.
    Waiting(Waiting),
}

/// A place in the inbox.
pub struct Waiting {
    session: Arc<Session>,
    id: u64,
    cancel: CancellationToken,
    handoff: oneshot::Receiver<Handoff>,
}

/// How a wait in the inbox ended.
pub enum Waited {
    /// The prompt's own turn.
    Turn(TurnTicket),
    /// The outcome of the turn a steer joined.
    Joined(Result<StopReason, ErrorInfo>),
    /// Cancelled (`session/cancel`, the request's own cancel, the session
    /// closed) before it ran.
    Cancelled,
}

impl Waiting {
    /// Cancels this prompt (and its turn, once it runs).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Waits for the prompt's turn, or its steer's outcome.
    pub async fn wait(mut self) -> Waited {
        tokio::select! {
            handoff = &mut self.handoff => match handoff {
                Ok(Handoff::Turn(ticket)) => Waited::Turn(ticket),
                Ok(Handoff::Joined(outcome)) => Waited::Joined(outcome),
                Err(_) => Waited::Cancelled,
            },
            () = self.cancel.cancelled() => {
                let left = {
                    let mut inbox = lock(&self.session.inbox);
                    let before = inbox.waiting.len();
                    inbox.waiting.retain(|entry| entry.id != self.id);
                    inbox.waiting.len() < before
                };
                if left {
                    return Waited::Cancelled;
                }
                // Already handed on: a steer the turn took in is answered
                // when that turn ends (its words are in it); a turn handed
                // over meanwhile is dropped (and passes on) unless it came.
                match self.handoff.await {
                    Ok(Handoff::Joined(outcome)) => Waited::Joined(outcome),
                    Ok(Handoff::Turn(_)) | Err(_) => Waited::Cancelled,
                }
            }
        }
    }
}

impl Session {
    /// Whether prompts wait in line for the turn (a goal's rounds give
    /// way to them).
    /// A prompt cancelled in line, or whose waiter is gone, does not count:
    /// it will not run, and the rounds would stall behind it.
    pub(crate) fn has_waiting(&self) -> bool {
        lock(&self.inbox)
            .waiting
            .iter()
            .any(|entry| !entry.cancel.is_cancelled() && !entry.handoff.is_closed())
    }

    /// Admits a prompt: the turn at once when none runs and no one waits,
    /// else a place in line (a steer's `content` is taken by the running
    /// turn). Call it before spawning the wait, so a `session/cancel` right
    /// behind the request finds it.
    ///
    /// # Errors
    /// `session.busy` when [`LIMIT`] prompts already wait.
    pub fn admit(
        self: &Arc<Self>,
        steer: Option<Vec<UserContent>>,
    ) -> Result<Admission, AgentError> {
        if self.closed.is_cancelled() {
            return Err(AgentError::SessionClosed(self.id.to_string()));
        }
        let mut inbox = lock(&self.inbox);
        if !inbox.running && inbox.waiting.is_empty() {
            return self.take_turn(&mut inbox).map(Admission::Now);
        }
        if inbox.waiting.len() >= LIMIT {
            return Err(AgentError::SessionBusy(format!(
                "session {} already has {LIMIT} prompts waiting behind its running turn; wait for them or cancel",
                self.id
            )));
        }
        inbox.next_id += 1;
        let id = inbox.next_id;
        let cancel = self.closed.child_token();
        let (handoff, receiver) = oneshot::channel();
        inbox.waiting.push_back(Entry {
            id,
            steer,
            cancel: cancel.clone(),
            handoff,
        });
        Ok(Admission::Waiting(Waiting {
            session: self.clone(),
            id,
            cancel,
            handoff: receiver,
        }))
    }

    /// The turn, for a prompt admitted now (`inbox` locked, no turn
    /// running, no one waiting).
    ///
    /// # Errors
    /// `session.busy` while the session closes (its close holds the lock).
    pub(super) fn take_turn(self: &Arc<Self>, inbox: &mut Inbox) -> Result<TurnTicket, AgentError> {
        // A closing session takes no new turn (close cancels `closed`
        // first).
        if self.closed.is_cancelled() {
            return Err(AgentError::SessionClosed(self.id.to_string()));
        }
        let guard = self
            .turn_lock
            .clone()
            .try_lock_owned()
            .map_err(|_| AgentError::SessionBusy(format!("session {} is closing", self.id)))?;
        inbox.running = true;
        Ok(self.ticket(guard, self.closed.child_token()))
    }

    /// The steered prompts waiting now, taken out of line by the running
    /// turn: their content, and where their answer goes when the turn ends.
    pub(crate) fn take_steered(&self) -> Vec<(Vec<UserContent>, Joined)> {
        let mut inbox = lock(&self.inbox);
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(inbox.waiting.len());
        for entry in inbox.waiting.drain(..) {
            match entry.steer {
                Some(content) if !entry.cancel.is_cancelled() => {
                    taken.push((content, Joined(entry.handoff)));
                }
                steer => kept.push_back(Entry { steer, ..entry }),
            }
        }
        inbox.waiting = kept;
        taken
    }

    /// Cancels the running turn and ends the wait of every prompt in line
    /// (answered `cancelled`), under the inbox's lock: a hand-off is
    /// either before (its turn is cancelled) or after (nothing is left).
    pub(super) fn cancel_all(&self) {
        let mut inbox = lock(&self.inbox);
        if let Some(token) = lock(&self.turn_cancel).as_ref() {
            token.cancel();
        }
        for entry in inbox.waiting.drain(..) {
            entry.cancel.cancel();
        }
    }

    /// A ticket ends: the turn goes to the first prompt still waiting, or
    /// is released.
    pub(super) fn hand_on(self: &Arc<Self>, guard: tokio::sync::OwnedMutexGuard<()>) {
        let mut inbox = lock(&self.inbox);
        let mut guard = Some(guard);
        while let Some(entry) = inbox.waiting.pop_front() {
            let Some(held) = guard.take() else { break };
            if entry.cancel.is_cancelled() {
                guard = Some(held);
                continue;
            }
            let ticket = self.ticket(held, entry.cancel);
            match entry.handoff.send(Handoff::Turn(ticket)) {
                Ok(()) => return,
                // The waiter is gone: the next one (the ticket, its guard
                // taken, drops as nothing).
                Err(Handoff::Turn(mut ticket)) => guard = ticket.guard.take(),
                Err(Handoff::Joined(_)) => {}
            }
        }
        *lock(&self.turn_cancel) = None;
        // Released here, with the inbox locked: an admission sees either
        // the line or a free turn, never a free turn with a line.
        inbox.running = false;
        drop(guard);
    }
}

/// Where a steered prompt's answer goes.
pub(crate) struct Joined(oneshot::Sender<Handoff>);

impl Joined {
    /// Answers the steered prompt with the outcome of the turn it joined.
    pub(crate) fn answer(self, outcome: Result<StopReason, ErrorInfo>) {
        let _ = self.0.send(Handoff::Joined(outcome));
    }
}
