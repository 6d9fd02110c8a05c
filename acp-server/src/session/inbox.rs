//! Prompts that arrive while a turn runs: the session's inbox, kept by its
//! owner ([`super::owner`]).
//!
//! One turn runs at a time. A prompt that finds it taken waits in line, in
//! arrival order, up to [`LIMIT`] of them:
//!
//! - **queued** (the default), it starts its own turn when the turns ahead
//!   of it end — the owner hands the ending turn straight to the first one
//!   waiting ([`Handoff::Turn`]), so a prompt that arrives meanwhile cannot
//!   overtake the line;
//! - **steered**, the running turn takes it at its next step boundary
//!   ([`Session::boundary`]) and records it as a user message; it is
//!   answered when that turn ends, with that turn's outcome
//!   ([`Handoff::Joined`]). A steer the turn never reached (the turn ended
//!   first) runs as an ordinary prompt when its place in line comes.
//!
//! `session/cancel` empties the inbox ([`Session::cancel_turn`]): every
//! waiting prompt is answered `cancelled`.

use std::sync::Arc;

use dsh_protocol::error::ErrorInfo;
use dsh_protocol::log::StopReason;
use dsh_protocol::UserContent;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{Session, TurnTicket};
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

/// A prompt in line (the owner's).
pub(super) struct Entry {
    pub(super) id: u64,
    /// A steer's content (what the running turn records).
    pub(super) steer: Option<Vec<UserContent>>,
    pub(super) cancel: CancellationToken,
    pub(super) handoff: oneshot::Sender<Handoff>,
}

/// A prompt's admission: its turn now, or a place in line.
pub enum Admission {
    /// The turn is free: this prompt's.
    Now(TurnTicket),
    /// A turn runs: the prompt waits.
    Waiting(Waiting),
    /// Cancelled between being sent and being read (the session closed,
    /// the request's own cancel): it never runs.
    Cancelled,
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
    pub(super) fn new(
        session: Arc<Session>,
        id: u64,
        cancel: CancellationToken,
        handoff: oneshot::Receiver<Handoff>,
    ) -> Waiting {
        Waiting {
            session,
            id,
            cancel,
            handoff,
        }
    }

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
                // Out of line, unless it was handed on meanwhile.
                self.session.leave_line(self.id);
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

/// Where a steered prompt's answer goes.
pub(crate) struct Joined(pub(super) oneshot::Sender<Handoff>);

impl Joined {
    /// Answers the steered prompt with the outcome of the turn it joined.
    pub(crate) fn answer(self, outcome: Result<StopReason, ErrorInfo>) {
        let _ = self.0.send(Handoff::Joined(outcome));
    }
}
