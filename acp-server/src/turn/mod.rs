//! A turn: prompt → model → (tools) → model … until the model stops.
//!
//! Every fact is recorded before it is shown ([`crate::session::Session::record`]):
//! the title and the prompt and `turn/start` first, each model reply as one
//! `assistant/message` (the delivered prefix, marked interrupted, when the
//! stream is cut), tool calls and results, and `turn/end` last. Streaming
//! deltas go to the editor as they arrive. [`step`] runs one model call;
//! [`tools`] runs the calls it asked for.

mod agents;
mod compaction;
mod extensions;
mod goal;
mod hooks;
mod instructions;
mod relay;
mod reminders;
mod step;
mod subagent;
mod title;
mod tools;
mod undo;

use std::sync::Arc;

use dsh_protocol::error::ErrorInfo;
use dsh_protocol::log::{ConfigKey, EventData, StopReason};
use dsh_protocol::ErrorCode;
use dsh_protocol::UserContent;
use tracing::Instrument;

use crate::config::Config;
use crate::context::commands::Invocation;
use crate::error::AgentError;
use crate::frontend::Frontend;
use crate::model::Provider;
use crate::session::{Session, TurnTicket};

/// One running turn: what its steps and tool calls share.
struct Turn<'a> {
    session: &'a Arc<Session>,
    config: &'a Arc<Config>,
    provider: Arc<Provider>,
    cancel: &'a tokio_util::sync::CancellationToken,
    frontend: &'a dyn Frontend,
    number: u64,
    /// Paths the step's tools touched (for nested instructions).
    touched: std::sync::Mutex<Touched>,
    /// The turn's chain of identical tool calls ([`reminders`]).
    repeats: std::sync::Mutex<crate::tools::Repeats>,
    /// What the turn's changes replaced ([`crate::checkpoint`]).
    capture: Arc<std::sync::Mutex<crate::checkpoint::TurnCapture>>,
    /// Steered prompts the turn took in: answered when it ends.
    joined: std::sync::Mutex<Vec<crate::session::Joined>>,
    /// The session's skills and custom commands ([`extensions`]).
    found: crate::session::extensions::Found,
    /// The turn's hooks ([`hooks`]).
    hooks: hooks::TurnHooks,
    /// A subagent's turn: what it shares with its parent's.
    delegated: Option<Delegation>,
    /// Who its prompt is from: the person, or dsh (a goal round).
    source: dsh_protocol::log::MessageSource,
    /// The person's own words were steered into it: from then on it acts
    /// on their behalf too ([`goal`]'s authority).
    person_steered: std::sync::atomic::AtomicBool,
}

/// What a subagent's turn shares with the parent turn that started it.
pub(super) struct Delegation {
    /// The parent turn's capture and checkpoint store: the child's changes
    /// are the parent turn's, and `/undo` of it undoes them (a background
    /// child, which outlives the turn, keeps its own: `None`).
    checkpoint: Option<(
        Arc<std::sync::Mutex<crate::checkpoint::TurnCapture>>,
        crate::checkpoint::Store,
    )>,
    /// The parent turn's read of the project's hooks (the child never
    /// reads the file) and, in the foreground, its one-time answer.
    project_hooks: Arc<hooks::ProjectRead>,
}

/// Paths tools of the running step worked on.
#[derive(Default)]
struct Touched {
    /// The paths each call named, until its result.
    planned: std::collections::HashMap<dsh_protocol::ToolCallId, Vec<std::path::PathBuf>>,
    /// Paths of calls that completed.
    paths: Vec<std::path::PathBuf>,
}

/// How one step ended.
enum Next {
    /// The turn is over.
    Stop(StopReason),
    /// The model asked for tools; the next step follows their results.
    Continue,
}

/// Runs one prompt to completion in the ticket's session.
///
/// # Errors
/// A log write failure, or a model failure (after the partial reply was
/// recorded and `turn/end` too).
pub(crate) async fn run(
    ticket: &TurnTicket,
    provider: Arc<Provider>,
    content: Vec<UserContent>,
    frontend: &dyn Frontend,
) -> Result<StopReason, AgentError> {
    run_turn(ticket, provider, content, frontend, None).await
}

/// A turn dsh starts on its own: a goal round (`source` goal: the goal's
/// continuation, [`crate::agent`]) or a wake-up (`source` wakeup: the
/// notice of background work that ended, [`crate::agent::wakeups`]). Its
/// prompt is dsh's, never a slash command.
pub(crate) async fn run_from(
    ticket: &TurnTicket,
    provider: Arc<Provider>,
    content: Vec<UserContent>,
    frontend: &dyn Frontend,
    source: dsh_protocol::log::MessageSource,
) -> Result<StopReason, AgentError> {
    run_as(ticket, (provider, content), frontend, None, source).await
}

/// [`run`], for a subagent's turn when `delegated`: its prompt is the
/// model's task (never a slash command), and it runs no prompt, session or
/// stop hooks (the parent's turn does).
async fn run_turn(
    ticket: &TurnTicket,
    provider: Arc<Provider>,
    content: Vec<UserContent>,
    frontend: &dyn Frontend,
    delegated: Option<Delegation>,
) -> Result<StopReason, AgentError> {
    use dsh_protocol::log::MessageSource;
    run_as(
        ticket,
        (provider, content),
        frontend,
        delegated,
        MessageSource::User,
    )
    .await
}

/// [`run_turn`] with the prompt's source.
async fn run_as(
    ticket: &TurnTicket,
    (provider, content): (Arc<Provider>, Vec<UserContent>),
    frontend: &dyn Frontend,
    delegated: Option<Delegation>,
    source: dsh_protocol::log::MessageSource,
) -> Result<StopReason, AgentError> {
    let session = &ticket.session;
    let (number, first) = {
        let locked = session.locked();
        (locked.state.turns + 1, locked.state.title.is_none())
    };
    let span = tracing::info_span!("turn", session = %session.id, turn = number);
    let capture = delegated
        .as_ref()
        .and_then(|delegated| delegated.checkpoint.as_ref())
        .map_or_else(Arc::default, |(capture, _)| capture.clone());
    let hooks = delegated
        .as_ref()
        .map_or_else(hooks::TurnHooks::default, |delegated| {
            hooks::TurnHooks::delegated(delegated.project_hooks.clone())
        });
    let parse = delegated.is_none() && source.is_user();
    let turn = Turn {
        session,
        config: session.config(),
        provider,
        cancel: &ticket.cancel,
        frontend,
        number,
        touched: std::sync::Mutex::default(),
        repeats: std::sync::Mutex::default(),
        capture,
        joined: std::sync::Mutex::default(),
        found: extensions::look(session, frontend).await,
        hooks,
        delegated,
        source,
        person_steered: std::sync::atomic::AtomicBool::new(false),
    };
    let title = first.then(|| UserContent::title_of(&content)).flatten();
    let command = parse
        .then(|| crate::context::commands::parse(&content))
        .flatten();
    match command {
        Some(Invocation::Compact { focus }) => {
            // Not a turn: nothing is added to the conversation but the
            // summary itself.
            let focus = Some(focus.as_str()).filter(|focus| !focus.is_empty());
            turn.compact(compaction::Why::Asked, focus)
                .instrument(span)
                .await?;
            session.sync();
            Ok(if ticket.cancel.is_cancelled() {
                StopReason::Cancelled
            } else {
                StopReason::EndTurn
            })
        }
        // The title is what the user typed ("/init"), not the prompt.
        Some(Invocation::Init { prompt }) => turn.run(prompt, title).instrument(span).await,
        Some(Invocation::Plan { task }) => {
            turn.set(ConfigKey::Mode, dsh_protocol::Mode::Plan.as_str())?;
            if task.is_empty() {
                turn.notice("Plan mode is on: I will study the code and propose a plan for you to approve before changing anything. Tell me the task.")?;
                return Ok(StopReason::EndTurn);
            }
            turn.run(task, title).instrument(span).await
        }
        Some(Invocation::Set { key, value }) => {
            turn.set(key, &value)?;
            Ok(StopReason::EndTurn)
        }
        Some(Invocation::Undo) => {
            turn.undo().instrument(span).await?;
            session.sync();
            Ok(StopReason::EndTurn)
        }
        Some(Invocation::Fork) => {
            let parent = session.clone();
            let forked = tokio::task::spawn_blocking(move || parent.fork())
                .await
                .map_err(|err| AgentError::bug("fork", &err))??;
            turn.notice(&format!(
                "Forked this conversation, up to its last completed turn, into session `{forked}`. Open it from your editor's session list (or `dsh sdk`'s session/resume) to go on there; this one is unchanged."
            ))?;
            Ok(StopReason::EndTurn)
        }
        Some(Invocation::Skills) => {
            turn.list_skills()?;
            Ok(StopReason::EndTurn)
        }
        Some(Invocation::Goal { args }) => turn.goal_command(&args),
        Some(Invocation::Help) => {
            turn.notice(&crate::context::commands::help())?;
            Ok(StopReason::EndTurn)
        }
        None => {
            // A custom command or a skill runs as a normal turn.
            let content = match parse {
                true => turn.prompt_from_files(&content).unwrap_or(content),
                false => content,
            };
            turn.run(content, title).instrument(span).await
        }
    }
}

impl Turn<'_> {
    /// Something dsh says to the user (not part of the model's history).
    fn notice(&self, text: &str) -> Result<(), AgentError> {
        self.record(EventData::Notice {
            text: text.to_owned(),
        })
        .map(drop)
    }

    /// `/mode` and `/model` (and `/plan`'s mode): validated as the config
    /// options are; an unknown or missing value is answered with the
    /// choices, not an error.
    fn set(&self, key: ConfigKey, value: &str) -> Result<(), AgentError> {
        match crate::settings::Settings::check(&self.config.choices, key, value) {
            Ok(()) => {
                self.record(EventData::Config {
                    key,
                    value: value.to_owned(),
                })?;
                self.notice(&format!(
                    "{} is now `{value}`.",
                    if key == ConfigKey::Mode {
                        "The mode"
                    } else {
                        "The model"
                    }
                ))
            }
            Err(error) => self.notice(&error.to_string()),
        }
    }

    async fn run(
        &self,
        content: Vec<UserContent>,
        title: Option<String>,
    ) -> Result<StopReason, AgentError> {
        // A hook may refuse the prompt (its `hook/result` says why).
        let Some(hook_context) = self.prompt_hooks(&content).await? else {
            return Ok(StopReason::EndTurn);
        };
        // The prompt first, then the title taken from it: the order the
        // editor sees them live (it shows its own prompt at once).
        let first_prompt = title.as_ref().map(|_| {
            content
                .iter()
                .filter_map(|block| match block {
                    UserContent::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        });
        self.record(EventData::UserMessage {
            turn: self.number,
            content,
            steered: false,
            source: self.source,
        })?;
        // Late answers to timed questions that came as the turn started
        // (prompts steered meanwhile stay in line for the first step's
        // boundary).
        for text in self.session.late_answers().await {
            self.record(EventData::Instructions {
                text,
                files: Vec::new(),
            })?;
        }
        if let Some(title) = title {
            self.record(EventData::Title { title, usage: None })?;
        }
        self.instructions_at_start().await?;
        self.skills_at_start()?;
        self.time_context()?;
        self.record_hook_context(&hook_context)?;
        self.record(EventData::TurnStart { turn: self.number })?;
        // A panic in the turn (a bug) fails this turn, is recorded like any
        // other failure, and leaves the session usable.
        let outcome = {
            use futures::FutureExt as _;
            // The model's title is asked for beside the first turn's steps
            // and recorded when it comes, during the turn or after it (the
            // turn's answer never waits for it).
            if let Some(prompt) = first_prompt.filter(|_| self.config.model_titles) {
                title::start(self.session, self.provider.clone(), prompt);
            }
            let steps = std::panic::AssertUnwindSafe(self.steps()).catch_unwind();
            steps.await.unwrap_or_else(|payload| {
                let detail = format!(
                    "session {} turn {}: {}",
                    self.session.id,
                    self.number,
                    AgentError::panic_message(payload.as_ref())
                );
                Err(AgentError::bug("turn", &detail))
            })
        };
        let (stop, error) = match &outcome {
            Ok(stop) => (Some(*stop), None),
            Err(error) => (
                None,
                Some(ErrorInfo {
                    code: error.code(),
                    message: error.to_string(),
                }),
            ),
        };
        // What the prompts steered into this turn are answered.
        let joined_outcome = match (stop, &error) {
            (Some(stop), _) => Ok(stop),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => Ok(StopReason::EndTurn),
        };
        let checkpoint = self.checkpoint().await;
        let recorded = checkpoint.and_then(|()| {
            self.record(EventData::TurnEnd {
                turn: self.number,
                stop,
                error,
            })
        });
        self.session.sync();
        tracing::info!(?stop, "turn ended");
        let joined = std::mem::take(&mut *self.joined.lock().unwrap_or_else(|p| p.into_inner()));
        for prompt in joined {
            prompt.answer(joined_outcome.clone());
        }
        let stop = outcome?;
        recorded?;
        Ok(stop)
    }

    /// Records what the turn's file changes replaced, if it made any.
    /// Each changed file is read as the tools see it (through the editor
    /// when it reads files for dsh).
    async fn checkpoint(&self) -> Result<(), AgentError> {
        // A subagent's changes are its parent turn's, recorded there.
        if self.shared_checkpoint().is_some() {
            return Ok(());
        }
        let capture = std::mem::take(&mut *self.capture.lock().unwrap_or_else(|p| p.into_inner()));
        let mut files = Vec::new();
        for (path, before, lost) in capture.take() {
            let after = self.current(&path.display().to_string()).await.hash();
            files.extend(crate::checkpoint::entry(&path, before, lost, after));
        }
        match crate::checkpoint::event(self.number, files) {
            Some(event) => self.record(event).map(drop),
            None => Ok(()),
        }
    }

    /// The parent turn's checkpoint store, for a subagent that shares it.
    fn shared_checkpoint(&self) -> Option<&crate::checkpoint::Store> {
        let delegated = self.delegated.as_ref()?;
        delegated.checkpoint.as_ref().map(|(_, store)| store)
    }

    /// The session's checkpoint store (a subagent's: its parent turn's).
    fn checkpoint_store(&self) -> crate::checkpoint::Store {
        if let Some(store) = self.shared_checkpoint() {
            return store.clone();
        }
        crate::checkpoint::Store::new(&self.config.home, self.session.id.as_str())
            .for_turn(self.number, self.config.checkpoints.max_bytes_per_session)
    }

    async fn steps(&self) -> Result<StopReason, AgentError> {
        let mut overflow_retries = {
            let model = self.session.locked().state.settings.model.clone();
            self.config.compaction.policy(&model).max_overflow_retries
        };
        let mut step = 1;
        while step <= self.config.max_steps {
            if self.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            #[cfg(debug_assertions)]
            injected_panic(self.session).await;
            self.compact_if_needed().await?;
            // Steers are taken only when a step follows to answer them
            // (else they wait in line and run as their own turn).
            let room = step < self.config.max_steps;
            match self.step(step).await {
                // A prompt steered in meanwhile keeps the turn going.
                Ok(Next::Stop(StopReason::EndTurn)) => {
                    if !room || (!self.take_steered().await? && !self.stop_hooks().await?) {
                        return Ok(StopReason::EndTurn);
                    }
                }
                Ok(Next::Stop(stop)) => return Ok(stop),
                Ok(Next::Continue) => {
                    if room {
                        self.take_steered().await?;
                    }
                }
                // The provider says the conversation is too long: compact
                // and try the step again (once by default).
                Err(error)
                    if error.code() == ErrorCode::ModelContextWindowExceeded
                        && overflow_retries > 0
                        && self.config.compaction.auto =>
                {
                    overflow_retries -= 1;
                    tracing::info!("context overflow: compacting and retrying the step");
                    if !self.compact(compaction::Why::Overflow, None).await? {
                        return Err(error);
                    }
                    continue;
                }
                Err(error) => return Err(error),
            }
            step += 1;
        }
        Ok(StopReason::MaxTurnRequests)
    }

    /// Takes in the prompts steered into this turn since the last step
    /// (recorded after the step's tool results, shown where they land).
    /// Whether there were any.
    async fn take_steered(&self) -> Result<bool, AgentError> {
        let crate::session::Boundary { late, steered } = self.session.boundary().await;
        // Late answers to timed questions first (they answer what the
        // model asked before): after the step's tool results, or, after a
        // finished reply, with the next prompt (they keep no turn going).
        for text in late {
            self.record(EventData::Instructions {
                text,
                files: Vec::new(),
            })?;
        }
        let any = !steered.is_empty();
        // Each is answered with the turn's outcome, recorded or not (a
        // failed write fails the turn).
        let mut joined = self.joined.lock().unwrap_or_else(|p| p.into_inner());
        let mut recorded = Ok(());
        for (content, prompt) in steered {
            joined.push(prompt);
            if recorded.is_ok() {
                recorded = self.record(EventData::UserMessage {
                    turn: self.number,
                    content,
                    steered: true,
                    source: dsh_protocol::log::MessageSource::User,
                });
            }
        }
        if any && recorded.is_ok() {
            self.person_steered
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        recorded.map(|()| any)
    }

    /// Records a fact in the session; the editor is shown what it projects
    /// to.
    fn record(&self, data: EventData) -> Result<(), AgentError> {
        self.session.record(data, self.frontend).map(drop)
    }
}

/// Debug builds only, for the fault tests: with `DSH_TEST_FAULTS=1`, a turn
/// whose last user message contains `dsh-test-panic` panics in its step.
#[cfg(debug_assertions)]
async fn injected_panic(session: &Arc<Session>) {
    if std::env::var_os("DSH_TEST_FAULTS").is_none() {
        return;
    }
    let asked = session
        .history()
        .await
        .unwrap_or_default()
        .iter()
        .rev()
        .find_map(|message| match message {
            dsh_protocol::model::ChatMessage::User(content) => Some(content.iter().any(
                |c| matches!(c, UserContent::Text { text } if text.contains("dsh-test-panic")),
            )),
            _ => None,
        });
    if asked == Some(true) {
        panic!("injected test panic");
    }
}

#[cfg(test)]
mod tests;
