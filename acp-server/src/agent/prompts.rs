//! Prompts: a session reserved for one (`dsh run`), submitted the way
//! front ends that queue do (sent to the session's owner inside the
//! dispatch loop, admitted, run), and cancelled.

use std::sync::Arc;

use dsh_protocol::log::StopReason;
use dsh_protocol::{SessionId, UserContent};
use tokio_util::sync::CancellationToken;

use super::{goal_rounds, Agent};
use crate::error::AgentError;
use crate::session::{Admission, PromptDelivery, Subscriber, TurnTicket, Waited};

/// A submitted prompt ([`Agent::submit`]): in line at the session's
/// owner, not yet admitted.
pub struct Submitted {
    /// Cancels it, waiting or running (the request's own cancel).
    pub cancel: CancellationToken,
    admitting: crate::session::Admitting,
    run: Box<dyn FnOnce(Admission) -> Admitted + Send>,
}

/// An admitted prompt.
pub struct Admitted {
    /// It waits behind a running turn (queued, or steered into it).
    pub waiting: bool,
    /// Waits for its turn and runs it: the stop reason.
    pub done: futures::future::BoxFuture<'static, Result<StopReason, AgentError>>,
}

impl Submitted {
    /// Waits for the session's owner to admit it.
    ///
    /// # Errors
    /// A full line (`session.busy`), a closed session.
    pub async fn admitted(self) -> Result<Admitted, AgentError> {
        let admission = self.admitting.admitted().await?;
        Ok((self.run)(admission))
    }

    /// Waits for its admission, its turn, and runs it.
    ///
    /// # Errors
    /// As [`Self::admitted`] and [`Agent::prompt`].
    pub async fn run(self) -> Result<StopReason, AgentError> {
        self.admitted().await?.done.await
    }
}

impl Agent {
    /// Reserves the session for one prompt. Call this before spawning the
    /// turn so a `session/cancel` that follows at once finds the token.
    ///
    /// # Errors
    /// Unknown or busy session.
    pub async fn begin_prompt(&self, id: &SessionId) -> Result<TurnTicket, AgentError> {
        self.check_config()?;
        let session = self.session(id)?;
        let ticket = session.begin_turn().await?;
        // Only a prompt that runs is the user's input (a refused one is not).
        session.wakeups.user_input();
        Ok(ticket)
    }

    /// Submits a prompt the way every front end that queues does: it runs
    /// now, waits in line behind the running turn, or (`Steer`) joins that
    /// turn ([`crate::session::inbox`]). It is sent to the session's owner
    /// here, inside the caller's dispatch loop (so a `session/cancel` sent
    /// right behind the request is handled after it); [`Submitted`] awaits
    /// its admission, then its turn, and resolves to the prompt's stop
    /// reason (a steer: its turn's). `on_start` is
    /// called when the prompt's own turn starts (never for a steer the
    /// running turn takes in, nor for a prompt cancelled in line).
    ///
    /// # Errors
    /// Unknown session or bad content (a full line, `session.busy`, comes
    /// with the admission).
    pub fn submit(
        self: &Arc<Self>,
        id: &SessionId,
        content: Vec<UserContent>,
        delivery: PromptDelivery,
        frontend: Subscriber,
        on_start: Box<dyn FnOnce() + Send>,
    ) -> Result<Submitted, AgentError> {
        self.check_config()?;
        self.check_prompt(&content)?;
        let session = self.session(id)?;
        session.wakeups.user_input();
        // A slash command is never steered: it is a turn of its own.
        let steer = (delivery == PromptDelivery::Steer
            && crate::context::commands::parse(&content).is_none())
        .then(|| content.clone());
        let agent = self.clone();
        let admitting = session.admit(steer);
        Ok(Submitted {
            cancel: admitting.cancel.clone(),
            admitting,
            run: Box::new(move |admission| {
                Self::admitted(agent, admission, content, frontend, on_start)
            }),
        })
    }

    /// What an admitted prompt does.
    fn admitted(
        agent: Arc<Agent>,
        admission: Admission,
        content: Vec<UserContent>,
        frontend: Subscriber,
        on_start: Box<dyn FnOnce() + Send>,
    ) -> Admitted {
        match admission {
            Admission::Now(ticket) => Admitted {
                waiting: false,
                done: Box::pin(async move {
                    on_start();
                    agent.prompt(ticket, content, frontend).await
                }),
            },
            Admission::Waiting(waiting) => Admitted {
                waiting: true,
                done: Box::pin(async move {
                    match waiting.wait().await {
                        // Cancelled as the turn came: it passes on.
                        Waited::Turn(ticket) if ticket.cancel.is_cancelled() => {
                            goal_rounds::stop_before(
                                &ticket,
                                "the turn was cancelled",
                                &**frontend.frontend(),
                            );
                            Ok(StopReason::Cancelled)
                        }
                        Waited::Turn(ticket) => {
                            on_start();
                            agent.prompt(ticket, content, frontend).await
                        }
                        Waited::Joined(outcome) => outcome.map_err(AgentError::Joined),
                        Waited::Cancelled => Ok(StopReason::Cancelled),
                    }
                }),
            },
            Admission::Cancelled => Admitted {
                waiting: false,
                done: Box::pin(std::future::ready(Ok(StopReason::Cancelled))),
            },
        }
    }

    /// Runs one prompt to completion. The ticket's token cancels it.
    ///
    /// # Errors
    /// Invalid content, no credential, a log write failure, or a model
    /// failure (after the partial reply was logged and `turn/end`
    /// recorded).
    pub async fn prompt(
        &self,
        ticket: TurnTicket,
        content: Vec<UserContent>,
        frontend: impl Into<Subscriber>,
    ) -> Result<StopReason, AgentError> {
        let frontend = frontend.into();
        if let Err(error) = self.check_prompt(&content) {
            goal_rounds::stop_before(&ticket, "the prompt was refused", &**frontend.frontend());
            return Err(error);
        }
        ticket.session.set_prompter(frontend.clone());
        let frontend = &**frontend.frontend();
        if let Err(error) = self.require_credential().await {
            goal_rounds::stop_before(&ticket, "no model credential", frontend);
            return Err(error);
        }
        let provider = self
            .provider
            .clone()
            .ok_or_else(|| AgentError::Internal("no model provider".to_owned()))?;
        let stop = crate::turn::run(&ticket, provider.clone(), content, frontend).await;
        // An active goal goes on in rounds, inside this prompt.
        let stop = goal_rounds::run(&ticket, &provider, stop, frontend).await;
        self.give_back_memory(false);
        stop
    }

    /// `session/cancel`: cancels the running turn, if any. Idempotent; an
    /// idle or unknown session is a no-op.
    pub fn cancel(&self, id: &SessionId) {
        if let Some(session) = self.live(id) {
            session.cancel_turn();
        }
    }
}
