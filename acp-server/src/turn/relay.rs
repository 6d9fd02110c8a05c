//! A child session's turn as its parent sees it: [`run_child`] runs it,
//! and [`Relay`], its front end, turns its recorded events into lines on
//! the parent's call (or a background job's output), sends its asks to
//! the parent's editor, and sums up its answer and tokens — for a
//! foreground `subagent` call (`subagent.rs`) and for each turn of a
//! continuable child (`agents.rs`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use dsh_protocol::log::{EventData, StopReason};
use dsh_protocol::model::Usage;
use dsh_protocol::tool::{ToolContent, ToolKind, ToolOutcome, ToolStatus, ToolView};
use dsh_protocol::{ErrorCode, ToolCallId, UserContent};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Delegation;
use crate::error::AgentError;
use crate::frontend::{Ask, ClientCaps, Frontend, Output, SubagentEvent, Transient};
use crate::model::Provider;
use crate::permission::{Answer, Question};
use crate::session::{Session, TurnTicket};

/// The steps the editor is shown, at most (older ones are counted).
const SHOWN_STEPS: usize = 12;
/// How much of a step's line is shown.
const LINE_CHARS: usize = 120;
/// How much of the final answer the call's view shows.
const VIEW_ANSWER_BYTES: usize = 4 * 1024;
/// How much of the final answer the model is given.
const RESULT_BYTES: usize = 64 * 1024;

/// Runs a turn of the child (its `ticket`) on `content`; `cancel` (the
/// parent's turn's, or the job's) cancels it, and the child's turn still
/// ends in its log. Boxed, with a named type: a turn runs tools, and this
/// is one of them.
pub(super) fn run_child<'a>(
    ticket: TurnTicket,
    provider: Arc<Provider>,
    content: Vec<UserContent>,
    relay: &'a Relay<'_>,
    cancel: &'a CancellationToken,
    delegation: Delegation,
) -> BoxFuture<'a, Result<StopReason, AgentError>> {
    Box::pin(async move {
        let turn = super::run_turn(&ticket, provider, content, relay, Some(delegation));
        tokio::pin!(turn);
        tokio::select! {
            stop = &mut turn => stop,
            () = cancel.cancelled() => {
                ticket.cancel_token().cancel();
                turn.await
            }
        }
    })
}

/// What the child has done, as the editor is shown it.
#[derive(Default)]
struct Progress {
    /// The latest steps' lines.
    lines: VecDeque<String>,
    /// Steps no longer shown.
    hidden: usize,
    /// Its latest reply's text.
    answer: String,
    /// The tokens it spent.
    usage: Option<Usage>,
}

/// The child's front end: its recorded events become lines on the
/// parent's call; asks go to the parent's editor.
pub(super) struct Relay<'a> {
    /// The parent's front end.
    parent: &'a dyn Frontend,
    /// The parent session (a rule the user gives the child is its too).
    session: Arc<Session>,
    /// The parent's `subagent` call.
    call_id: ToolCallId,
    description: String,
    progress: Mutex<Progress>,
    /// Running in the background: the lines are the job's output too.
    job: Option<Arc<crate::jobs::Job>>,
    /// What a cancelled prompt of the child's cancels: the parent's turn
    /// (the job, in the background).
    cancel: CancellationToken,
    /// The child session.
    child: dsh_protocol::SessionId,
    /// The client shows subagents as sessions of their own: the child's
    /// updates go there, not as lines on the parent's call.
    native: bool,
}

impl<'a> Relay<'a> {
    /// The relay of `child`, for the parent's `call` (id, description);
    /// a client that shows subagents as sessions is told of it now.
    pub(super) fn new(
        parent: &'a dyn Frontend,
        session: Arc<Session>,
        child: &Session,
        call: (ToolCallId, String),
        job: Option<Arc<crate::jobs::Job>>,
        cancel: CancellationToken,
    ) -> Relay<'a> {
        let (call_id, description) = call;
        let relay = Relay {
            native: parent.caps().subagents,
            parent,
            session,
            call_id,
            description,
            progress: Mutex::default(),
            job,
            cancel,
            child: child.id.clone(),
        };
        relay.native(SubagentEvent::Started {
            title: relay.description.clone(),
            cwd: child.header.cwd.clone(),
        });
        relay
    }

    /// Tells a client that shows subagents as sessions.
    fn native(&self, event: SubagentEvent) {
        if self.native {
            self.parent.emit(Output::Transient(Transient::Subagent {
                call_id: self.call_id.clone(),
                session: self.child.clone(),
                event,
            }));
        }
    }
}

impl Relay<'_> {
    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The child's latest reply that ended its work.
    pub(super) fn answer(&self) -> String {
        self.progress().answer.clone()
    }

    /// A step, shown as a line.
    fn step(&self, line: String) {
        if let Some(job) = &self.job {
            job.feed(&format!("{line}\n"));
        }
        let view = {
            let mut progress = self.progress();
            progress.lines.push_back(line);
            if progress.lines.len() > SHOWN_STEPS {
                progress.lines.pop_front();
                progress.hidden += 1;
            }
            self.view(&progress)
        };
        self.show(view);
    }

    fn show(&self, view: ToolView) {
        // A client that shows the child as a session shows its steps there.
        if self.native {
            return;
        }
        self.parent.emit(Output::Transient(Transient::ToolProgress {
            call_id: self.call_id.clone(),
            view,
        }));
    }

    /// The call's view: the steps, then the answer.
    fn view(&self, progress: &Progress) -> ToolView {
        let mut text = String::new();
        if progress.hidden > 0 {
            text.push_str(&format!("… {} earlier steps\n", progress.hidden));
        }
        for line in &progress.lines {
            text.push_str("- ");
            text.push_str(line);
            text.push('\n');
        }
        if !progress.answer.trim().is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(dsh_protocol::content::head_bytes(
                progress.answer.trim(),
                VIEW_ANSWER_BYTES,
            ));
            if progress.answer.trim().len() > VIEW_ANSWER_BYTES {
                text.push_str(" …");
            }
        }
        ToolView {
            title: self.description.clone(),
            kind: Some(ToolKind::Think),
            locations: Vec::new(),
            content: if text.is_empty() {
                Vec::new()
            } else {
                vec![ToolContent::Text { text }]
            },
        }
    }

    /// What the model is told of the child's `ran` turn, and the view.
    pub(super) fn outcome(
        &self,
        ran: Result<StopReason, AgentError>,
        child: &Session,
    ) -> ToolOutcome {
        self.native(SubagentEvent::Ended);
        let progress = self.progress();
        let view = self.view(&progress);
        let whole = progress.answer.trim();
        let cut = dsh_protocol::content::head_bytes(whole, RESULT_BYTES);
        let answer = if cut.len() < whole.len() {
            format!(
                "{cut}\n[… the answer was cut here: {} of its {} bytes]",
                cut.len(),
                whole.len()
            )
        } else {
            cut.to_owned()
        };
        let answer = answer.as_str();
        let mut outcome = match ran {
            Ok(StopReason::Cancelled) => ToolOutcome::failed(
                ErrorCode::ToolAborted,
                "The subagent was cancelled before it finished.",
            ),
            Ok(stop) if answer.is_empty() => ToolOutcome::failed(
                ErrorCode::SubagentNoAnswer,
                format!(
                    "The subagent ended ({}) without an answer.",
                    stop_words(stop)
                ),
            ),
            Ok(StopReason::EndTurn) => ToolOutcome::ok(answer.to_owned(), ToolView::default()),
            Ok(stop) => ToolOutcome::ok(
                format!(
                    "{answer}\n\n[The subagent stopped before it finished: {}.]",
                    stop_words(stop)
                ),
                ToolView::default(),
            ),
            Err(error) => {
                ToolOutcome::failed(error.code(), format!("The subagent failed: {error}"))
            }
        };
        let failed = outcome.error.is_some();
        outcome.view = ToolView {
            content: {
                let mut content = view.content;
                if failed {
                    content.push(ToolContent::Text {
                        text: outcome.output.clone(),
                    });
                }
                content.push(ToolContent::Text {
                    text: format!("Subagent session: {}", child.id),
                });
                content
            },
            ..view
        };
        outcome.usage = progress.usage;
        outcome
    }

    /// How a background child ended, for its job: the answer is its last
    /// output.
    pub(super) fn job_end(
        &self,
        ran: Result<StopReason, AgentError>,
        child: &Session,
    ) -> (crate::jobs::End, Option<Usage>) {
        let outcome = self.outcome(ran, child);
        if let Some(job) = &self.job {
            job.feed(&format!("\n{}\n", outcome.output));
        }
        let end = match &outcome.error {
            None => crate::jobs::End::Done,
            Some(error) if error.code == ErrorCode::ToolAborted => crate::jobs::End::Killed(
                self.job
                    .as_ref()
                    .and_then(|job| job.kill_reason())
                    .unwrap_or_else(|| "cancelled".to_owned()),
            ),
            Some(error) => crate::jobs::End::Failed(error.message.clone()),
        };
        (end, outcome.usage)
    }
}

fn stop_words(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "it finished",
        StopReason::MaxTokens => "its reply hit the output limit",
        StopReason::MaxTurnRequests => "it reached its step limit",
        StopReason::Refusal => "the model refused",
        StopReason::Cancelled => "it was cancelled",
    }
}

impl Frontend for Relay<'_> {
    fn emit(&self, output: Output<'_>) {
        let event = match output {
            Output::Recorded { event, updates } => {
                for update in updates {
                    self.native(SubagentEvent::Update(update));
                }
                event
            }
            // Its streamed text only where it is a session of its own; its
            // transient updates (commands offered, tools running) are its
            // own.
            Output::Delta(delta) => return self.native(SubagentEvent::Update(delta.into_update())),
            Output::Replayed(_) | Output::Transient(_) => return,
        };
        match &event.data {
            EventData::ToolCall { view, .. } => {
                self.step(dsh_protocol::content::visible_title(
                    &view.title,
                    LINE_CHARS,
                ));
            }
            EventData::ToolResult {
                status: ToolStatus::Failed,
                error,
                ..
            } => {
                let why = error
                    .as_ref()
                    .map(|error| error.message.lines().next().unwrap_or("").to_owned())
                    .unwrap_or_default();
                self.step(format!(
                    "  failed: {}",
                    dsh_protocol::content::visible_title(&why, LINE_CHARS)
                ));
            }
            EventData::AssistantMessage {
                text,
                usage,
                tool_calls,
                ..
            } => {
                let view = {
                    let mut progress = self.progress();
                    if let Some(usage) = usage {
                        progress.usage.get_or_insert_with(Usage::default).add(usage);
                    }
                    // Only a reply that ends its work is its answer.
                    progress.answer = match tool_calls.is_empty() {
                        true => text.clone(),
                        false => String::new(),
                    };
                    (!progress.answer.trim().is_empty()).then(|| self.view(&progress))
                };
                if let Some(view) = view {
                    self.show(view);
                }
            }
            // What dsh tells the user about the child (no sandbox here, a
            // hook that failed) is a line too.
            EventData::Notice { text } => {
                let first = text.lines().next().unwrap_or("");
                self.step(format!(
                    "note: {}",
                    dsh_protocol::content::visible_title(first, LINE_CHARS)
                ));
            }
            // What the user allows or refuses for good in a child's
            // prompt holds for the parent too: a rule, or an answer about
            // the project's hooks (for that content).
            EventData::PermissionRule(_) | EventData::HookConsent(_) => {
                if let Err(error) = self.session.record(event.data.clone(), self.parent) {
                    tracing::warn!(%error, "a subagent's lasting answer was not given to its parent");
                }
            }
            _ => {}
        }
    }

    fn caps(&self) -> ClientCaps {
        // A terminal would be embedded in a call the editor never saw.
        ClientCaps {
            terminal: false,
            ..self.parent.caps()
        }
    }

    fn ask(&self, mut ask: Ask) -> BoxFuture<'_, Answer> {
        match ask.question {
            // On the parent's call (the one the editor knows), as the call
            // is (its kind, its title), labelled with the task; the call's
            // own view is shown again after the answer.
            Question::Permission(_) => {
                ask.title = format!("Subagent: {}", ask.title);
                ask.call_id = self.call_id.clone();
                ask.content.insert(
                    0,
                    ToolContent::Text {
                        text: format!("Asked for the subagent's task: {}", self.description),
                    },
                );
                Box::pin(async move {
                    let answer = self.parent.ask(ask).await;
                    // A cancelled prompt cancels the turn it belongs to.
                    if matches!(answer, Answer::Cancelled) {
                        self.cancel.cancel();
                    }
                    let view = self.view(&self.progress());
                    self.show(view);
                    answer
                })
            }
            // A subagent asks no one questions and submits no plans: it
            // puts them in its answer.
            Question::Plan | Question::User(_) => Box::pin(async { Answer::Unavailable }),
        }
    }

    fn read_text_file<'b>(
        &'b self,
        path: &'b std::path::Path,
    ) -> BoxFuture<'b, Result<String, String>> {
        self.parent.read_text_file(path)
    }

    fn write_text_file<'b>(
        &'b self,
        path: &'b std::path::Path,
        content: String,
    ) -> BoxFuture<'b, Result<(), String>> {
        self.parent.write_text_file(path, content)
    }
}
