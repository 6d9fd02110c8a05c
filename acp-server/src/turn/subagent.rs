//! `subagent`: a child session in this process. It has its own log (its
//! header names the parent session and call), a fresh conversation whose
//! first user message is the task, the parent's mode, model and permission
//! rules (recorded in its log), the parent's language and MCP servers, and
//! the same tools but `subagent` past `[subagents] max_depth`. Its turn
//! runs here, through a [`Relay`]: the editor sees the parent's one call
//! stay in progress while the child's steps show on it as short lines;
//! the child's permission asks go to the parent's editor labelled with the
//! task; its questions and plans reach no one (it says so in its answer).
//! Its final reply is the call's result, its tokens the call's usage.
//! Cancelling the parent's turn cancels the child's; a child that fails is
//! a failed call. With `run_in_background` it runs as a job instead.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use dsh_protocol::log::{ConfigKey, EventData, StopReason, SubagentOrigin};
use dsh_protocol::model::{ToolCallRequest, Usage};
use dsh_protocol::tool::{ToolContent, ToolKind, ToolOutcome, ToolStatus, ToolView};
use dsh_protocol::{ErrorCode, ToolCallId, UserContent};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{Delegation, Turn};
use crate::error::AgentError;
use crate::frontend::{Ask, ClientCaps, Frontend, Output, SubagentEvent, Transient};
use crate::model::Provider;
use crate::permission::{Answer, Question};
use crate::session::Session;
use crate::tools::SubagentArgs;

/// The steps the editor is shown, at most (older ones are counted).
const SHOWN_STEPS: usize = 12;
/// How much of a step's line is shown.
const LINE_CHARS: usize = 120;
/// How much of the final answer the call's view shows.
const VIEW_ANSWER_BYTES: usize = 4 * 1024;
/// How much of the final answer the model is given.
const RESULT_BYTES: usize = 64 * 1024;
/// How long a child's turn may take to stop once cancelled.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Turn<'_> {
    /// Runs a `subagent` call: the child in the foreground (the call's
    /// result is its answer), or as a background job.
    pub(super) async fn delegate(
        &self,
        call: &ToolCallRequest,
        args: &SubagentArgs,
    ) -> ToolOutcome {
        let description = present_description(args);
        if args.run_in_background {
            return self.delegate_in_background(call, args, description);
        }
        let child = match start_child(self.session, &call.id, &description).await {
            Ok(child) => child,
            Err(error) => {
                return ToolOutcome::failed(
                    error.code(),
                    format!("The subagent could not start: {error}"),
                )
            }
        };
        // Its changes are this turn's: `/undo` of this turn undoes them.
        let delegation = Delegation {
            checkpoint: Some((self.capture.clone(), self.checkpoint_store())),
            project_hooks: self.hooks.for_child(false),
        };
        let relay = Relay::new(
            self.frontend,
            self.session.clone(),
            &child,
            (call.id.clone(), description),
            None,
            self.cancel.clone(),
        );
        let ran = run_child(
            &child,
            self.provider.clone(),
            &args.prompt,
            &relay,
            self.cancel,
            delegation,
        )
        .await;
        child.close(CLOSE_GRACE).await;
        relay.outcome(ran, &child)
    }

    /// `run_in_background`: the child runs as a job of the parent's (within
    /// its limits, checked before the child exists); its steps are the
    /// job's output, its answer ends it (`job/end` carries it and its
    /// tokens). `job_kill`, a stricter mode or the parent closing cancels
    /// it. Its changes are its own turn's (it outlives this one).
    fn delegate_in_background(
        &self,
        call: &ToolCallRequest,
        args: &SubagentArgs,
        description: String,
    ) -> ToolOutcome {
        let Some(outlet) = self.session.outlet() else {
            return ToolOutcome::failed(
                ErrorCode::Internal,
                "no front end to report a background subagent to",
            );
        };
        let spec = crate::jobs::JobSpec {
            call_id: call.id.clone(),
            command: description.clone(),
            description: description.clone(),
            mode: self.session.mode(),
            kind: crate::jobs::JobKind::Subagent,
            tool: crate::tools::Tool::Subagent.name(),
        };
        let (parent, provider, prompt, call_id) = (
            self.session.clone(),
            self.provider.clone(),
            args.prompt.clone(),
            call.id.clone(),
        );
        // The hooks this turn read, without its one-time answer (the
        // child outlives the turn).
        let project_hooks = self.hooks.for_child(true);
        let started = self.session.jobs.start_task(
            spec,
            move |job| {
                Box::pin(async move {
                    let child = match start_child(&parent, &call_id, &description).await {
                        Ok(child) => child,
                        Err(error) => {
                            let why = format!("the subagent could not start: {error}");
                            job.feed(&format!("{why}\n"));
                            return (crate::jobs::End::Failed(why), None);
                        }
                    };
                    // `job_kill`, a stricter mode, or the parent closing
                    // (which kills its jobs) cancels the child's turn.
                    let cancel = job.killed().clone();
                    let relay = Relay::new(
                        &*outlet,
                        parent.clone(),
                        &child,
                        (call_id, description),
                        Some(job),
                        cancel.clone(),
                    );
                    let delegation = Delegation {
                        checkpoint: None,
                        project_hooks,
                    };
                    let ran =
                        run_child(&child, provider, &prompt, &relay, &cancel, delegation).await;
                    child.close(CLOSE_GRACE).await;
                    relay.job_end(ran, &child)
                }) as BoxFuture<'static, _>
            },
            self.session.on_job_end(),
        );
        match started {
            Err(error) => ToolOutcome::failed(ErrorCode::Internal, error),
            Ok(job) => crate::tools::job_started(
                &job,
                "the subagent as background job",
                "its progress and answer",
            ),
        }
    }
}

fn present_description(args: &SubagentArgs) -> String {
    dsh_protocol::content::visible_title(args.described(), 80)
}

/// Creates the child's log and session ([`seed`]); it follows the
/// parent's mode while it lives.
async fn start_child(
    parent: &Arc<Session>,
    call_id: &ToolCallId,
    description: &str,
) -> Result<Arc<Session>, AgentError> {
    let config = parent.config().clone();
    let mut header =
        crate::session::new_header(parent.header.cwd.clone(), parent.header.roots.clone());
    header.subagent_of = Some(SubagentOrigin {
        session: parent.id.clone(),
        call_id: call_id.clone(),
        description: description.to_owned(),
        depth: parent.depth() + 1,
    });
    let store = crate::store::SessionStore::new(config.sessions_dir());
    let created = header.clone();
    let log = tokio::task::spawn_blocking(move || store.create(&created))
        .await
        .map_err(|err| AgentError::bug("creating a subagent's log", &err))??;
    // Its step limit is never above the parent's; it starts no background
    // jobs of its own (they would multiply the session's budgets).
    let child_config = Arc::new(crate::config::Config {
        max_steps: config
            .subagents
            .max_steps
            .map_or(config.max_steps, |steps| steps.clamp(1, config.max_steps)),
        jobs: crate::jobs::JobSettings {
            enabled: false,
            ..config.jobs.clone()
        },
        ..(*config).clone()
    });
    let child = Session::new(
        child_config,
        header,
        crate::session::state::SessionState::new(&config.choices),
        log,
        &parent.closing(),
        parent.residency(),
    );
    child.borrow_servers(parent);
    parent.adopt(&child);
    if let Err(error) = seed(&child, parent, description) {
        // Not a session anyone can use: closed, its log left as it is.
        child.close(CLOSE_GRACE).await;
        return Err(error);
    }
    Ok(child)
}

/// A child's first events: the parent's mode, model (or `[subagents]
/// model`), reasoning effort, permission rules and consents to the
/// project's hooks, then its title (the description: no title request).
fn seed(child: &Session, parent: &Session, description: &str) -> Result<(), AgentError> {
    let config = parent.config();
    let (settings, rules, consents) = {
        let locked = parent.locked();
        (
            locked.state.settings.clone(),
            locked.state.rules.clone(),
            locked
                .state
                .hook_consents
                .values()
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    let model = config
        .subagents
        .model
        .clone()
        .filter(|model| config.choices.model(model).is_some())
        .unwrap_or(settings.model);
    let mut seed = vec![
        (ConfigKey::Mode, settings.mode.as_str().to_owned()),
        (ConfigKey::Model, model),
        (
            ConfigKey::ThoughtLevel,
            settings.thought_level.as_str().to_owned(),
        ),
    ];
    // A child of a session whose web switch is off stays off the web.
    if !settings.web {
        seed.push((
            ConfigKey::Web,
            crate::settings::switch_value(false).to_owned(),
        ));
    }
    let nobody = crate::frontend::Nobody;
    for (key, value) in seed {
        child.record(EventData::Config { key, value }, &nobody)?;
    }
    for rule in rules {
        child.record(EventData::PermissionRule(rule), &nobody)?;
    }
    for consent in consents {
        child.record(EventData::HookConsent(consent), &nobody)?;
    }
    child.record(
        EventData::Title {
            title: description.to_owned(),
            usage: None,
        },
        &nobody,
    )?;
    Ok(())
}

/// Runs the child's one turn; `cancel` (the parent's) cancels it, and the
/// child's turn still ends in its log. Boxed, with a named type: a turn
/// runs tools, and this is one of them.
fn run_child<'a>(
    child: &'a Arc<Session>,
    provider: Arc<Provider>,
    prompt: &'a str,
    relay: &'a Relay<'_>,
    cancel: &'a CancellationToken,
    delegation: Delegation,
) -> BoxFuture<'a, Result<StopReason, AgentError>> {
    Box::pin(async move {
        let ticket = child.begin_turn()?;
        let content = vec![UserContent::text(prompt)];
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
struct Relay<'a> {
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
    fn new(
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
    fn outcome(&self, ran: Result<StopReason, AgentError>, child: &Session) -> ToolOutcome {
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
    fn job_end(
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
