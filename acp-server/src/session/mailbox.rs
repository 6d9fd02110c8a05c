//! What the rest of dsh says to a session's owner ([`super::owner`]):
//! each method sends one [`Command`], and those that need an answer wait
//! for it. Sending never blocks, so a dispatch loop may send; the order of
//! sending is the order of handling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, Weak};

use dsh_protocol::log::EventData;
use dsh_protocol::{SessionId, UserContent};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::inbox::Admission;
use super::owner::{self, Boundary, Command, Shared, Subscriber};
use super::{Session, TurnTicket};
use crate::error::AgentError;
use crate::frontend::Frontend;

/// How the session reaches its owner; also what any thread may read
/// without asking: whether it holds a turn or prompts, and who shows it.
pub(super) struct Mailbox {
    tx: mpsc::UnboundedSender<Command>,
    /// Tickets alive (each counts itself in and out).
    tickets: AtomicUsize,
    /// What the owner writes for every thread to read.
    shared: Arc<Shared>,
}

impl Mailbox {
    /// A mailbox whose owner runs on the current runtime for `session`.
    pub(super) fn start(session: Weak<Session>) -> Mailbox {
        let shared = Arc::new(Shared::default());
        Mailbox {
            tx: owner::spawn(session, shared.clone()),
            tickets: AtomicUsize::new(0),
            shared,
        }
    }

    /// Sends a prompt: counted as busy from now until the owner has read
    /// it (a child that was just messaged is not idle).
    fn send_prompt(&self, command: Command) {
        self.shared.sent.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(command).is_err() {
            self.shared.sent.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The subscribers now, without asking the owner.
    pub(super) fn shown(&self) -> Arc<[Subscriber]> {
        self.shared
            .shown
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends `command`; a session whose owner is gone (the runtime is
    /// shutting down) drops it, and its reply, if any, never comes.
    pub(super) fn send(&self, command: Command) {
        let _ = self.tx.send(command);
    }

    /// Sends a command made around a reply channel and waits for the
    /// reply; `None` if the owner is gone.
    pub(crate) async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.send(command(reply));
        answer.await.ok()
    }

    /// Whether a prompt was sent and not yet read, waits in line, or holds
    /// a ticket. Never idle on the way from one to the next: the owner
    /// counts a prompt into the line or a ticket before out of `sent`, and
    /// a ticket in before out of the line, and these are read in the
    /// opposite order.
    pub(super) fn busy(&self) -> bool {
        self.shared.sent.load(Ordering::Acquire) > 0
            || self.shared.waiting.load(Ordering::Acquire) > 0
            || self.tickets.load(Ordering::Acquire) > 0
    }

    /// A ticket came into being (the owner made it).
    pub(super) fn ticket_made(&self) {
        self.tickets.fetch_add(1, Ordering::AcqRel);
    }

    /// A ticket was dropped; `turn_over`: it held the turn.
    pub(super) fn ticket_dropped(&self, turn_over: bool) {
        self.tickets.fetch_sub(1, Ordering::AcqRel);
        if turn_over {
            self.send(Command::TurnOver);
        }
    }
}

/// A prompt on its way in: its cancel token now, its admission when the
/// session's owner has read it.
pub struct Admitting {
    /// Cancels the prompt (in line, or its turn once it runs).
    pub cancel: CancellationToken,
    answer: tokio::sync::oneshot::Receiver<Result<Admission, AgentError>>,
    id: SessionId,
}

impl Admitting {
    /// Its turn now, or its place in line.
    ///
    /// # Errors
    /// `session.busy` when the line is full; the session closed.
    pub async fn admitted(self) -> Result<Admission, AgentError> {
        self.answer
            .await
            .unwrap_or_else(|_| Err(AgentError::SessionClosed(self.id.to_string())))
    }
}

impl Session {
    /// Reserves the session for one prompt, now or not at all (`dsh run`,
    /// a subagent's one turn, a wake-up, the tests; front ends that queue
    /// call [`Self::admit`]).
    ///
    /// # Errors
    /// `session.busy` when a turn runs or prompts wait; the session closed.
    pub async fn begin_turn(self: &Arc<Self>) -> Result<TurnTicket, AgentError> {
        let cancel = self.closed.child_token();
        let (reply, answer) = oneshot::channel();
        self.mailbox.send_prompt(Command::Prompt {
            steer: None,
            cancel,
            alone: true,
            reply,
        });
        match answer.await {
            Ok(Ok(Admission::Now(ticket))) => Ok(ticket),
            Ok(Ok(Admission::Waiting(_) | Admission::Cancelled)) => Err(AgentError::Internal(
                "a turn taken alone was put in line".to_owned(),
            )),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(AgentError::SessionClosed(self.id.to_string())),
        }
    }

    /// Admits a prompt: the turn at once when none runs and no one waits,
    /// else a place in line (a steer's `content` is taken by the running
    /// turn). Its place is fixed now, when it is sent: call it inside the
    /// dispatch loop, so a `session/cancel` right behind the request finds
    /// it; the admission comes when the owner has read it.
    pub fn admit(&self, steer: Option<Vec<UserContent>>) -> Admitting {
        let cancel = self.closed.child_token();
        let (reply, answer) = oneshot::channel();
        if self.closed.is_cancelled() {
            let _ = reply.send(Err(AgentError::SessionClosed(self.id.to_string())));
            return Admitting {
                cancel,
                answer,
                id: self.id.clone(),
            };
        }
        self.mailbox.send_prompt(Command::Prompt {
            steer,
            cancel: cancel.clone(),
            alone: false,
            reply,
        });
        Admitting {
            cancel,
            answer,
            id: self.id.clone(),
        }
    }

    /// What the running turn takes in at a step boundary: late answers
    /// and the prompts steered into it.
    pub(crate) async fn boundary(&self) -> Boundary {
        self.mailbox
            .ask(|reply| Command::Boundary {
                steers: true,
                reply,
            })
            .await
            .unwrap_or(Boundary {
                late: Vec::new(),
                steered: Vec::new(),
            })
    }

    /// The late answers waiting for the running turn (as it starts).
    pub(crate) async fn late_answers(&self) -> Vec<String> {
        self.mailbox
            .ask(|reply| Command::Boundary {
                steers: false,
                reply,
            })
            .await
            .map(|boundary| boundary.late)
            .unwrap_or_default()
    }

    /// Whether a prompt that will run waits in line (a goal's rounds give
    /// way to it). One cancelled in line, or whose waiter is gone, does not
    /// count: it will not run, and the rounds would stall behind it.
    pub(crate) async fn has_waiting(&self) -> bool {
        self.mailbox.ask(Command::HasWaiting).await.unwrap_or(false)
    }

    /// Brings a late answer (`text`, a context block) to the model
    /// before its next step: recorded now when no turn runs (it opens the
    /// next prompt: the log keeps it; every subscriber is shown it), else
    /// at the running turn's next step boundary ([`Self::boundary`]).
    pub(crate) fn deliver_late(&self, text: String) {
        self.mailbox.send(Command::Late(text));
    }

    /// The front end of the latest prompt (what a turn's asks that
    /// outlive it report to).
    pub(crate) async fn prompter(&self) -> Option<Subscriber> {
        self.mailbox.ask(Command::Prompter).await.flatten()
    }

    /// Subscribes a front end to what happens between turns (replacing
    /// one of its kind).
    pub fn subscribe(&self, subscriber: Subscriber) {
        self.mailbox.send(Command::Subscribe {
            subscriber,
            prompter: false,
        });
    }

    /// The subscriber of type `T`, made by `make` (and subscribed) if
    /// there is none: one per session, however many ask at once.
    pub async fn attach<T: Frontend + 'static>(
        &self,
        make: impl FnOnce() -> Arc<T> + Send + 'static,
    ) -> Option<Arc<T>> {
        let make: Box<dyn FnOnce() -> Subscriber + Send> =
            Box::new(move || Subscriber::new(make()));
        self.mailbox
            .ask(|reply| Command::Attach {
                kind: std::any::TypeId::of::<T>(),
                make,
                reply,
            })
            .await
            .and_then(|subscriber| subscriber.downcast::<T>())
    }

    /// The subscriber of type `T`, if one subscribed, read without asking
    /// the owner (a subscription shows here once the owner has handled it:
    /// when `attach` returns).
    pub fn subscriber<T: Frontend + 'static>(&self) -> Option<Arc<T>> {
        self.mailbox
            .shown()
            .iter()
            .find_map(|subscriber| subscriber.downcast::<T>())
    }

    /// Records `data` between turns, shown to every subscriber (a title);
    /// a failure is logged, not returned.
    pub(crate) fn record_between_turns(&self, data: EventData) {
        self.mailbox.send(Command::Record { data, reply: None });
    }

    /// Makes `frontend` the latest prompt's front end, and a subscriber.
    pub(crate) fn set_prompter(&self, subscriber: Subscriber) {
        self.mailbox.send(Command::Subscribe {
            subscriber,
            prompter: true,
        });
    }

    /// What a background job calls when it ends: its owner records
    /// `job/end`, shown to every subscriber, and decides on a wake-up.
    pub(crate) fn on_job_end(self: &Arc<Self>) -> crate::jobs::OnEnd {
        let me = Arc::downgrade(self);
        Box::new(move |report: crate::jobs::JobReport| {
            if let Some(session) = me.upgrade() {
                session.mailbox.send(Command::JobEnded(report));
            }
        })
    }

    /// Where a command job's output goes as it comes: shown on its call
    /// by every subscriber at once, from the job's task, so it keeps its
    /// place among the turn's own output (transient: `job/end` keeps its
    /// tail).
    pub(crate) fn on_job_live(
        self: &Arc<Self>,
        call_id: &dsh_protocol::ToolCallId,
    ) -> crate::jobs::OnLive {
        let (me, call_id) = (Arc::downgrade(self), call_id.clone());
        Box::new(move |live| {
            let Some(session) = me.upgrade() else {
                return;
            };
            let shown = session.mailbox.shown();
            owner::Fanout(&shown).emit(crate::frontend::Output::Transient(
                crate::frontend::Transient::Command {
                    call_id: call_id.clone(),
                    live,
                },
            ));
        })
    }

    /// Whether a turn runs, is being handed on, or a prompt was sent and
    /// not yet read or waits in line.
    pub fn is_busy(&self) -> bool {
        self.mailbox.busy()
    }

    /// Cancels the running turn, if any, and every prompt waiting for
    /// the turn (answered `cancelled`). Sent, not awaited: it takes effect
    /// in order with the commands sent before it.
    pub fn cancel_turn(&self) {
        self.mailbox.send(Command::Cancel);
    }

    /// Drops the session's model history from memory if the session has
    /// been idle for `idle`: no turn runs (its owner decides this between
    /// two commands, so none starts meanwhile), no background job runs,
    /// nothing was recorded since. The log stays the truth;
    /// [`Self::resident`] folds it again. Whether it was dropped now.
    pub(crate) async fn evict_idle_history(&self, idle: std::time::Duration) -> bool {
        self.mailbox
            .ask(|reply| Command::EvictIdle(idle, reply))
            .await
            .unwrap_or(false)
    }

    /// Returns once every command sent before it has been handled.
    pub(crate) async fn flush(&self) {
        self.mailbox.ask(Command::Flush).await;
    }

    /// A prompt cancelled while waiting leaves the line (unless it was
    /// handed on meanwhile).
    pub(super) fn leave_line(&self, id: u64) {
        self.mailbox.send(Command::Leave(id));
    }
}
