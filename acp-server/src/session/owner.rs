//! The session's owner: one task per live session that decides what runs
//! next, fed by one closed set of [`Command`]s in the order they were sent.
//!
//! It alone holds whether a turn runs and the turn's cancel token, the
//! prompts waiting for the turn ([`super::inbox`] says how they wait), the
//! late answers for the next step, and the session's subscribers: every
//! front end that shows the session (ACP, the SDK, `dsh run`) subscribes,
//! and what happens between turns — a job's end, a title, a late answer —
//! is recorded once and shown to each (a job's live output too, from the
//! job's task, through the snapshot the owner publishes). Anyone may send a command without waiting (`session/cancel` in
//! the ACP dispatch loop sends and returns); one that needs an answer
//! awaits it, and its place in line was fixed when it was sent, so two
//! prompts sent back to back are admitted in that order.
//!
//! What it does not own, and why a lock stays there, is in
//! docs/architecture.md ("Concurrency").

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};

use dsh_protocol::log::{Event, EventData};
use dsh_protocol::UserContent;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::inbox::{Admission, Entry, Handoff, Joined, Waiting, LIMIT};
use super::{Session, TurnTicket};
use crate::error::AgentError;
use crate::frontend::{Frontend, Output};

/// A front end that shows a session: one per kind of front end (a second
/// of the same kind replaces the first), found again by its type.
#[derive(Clone)]
pub struct Subscriber {
    kind: TypeId,
    frontend: Arc<dyn Frontend>,
    any: Arc<dyn Any + Send + Sync>,
}

impl Subscriber {
    /// `frontend` as a subscriber.
    pub fn new<T: Frontend + 'static>(frontend: Arc<T>) -> Subscriber {
        Subscriber {
            kind: TypeId::of::<T>(),
            frontend: frontend.clone(),
            any: frontend,
        }
    }

    /// Its front end.
    pub fn frontend(&self) -> &Arc<dyn Frontend> {
        &self.frontend
    }

    /// As the front end it was made from, if it was a `T`.
    pub fn downcast<T: Frontend + 'static>(&self) -> Option<Arc<T>> {
        self.any.clone().downcast::<T>().ok()
    }
}

impl<T: Frontend + 'static> From<Arc<T>> for Subscriber {
    fn from(frontend: Arc<T>) -> Subscriber {
        Subscriber::new(frontend)
    }
}

/// The owner's state as readers outside it see it, written by the owner
/// alone (and `sent` counted in by senders).
pub(super) struct Shared {
    /// Prompts sent and not yet read by the owner.
    pub(super) sent: AtomicUsize,
    /// Prompts in line.
    pub(super) waiting: AtomicUsize,
    /// The subscribers now: a job's live output is shown from the job's
    /// task, in order with the turn's own output.
    pub(super) shown: RwLock<Arc<[Subscriber]>>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            sent: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            shown: RwLock::new(Arc::new([])),
        }
    }
}

/// What a running turn takes in at a step boundary.
pub(crate) struct Boundary {
    /// Late answers to timed questions, oldest first.
    pub(crate) late: Vec<String>,
    /// The prompts steered into the turn: their content, and where their
    /// answer goes when the turn ends.
    pub(crate) steered: Vec<(Vec<UserContent>, Joined)>,
}

/// Everything the owner is told or asked. Closed: this is all a session
/// can be made to do from outside a turn.
pub(crate) enum Command {
    /// A prompt (or a child's message, a steer): its turn now, or a place
    /// in line; `alone`: now or not at all (`session.busy`).
    Prompt {
        steer: Option<Vec<UserContent>>,
        cancel: CancellationToken,
        alone: bool,
        reply: oneshot::Sender<Result<Admission, AgentError>>,
    },
    /// A waiting prompt was cancelled: it leaves the line.
    Leave(u64),
    /// `session/cancel`: the running turn and every prompt in line.
    Cancel,
    /// `interrupt_agent`: the running turn only (the line stays); whether
    /// one ran.
    Interrupt(oneshot::Sender<bool>),
    /// A turn's ticket was dropped.
    TurnOver,
    /// A running turn's step boundary: what it takes in (`steers`: the
    /// steered prompts too, else only late answers).
    Boundary {
        steers: bool,
        reply: oneshot::Sender<Boundary>,
    },
    /// Whether a prompt that will run waits in line (goal rounds give way).
    HasWaiting(oneshot::Sender<bool>),
    /// A late answer: recorded now if no turn runs, else at the next step.
    Late(String),
    /// Drop the model history if the session has been idle this long.
    EvictIdle(std::time::Duration, oneshot::Sender<bool>),
    /// A front end subscribes (replacing one of its kind); `prompter`: it
    /// is the one a turn's asks outlive the turn to (the latest prompt's).
    Subscribe {
        subscriber: Subscriber,
        prompter: bool,
    },
    /// The subscriber of this kind, made by `make` if there is none.
    Attach {
        kind: TypeId,
        make: Box<dyn FnOnce() -> Subscriber + Send>,
        reply: oneshot::Sender<Subscriber>,
    },
    /// The latest prompt's front end.
    Prompter(oneshot::Sender<Option<Subscriber>>),
    /// A fact between turns, shown to every subscriber.
    Record {
        data: EventData,
        reply: Option<oneshot::Sender<Result<Event, AgentError>>>,
    },
    /// A background job ended.
    JobEnded(crate::jobs::JobReport),
    /// Answered when no turn runs (closing waits for it).
    Idle(oneshot::Sender<()>),
    /// Answered at once: every command sent before it has been handled.
    Flush(oneshot::Sender<()>),
}

/// Starts the owner of `session` on the current runtime: its commands
/// are sent on the returned channel; it writes what others may read
/// without asking to `shared`.
pub(super) fn spawn(session: Weak<Session>, shared: Arc<Shared>) -> mpsc::UnboundedSender<Command> {
    let (tx, rx) = mpsc::unbounded_channel();
    let owner = Owner {
        session,
        shared,
        running: None,
        waiting: VecDeque::new(),
        next_id: 0,
        late: Vec::new(),
        subscribers: Vec::new(),
        prompter: None,
        idle: Vec::new(),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(owner.run(rx))),
        Err(_) => tracing::error!("a session was opened outside a runtime: it takes no commands"),
    }
    tx
}

struct Owner {
    session: Weak<Session>,
    shared: Arc<Shared>,
    /// The running turn's cancel token.
    running: Option<CancellationToken>,
    waiting: VecDeque<Entry>,
    next_id: u64,
    late: Vec<String>,
    subscribers: Vec<Subscriber>,
    /// The kind of the latest prompt's front end (its subscriber is the
    /// one of that kind).
    prompter: Option<TypeId>,
    /// Who waits for no turn to run.
    idle: Vec<oneshot::Sender<()>>,
}

impl Owner {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        while let Some(command) = rx.recv().await {
            let Some(session) = self.session.upgrade() else {
                break;
            };
            let prompt = matches!(command, Command::Prompt { .. });
            // A bug in one command (a record) is logged; the session keeps
            // its owner.
            let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.handle(&session, command);
            }));
            if let Err(payload) = handled {
                tracing::error!(session = %session.id, panic = %AgentError::panic_message(payload.as_ref()), "the session's owner failed a command");
            }
            if prompt {
                // Read: counted into the line or a ticket first (see
                // `Mailbox::busy`), or refused; panicked or not.
                self.shared.sent.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // The session is gone: whoever waits is let go (their replies drop).
    }

    fn handle(&mut self, session: &Arc<Session>, command: Command) {
        match command {
            Command::Prompt {
                steer,
                cancel,
                alone,
                reply,
            } => {
                let _ = reply.send(self.admit(session, steer, cancel, alone));
            }
            Command::Leave(id) => {
                // Dropping the entry drops its hand-off: the waiter sees
                // its wait end (cancelled).
                self.waiting.retain(|entry| entry.id != id);
                self.settle_load();
            }
            Command::Cancel => {
                if let Some(token) = &self.running {
                    token.cancel();
                }
                let drained: Vec<Entry> = self.waiting.drain(..).collect();
                self.settle_load();
                for entry in drained {
                    entry.cancel.cancel();
                }
            }
            Command::Interrupt(reply) => {
                let ran = match &self.running {
                    Some(token) if !token.is_cancelled() => {
                        token.cancel();
                        true
                    }
                    _ => false,
                };
                let _ = reply.send(ran);
            }
            Command::TurnOver => self.hand_on(session),
            Command::Boundary { steers, reply } => {
                let steered = if steers {
                    self.take_steered()
                } else {
                    Vec::new()
                };
                let _ = reply.send(Boundary {
                    late: std::mem::take(&mut self.late),
                    steered,
                });
            }
            Command::HasWaiting(reply) => {
                let _ = reply.send(
                    self.waiting
                        .iter()
                        .any(|entry| !entry.cancel.is_cancelled() && !entry.handoff.is_closed()),
                );
            }
            Command::Late(text) => {
                if self.running.is_some() {
                    self.late.push(text);
                } else {
                    let data = EventData::Instructions {
                        text,
                        files: Vec::new(),
                    };
                    if let Err(err) = session.record(data, &Fanout(&self.subscribers)) {
                        tracing::warn!(session = %session.id, %err, "a late answer was not recorded");
                    }
                }
            }
            Command::EvictIdle(idle, reply) => {
                let evicted = self.running.is_none()
                    && self.waiting.is_empty()
                    && session.evict_if_idle(idle);
                let _ = reply.send(evicted);
            }
            Command::Subscribe {
                subscriber,
                prompter,
            } => {
                if prompter {
                    self.prompter = Some(subscriber.kind);
                }
                self.subscribe(subscriber);
            }
            Command::Attach { kind, make, reply } => {
                let found = self.subscribers.iter().find(|s| s.kind == kind).cloned();
                let found = found.unwrap_or_else(|| {
                    let made = make();
                    self.subscribe(made.clone());
                    made
                });
                let _ = reply.send(found);
            }
            Command::Prompter(reply) => {
                let prompter = self
                    .prompter
                    .and_then(|kind| self.subscribers.iter().find(|s| s.kind == kind))
                    .cloned();
                let _ = reply.send(prompter);
            }
            Command::Record { data, reply } => {
                let recorded = session.record(data, &Fanout(&self.subscribers));
                match reply {
                    Some(reply) => drop(reply.send(recorded)),
                    None => {
                        if let Err(err) = recorded {
                            tracing::debug!(session = %session.id, %err, "not recorded between turns");
                        }
                    }
                }
            }
            Command::JobEnded(report) => {
                let ended = super::wakeups::Ended::of(session, &report);
                let data = EventData::JobEnd {
                    job_id: report.job_id,
                    call_id: report.call_id,
                    status: report.status,
                    failed: report.failed,
                    summary: report.summary,
                    view: report.view,
                    usage: report.usage,
                };
                if let Err(err) = session.record(data, &Fanout(&self.subscribers)) {
                    tracing::debug!(session = %session.id, %err, "job/end not recorded");
                }
                session.wakeups.job_ended(session, ended);
            }
            Command::Flush(reply) => {
                let _ = reply.send(());
            }
            Command::Idle(reply) => {
                if self.running.is_none() {
                    let _ = reply.send(());
                } else {
                    self.idle.push(reply);
                }
            }
        }
    }

    fn subscribe(&mut self, subscriber: Subscriber) {
        match self
            .subscribers
            .iter_mut()
            .find(|s| s.kind == subscriber.kind)
        {
            Some(slot) => *slot = subscriber,
            None => self.subscribers.push(subscriber),
        }
        *self
            .shared
            .shown
            .write()
            .unwrap_or_else(PoisonError::into_inner) = self.subscribers.clone().into();
    }

    /// The line's length every reader sees (tickets count themselves).
    fn settle_load(&self) {
        self.shared
            .waiting
            .store(self.waiting.len(), Ordering::Release);
    }

    fn admit(
        &mut self,
        session: &Arc<Session>,
        steer: Option<Vec<UserContent>>,
        cancel: CancellationToken,
        alone: bool,
    ) -> Result<Admission, AgentError> {
        // Cancelled since it was sent (`session/cancel` does not reach a
        // prompt before it is read; closing does): answered `cancelled`,
        // as in line.
        if !alone && cancel.is_cancelled() {
            return Ok(Admission::Cancelled);
        }
        if session.closed.is_cancelled() {
            return Err(AgentError::SessionClosed(session.id.to_string()));
        }
        if self.running.is_none() && self.waiting.is_empty() {
            return Ok(Admission::Now(self.ticket(session, cancel)));
        }
        if alone {
            return Err(AgentError::SessionBusy(format!(
                "session {} is running a prompt; wait for it to finish or cancel it first",
                session.id
            )));
        }
        if self.waiting.len() >= LIMIT {
            return Err(AgentError::SessionBusy(format!(
                "session {} already has {LIMIT} prompts waiting behind its running turn; wait for them or cancel",
                session.id
            )));
        }
        self.next_id += 1;
        let id = self.next_id;
        let (handoff, receiver) = oneshot::channel();
        self.waiting.push_back(Entry {
            id,
            steer,
            cancel: cancel.clone(),
            handoff,
        });
        self.settle_load();
        Ok(Admission::Waiting(Waiting::new(
            session.clone(),
            id,
            cancel,
            receiver,
        )))
    }

    /// The turn, for a prompt cancelled by `cancel`.
    fn ticket(&mut self, session: &Arc<Session>, cancel: CancellationToken) -> TurnTicket {
        self.running = Some(cancel.clone());
        session.mailbox.ticket_made();
        TurnTicket {
            session: session.clone(),
            cancel,
            armed: true,
        }
    }

    /// The steered prompts waiting now, taken out of line.
    fn take_steered(&mut self) -> Vec<(Vec<UserContent>, Joined)> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.waiting.len());
        for entry in self.waiting.drain(..) {
            match entry.steer {
                Some(content) if !entry.cancel.is_cancelled() => {
                    taken.push((content, Joined(entry.handoff)));
                }
                steer => kept.push_back(Entry { steer, ..entry }),
            }
        }
        self.waiting = kept;
        self.settle_load();
        taken
    }

    /// A ticket ended: the turn goes to the first prompt still waiting, or
    /// is released (and whoever waits for that is told).
    fn hand_on(&mut self, session: &Arc<Session>) {
        self.running = None;
        while let Some(entry) = self.waiting.pop_front() {
            if entry.cancel.is_cancelled() {
                continue;
            }
            let ticket = self.ticket(session, entry.cancel);
            match entry.handoff.send(Handoff::Turn(ticket)) {
                Ok(()) => {
                    self.settle_load();
                    return;
                }
                // The waiter is gone: the next one.
                Err(Handoff::Turn(mut ticket)) => {
                    ticket.armed = false;
                    self.running = None;
                }
                Err(Handoff::Joined(_)) => self.running = None,
            }
        }
        self.settle_load();
        for waiter in self.idle.drain(..) {
            let _ = waiter.send(());
        }
    }
}

/// Every subscriber, as one front end: what it is told, each is told.
pub(super) struct Fanout<'a>(pub(super) &'a [Subscriber]);

impl Frontend for Fanout<'_> {
    fn emit(&self, output: Output<'_>) {
        let Some((last, rest)) = self.0.split_last() else {
            return;
        };
        for subscriber in rest {
            emit_to(subscriber, output.clone());
        }
        emit_to(last, output);
    }
}

/// A subscriber's `emit` that panics (a bug) costs that subscriber this
/// output, not the others theirs nor the caller its work (a job's end is
/// still counted for wake-ups).
fn emit_to(subscriber: &Subscriber, output: Output<'_>) {
    let emitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        subscriber.frontend.emit(output);
    }));
    if let Err(payload) = emitted {
        tracing::error!(panic = %AgentError::panic_message(payload.as_ref()), "a front end failed to show an update");
    }
}

#[cfg(test)]
mod tests;
