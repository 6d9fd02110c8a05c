//! The editor, as the agent core sees it: where updates go, and what the
//! core may ask of the editor without knowing its protocol — permission
//! prompts, its file system (which sees unsaved buffers) and its terminals.
//! The ACP adapter implements [`Frontend`]; a front end without an editor
//! implements only `send` and gets the defaults (no capabilities, every
//! prompt unavailable → denied).

use std::path::{Path, PathBuf};

pub use dsh_protocol::tool::CommandLive;
use dsh_protocol::tool::{FileLocation, ToolContent, ToolKind};
use dsh_protocol::ToolCallId;
use futures::future::BoxFuture;

use crate::permission::Answer;
use crate::update::AgentUpdate;

/// Capabilities the client advertised at `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    /// `fs/read_text_file`.
    pub read_text_file: bool,
    /// `fs/write_text_file`.
    pub write_text_file: bool,
    /// `terminal/*`.
    pub terminal: bool,
    /// `elicitation/create` in form mode (`elicitation.form`).
    pub elicitation_form: bool,
    /// Live command output on the call in Zed's terminal convention
    /// (`_meta.terminal_output`).
    pub terminal_output: bool,
    /// ... as the new bytes only (`_meta.terminal_output_delta`).
    pub terminal_output_delta: bool,
    /// Subagents as sessions of their own (ACP's unstable `subagents`):
    /// their updates go under their own session id.
    pub subagents: bool,
    /// Boolean session config options
    /// (`session.configOptions.boolean`): on/off switches show as
    /// toggles.
    pub boolean_config: bool,
}

/// A question to the user about one tool call: may it run (a permission),
/// start on its plan (`exit_plan_mode`), or the model's own questions
/// (`ask_user_question`)? One type, typed answers.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The call.
    pub call_id: ToolCallId,
    /// Its title.
    pub title: String,
    /// Its kind.
    pub kind: ToolKind,
    /// Its arguments.
    pub raw_input: serde_json::Value,
    /// Files it touches.
    pub locations: Vec<FileLocation>,
    /// What the call will do, for the prompt (the whole command, escaped).
    pub content: Vec<ToolContent>,
    /// What is asked, with its options.
    pub question: crate::permission::Question,
    /// Which answers that stand for no one (`dsh run --approve`, an SDK
    /// session's approvals) may allow it: only a person may allow a
    /// repository's own code (its hooks); `sandboxed` approvals do not
    /// allow a command that names a protected path. The others reject it.
    pub unattended: crate::permission::Unattended,
}

impl Ask {
    /// The answer `approvals` give without asking anyone; `None`: a
    /// person (the client) answers.
    pub fn standing_answer(&self, approvals: crate::permission::Approvals) -> Option<Answer> {
        use crate::permission::{Approvals, Unattended};
        use dsh_protocol::log::PermissionOutcome;
        match (approvals, self.unattended) {
            (Approvals::Client, _) => None,
            (_, Unattended::PersonOnly) | (Approvals::Sandboxed, Unattended::FullAccessOnly) => {
                Some(Answer::Permission(PermissionOutcome::RejectOnce))
            }
            (Approvals::Sandboxed, _) if self.sandboxed_allows() => {
                Some(Answer::Permission(PermissionOutcome::AllowOnce))
            }
            (approvals, _) => self.question.standing_answer(approvals),
        }
    }

    /// `sandboxed` approvals (`dsh run --approve sandboxed`) allow what
    /// `edits` do and more: a command, which runs in accept-edits' kernel
    /// sandbox (the run refuses to start where there is none), and a read
    /// or a search outside the roots (never a hidden path: refused below
    /// full-access). Only where "once" is offered: a program from the
    /// workspace (a language server) is allowed for the session or not at
    /// all, and never by this.
    fn sandboxed_allows(&self) -> bool {
        use dsh_protocol::tool::ToolKind;
        let once = match &self.question {
            crate::permission::Question::Permission(options) => options
                .iter()
                .any(|option| option.outcome == dsh_protocol::log::PermissionOutcome::AllowOnce),
            _ => false,
        };
        once && matches!(
            self.kind,
            ToolKind::Execute | ToolKind::Read | ToolKind::Search
        )
    }
}

/// How a client terminal run ended.
#[derive(Debug, Clone, Default)]
pub struct TerminalRun {
    /// The client's terminal id (embedded in the tool call).
    pub terminal_id: String,
    /// Output (possibly truncated by the client).
    pub output: String,
    /// Whether the client truncated the output.
    pub truncated: bool,
    /// Exit code, when it exited.
    pub exit_code: Option<u32>,
    /// Signal, when killed by one.
    pub signal: Option<String>,
    /// Killed because of the timeout.
    pub timed_out: bool,
    /// Killed because the turn was cancelled.
    pub cancelled: bool,
}

/// A command to run in a client terminal.
#[derive(Debug, Clone)]
pub struct TerminalCommand {
    /// Shell command line (run with `bash -c`).
    pub command: String,
    /// Working directory.
    pub cwd: PathBuf,
    /// Output cap, bytes.
    pub output_limit: u64,
    /// Timeout.
    pub timeout: std::time::Duration,
    /// The tool call that embeds the terminal (sent as soon as it exists).
    pub call_id: ToolCallId,
}

/// What the core tells a front end: one closed vocabulary, so a front end
/// sees every kind of output in one `match` ([`Frontend::emit`]).
#[derive(Debug, Clone)]
pub enum Output<'a> {
    /// A fact was recorded in the session log, with the updates it projects
    /// to (live): front ends that show the log itself (`dsh run --json`,
    /// the SDK) take the event, editors the updates.
    Recorded {
        /// The logged event.
        event: &'a dsh_protocol::log::Event,
        /// What it projects to ([`crate::projection`]).
        updates: Vec<AgentUpdate>,
    },
    /// Streamed text of the running model call (its `assistant/message` is
    /// recorded when it ends), once [`Frontend::hold`] lets it go.
    Delta(Delta),
    /// A run of a replay's updates (`session/load`), in order, once
    /// [`Frontend::hold`] lets it go.
    Replayed(Vec<AgentUpdate>),
    /// What no event carries and a replay never shows.
    Transient(Transient),
}

/// Streamed text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// The reply's text, and the id of its message ([`crate::update::message_id`]).
    Message(String, String),
    /// The model's reasoning, and the id of its message.
    Thought(String, String),
}

/// A subagent's life, as a client that shows it as a session sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum SubagentEvent {
    /// It started: its title and working directory.
    Started {
        /// The call's description.
        title: String,
        /// Its working directory.
        cwd: String,
    },
    /// One of its updates.
    Update(AgentUpdate),
    /// Its turn ended.
    Ended,
}

/// How much of a command's output tail the live view shows where the
/// client has no terminal convention (a fenced block in the call's
/// content).
pub const LIVE_VIEW_BYTES: usize = 8000;

/// Updates from no event at all (see docs/architecture.md, "One path from
/// the log to the editor").
#[derive(Debug, Clone, PartialEq)]
pub enum Transient {
    /// A tool call started running.
    ToolRunning {
        /// The call.
        call_id: ToolCallId,
    },
    /// The slash commands offered changed (custom commands or skills were
    /// added, changed or removed): the whole list.
    Commands(Vec<crate::context::commands::Offered>),
    /// A local command's progress, live (its result, when it comes, is
    /// logged).
    Command {
        /// The call.
        call_id: ToolCallId,
        /// What happened.
        live: CommandLive,
    },
    /// A subagent, for a client that shows subagents as sessions of their
    /// own ([`ClientCaps::subagents`]): the child's own updates, under its
    /// own id (its log has them; the parent's call has its result).
    Subagent {
        /// The parent's `subagent` call.
        call_id: ToolCallId,
        /// The child session.
        session: dsh_protocol::SessionId,
        /// What happened.
        event: SubagentEvent,
    },
    /// What a running call has done so far (a subagent's steps): its view
    /// now, replacing the last one. Its result, when it comes, is logged.
    ToolProgress {
        /// The call.
        call_id: ToolCallId,
        /// Its view so far.
        view: dsh_protocol::tool::ToolView,
    },
}

impl Output<'_> {
    /// The updates an editor shows for it.
    pub fn into_updates(self) -> Vec<AgentUpdate> {
        match self {
            Output::Recorded { updates, .. } => updates,
            Output::Delta(delta) => vec![delta.into_update()],
            Output::Replayed(updates) => updates,
            Output::Transient(transient) => vec![transient.into_update()],
        }
    }
}

impl Delta {
    /// As an update.
    pub fn into_update(self) -> AgentUpdate {
        match self {
            Delta::Message(text, id) => AgentUpdate::MessageChunk(text, Some(id)),
            Delta::Thought(text, id) => AgentUpdate::ThoughtChunk(text, Some(id)),
        }
    }
}

impl Transient {
    /// As an update, for front ends that show updates.
    pub fn into_update(self) -> AgentUpdate {
        match self {
            Transient::ToolRunning { call_id } => AgentUpdate::ToolCallUpdate {
                call_id,
                status: dsh_protocol::tool::ToolStatus::InProgress,
                view: dsh_protocol::tool::ToolView::default(),
                raw_output: None,
            },
            Transient::Commands(commands) => AgentUpdate::Commands(commands),
            Transient::Command { call_id, live } => AgentUpdate::ToolCallUpdate {
                call_id,
                status: dsh_protocol::tool::ToolStatus::InProgress,
                view: match live {
                    CommandLive::Output { tail, .. } => {
                        dsh_protocol::tool::ToolView::text(dsh_protocol::content::fenced(
                            &dsh_protocol::content::tail_marked(&tail, LIVE_VIEW_BYTES),
                            "console",
                        ))
                    }
                    CommandLive::Started { .. } | CommandLive::Exited { .. } => {
                        dsh_protocol::tool::ToolView::default()
                    }
                },
                raw_output: None,
            },
            // Only a client with the capability is sent these.
            Transient::Subagent { call_id, .. } => AgentUpdate::ToolCallUpdate {
                call_id,
                status: dsh_protocol::tool::ToolStatus::InProgress,
                view: dsh_protocol::tool::ToolView::default(),
                raw_output: None,
            },
            Transient::ToolProgress { call_id, view } => AgentUpdate::ToolCallUpdate {
                call_id,
                status: dsh_protocol::tool::ToolStatus::InProgress,
                view,
                raw_output: None,
            },
        }
    }
}

/// The editor, as the agent core sees it. Implementations must not block
/// in `emit`.
pub trait Frontend: Send + Sync {
    /// Delivers what the core says.
    fn emit(&self, output: Output<'_>);

    /// Whether streamed output ([`Output::Delta`], [`Output::Replayed`])
    /// may go now: `None`, or a future that resolves when it may. A front
    /// end keeps its own flow control behind it (the ACP adapter: its
    /// output must stay behind what was sent before, and an editor that
    /// reads slowly holds it); a streaming turn keeps reading the model and
    /// merging while it waits.
    fn hold(&self) -> Option<BoxFuture<'_, ()>> {
        None
    }

    /// Advertised capabilities.
    fn caps(&self) -> ClientCaps {
        ClientCaps::default()
    }

    /// Asks the user. Must resolve (fail closed, `Unavailable`) if the
    /// client goes away.
    fn ask(&self, _ask: Ask) -> BoxFuture<'_, Answer> {
        Box::pin(async { Answer::Unavailable })
    }

    /// Reads a file through the client.
    fn read_text_file<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move { Err(format!("the client cannot read {}", path.display())) })
    }

    /// Writes a file through the client.
    fn write_text_file<'a>(
        &'a self,
        path: &'a Path,
        _content: String,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { Err(format!("the client cannot write {}", path.display())) })
    }

    /// Runs a command in a client terminal, honouring `cancel`.
    fn run_in_terminal<'a>(
        &'a self,
        _command: TerminalCommand,
        _cancel: &'a tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalRun, String>> {
        Box::pin(async { Err("the client has no terminal".to_owned()) })
    }
}

/// A front end that shows nothing and answers nothing (every ask fails
/// closed): what a session records to when no one is listening.
pub struct Nobody;

impl Frontend for Nobody {
    fn emit(&self, _output: Output<'_>) {}
}
