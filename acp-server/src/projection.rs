//! The one answer to "what does the editor see for this event?": every
//! durable fact is recorded as a logged event ([`crate::session::Session::record`]),
//! and [`Projection::project`] turns each event into the updates front ends
//! render — live, as the event is recorded, and on `session/load`, when the
//! log is read again. Replay equals live.
//!
//! [`Delivery`] says which of the two is happening, for the only
//! differences between them — updates the live path has already sent, or
//! that belong to the live connection:
//! - **streaming deltas**: the model's text and reasoning reach the editor
//!   as they stream; the logged `assistant/message` then adds only its
//!   usage. Replay shows the text and reasoning whole.
//! - **the user's prompt** is not echoed live (the client sent it); replay
//!   shows it.
//! - **client terminals**: a command run in the editor's terminal is shown
//!   live with the terminal embedded; the terminal id means nothing to
//!   another connection, so replay shows the logged output instead.
//!
//! Updates that come from no event at all (transient, never replayed):
//! streaming deltas; a tool call's `in_progress` status when it starts
//! running; a client terminal embedded while its command runs; notices about
//! MCP servers that failed to start.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_protocol::log::{ConfigKey, Event, EventData, InstructionFile, InstructionStatus};
use dsh_protocol::tool::{ToolContent, ToolStatus, ToolView};
use dsh_protocol::ToolCallId;

use crate::settings::{Choices, Settings};
use crate::update::{AgentUpdate, RawOutput};

/// Whether events are projected as they happen or read back from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Recorded now, in a live session: deltas were already streamed.
    Live,
    /// Read back from the log (`session/load`).
    Replay,
}

/// What the projection remembers between events: the tool calls the editor
/// has been shown and not seen finish.
#[derive(Debug, Clone, Default)]
pub struct Projection {
    shown: HashSet<ToolCallId>,
    /// Calls whose background job has not ended in the log.
    jobs: HashSet<ToolCallId>,
    /// Compactions started and not yet ended in the log.
    compactions: HashSet<ToolCallId>,
}

impl Projection {
    /// After a replay: the background jobs the log never saw end (dsh
    /// stopped while they ran) end now, with their outcome unknown.
    /// `running`: the job of this call still runs in this process.
    /// A compaction the log never saw end (dsh stopped during it) failed.
    pub fn finish_replay(&mut self, running: &dyn Fn(&ToolCallId) -> bool) -> Vec<AgentUpdate> {
        let mut compactions: Vec<ToolCallId> = self.compactions.drain().collect();
        compactions.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        let mut updates: Vec<AgentUpdate> = compactions
            .into_iter()
            .map(|call_id| AgentUpdate::ToolCallUpdate {
                call_id,
                status: ToolStatus::Failed,
                view: compaction_failed_view(
                    "dsh stopped before this compaction ended; nothing was replaced.",
                ),
                raw_output: None,
            })
            .collect();
        let mut calls: Vec<ToolCallId> = self.jobs.drain().filter(|call| !running(call)).collect();
        calls.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        updates.extend(
            calls
                .into_iter()
                .map(|call_id| AgentUpdate::ToolCallUpdate {
                    call_id,
                    status: ToolStatus::Failed,
                    view: ToolView::text(
                        "[status: outcome unknown — dsh stopped before this background job ended]",
                    ),
                    // The model was told nothing of its end.
                    raw_output: None,
                }),
        );
        updates
    }

    /// The updates for one event. `settings` are the session's settings
    /// after the event.
    pub fn project(
        &mut self,
        event: &Event,
        settings: &Settings,
        choices: &Choices,
        delivery: Delivery,
    ) -> Vec<AgentUpdate> {
        let replay = delivery == Delivery::Replay;
        match &event.data {
            EventData::Title { title, .. } => {
                vec![AgentUpdate::Title(title.clone(), event.time)]
            }
            // The editor shows its own prompt; a steered one lands in the
            // running turn, so it is shown where it lands, live too.
            // A goal round's message is shown as the round's marker (its
            // `goal/change`), a wake-up's as its jobs' ends (`job/end`),
            // not as if the person had typed them: live as on replay.
            EventData::UserMessage {
                content,
                steered,
                source,
                ..
            } if (replay || *steered) && source.is_user() => content
                .iter()
                .cloned()
                .map(AgentUpdate::UserChunk)
                .collect(),
            EventData::AssistantMessage {
                turn,
                step,
                text,
                reasoning,
                usage,
                estimated_context,
                model,
                ..
            } => {
                let mut updates = Vec::new();
                let id = || Some(crate::update::message_id(*turn, *step));
                if replay && !reasoning.is_empty() {
                    updates.push(AgentUpdate::ThoughtChunk(reasoning.clone(), id()));
                }
                if replay && !text.is_empty() {
                    updates.push(AgentUpdate::MessageChunk(text.clone(), id()));
                }
                if let Some(used) = usage
                    .map(|usage| usage.context_tokens())
                    .or(*estimated_context)
                {
                    let size = choices
                        .model(model)
                        .map(|model| model.context_window)
                        .unwrap_or_else(|| settings.context_window(choices));
                    updates.push(AgentUpdate::Usage {
                        used,
                        size,
                        cost: None,
                    });
                }
                updates
            }
            EventData::ToolCall {
                call_id,
                arguments,
                view,
                ..
            } => {
                self.shown.insert(call_id.clone());
                vec![AgentUpdate::ToolCall {
                    call_id: call_id.clone(),
                    arguments: arguments.clone(),
                    view: view.clone(),
                    status: ToolStatus::Pending,
                }]
            }
            EventData::ToolResult {
                call_id,
                status,
                output,
                error,
                view,
                live_terminal,
                job,
                ..
            } => {
                // A result for a call the editor never saw (cut off between
                // the model's reply and its tool/call) shows nothing.
                if !self.shown.remove(call_id) {
                    return Vec::new();
                }
                // A background job: in progress until its job/end.
                if job.is_some() && *status == ToolStatus::Completed {
                    self.jobs.insert(call_id.clone());
                    return vec![AgentUpdate::ToolCallUpdate {
                        call_id: call_id.clone(),
                        status: ToolStatus::InProgress,
                        view: view.clone(),
                        raw_output: None,
                    }];
                }
                let view = match live_terminal {
                    Some(terminal_id) if !replay => ToolView {
                        content: vec![ToolContent::Terminal {
                            terminal_id: terminal_id.clone(),
                        }],
                        ..view.clone()
                    },
                    _ => view.clone(),
                };
                vec![AgentUpdate::ToolCallUpdate {
                    call_id: call_id.clone(),
                    status: *status,
                    view,
                    raw_output: Some(Arc::new(RawOutput::of(output, error.clone()))),
                }]
            }
            EventData::JobEnd {
                job_id,
                call_id,
                status,
                failed,
                summary,
                view,
                ..
            } => {
                if !self.jobs.remove(call_id) {
                    return Vec::new();
                }
                vec![AgentUpdate::ToolCallUpdate {
                    call_id: call_id.clone(),
                    status: if *failed {
                        ToolStatus::Failed
                    } else {
                        ToolStatus::Completed
                    },
                    view: view.clone(),
                    raw_output: Some(Arc::new(RawOutput {
                        job_id: Some(job_id.clone()),
                        job_status: Some(status.clone()),
                        ..RawOutput::of(summary, None)
                    })),
                }]
            }
            EventData::Plan { entries } => vec![AgentUpdate::Plan(entries.clone())],
            // No model streamed it: shown whole, live and on replay.
            EventData::Notice { text } => vec![AgentUpdate::MessageChunk(text.clone(), None)],
            // A goal's change, a round's start among them: a line of its own.
            EventData::GoalChange { change, goal } => {
                vec![AgentUpdate::MessageChunk(goal::note(*change, goal), None)]
            }
            // A hook is shown only when it blocked or failed.
            EventData::HookResult(run) if run.blocked || run.failed() => {
                vec![AgentUpdate::MessageChunk(hook_note(run), None)]
            }
            // An undo is shown as the tool call it acted like: the files
            // it put back, with a diff each.
            EventData::Undo { call_id, view, .. } => vec![
                AgentUpdate::ToolCall {
                    call_id: call_id.clone(),
                    arguments: "{}".to_owned(),
                    view: ToolView {
                        content: Vec::new(),
                        ..view.clone()
                    },
                    status: ToolStatus::Pending,
                },
                AgentUpdate::ToolCallUpdate {
                    call_id: call_id.clone(),
                    status: ToolStatus::Completed,
                    view: view.clone(),
                    raw_output: None,
                },
            ],
            EventData::Config { key, .. } => {
                let mut updates = Vec::new();
                match key {
                    ConfigKey::Unknown => return updates,
                    ConfigKey::Mode => updates.push(AgentUpdate::Mode(settings.mode)),
                    ConfigKey::Model | ConfigKey::ThoughtLevel | ConfigKey::Web => {}
                }
                updates.push(AgentUpdate::ConfigOptions(settings.options(choices)));
                updates
            }
            // Hooks' context (no files) is shown by its `hook/result`s.
            EventData::Instructions { files, .. } if files.is_empty() => Vec::new(),
            EventData::Instructions { files, .. } => {
                vec![AgentUpdate::ThoughtChunk(instructions_note(files), None)]
            }
            EventData::Skills { skills, .. } => vec![AgentUpdate::ThoughtChunk(
                format!("Skills available: {}.\n\n", skills.join(", ")),
                None,
            )],
            EventData::CompactionSummary {
                call_id,
                messages,
                tokens_before,
                tokens_after,
                summary,
                ..
            } => {
                let size = settings.context_window(choices);
                let Some(call_id) = call_id else {
                    // Summaries from before dsh showed them as a tool call.
                    return vec![AgentUpdate::MessageChunk(
                        format!("Conversation compacted: {messages} messages summarised.\n\n"),
                        None,
                    )];
                };
                let view =
                    compaction_view(Some((*messages, *tokens_before, *tokens_after, summary)));
                // Live, or replayed after its `compaction/start`: the call
                // is on screen already (logs before 2026-12 have no start).
                let started = self.compactions.remove(call_id);
                let shown = if replay && !started {
                    AgentUpdate::ToolCall {
                        call_id: call_id.clone(),
                        arguments: String::new(),
                        view,
                        status: ToolStatus::Completed,
                    }
                } else {
                    AgentUpdate::ToolCallUpdate {
                        call_id: call_id.clone(),
                        status: ToolStatus::Completed,
                        view,
                        raw_output: None,
                    }
                };
                vec![
                    shown,
                    AgentUpdate::Usage {
                        used: *tokens_after,
                        size,
                        cost: None,
                    },
                ]
            }
            EventData::CompactionStart { call_id, .. } => {
                self.compactions.insert(call_id.clone());
                vec![AgentUpdate::ToolCall {
                    call_id: call_id.clone(),
                    arguments: String::new(),
                    view: compaction_view(None),
                    status: ToolStatus::InProgress,
                }]
            }
            EventData::CompactionFailed { call_id, message } => {
                self.compactions.remove(call_id);
                vec![AgentUpdate::ToolCallUpdate {
                    call_id: call_id.clone(),
                    status: ToolStatus::Failed,
                    view: compaction_failed_view(message),
                    raw_output: None,
                }]
            }
            // Nothing the editor shows: the prompt (live), turn boundaries,
            // permission answers and rules (the prompt was shown live),
            // answers to questions (the call's result shows them),
            // retries, pruned tool results (the transcript stays whole).
            EventData::UserMessage { .. }
            | EventData::TurnStart { .. }
            | EventData::TurnEnd { .. }
            | EventData::PermissionDecision { .. }
            | EventData::PlanDecision { .. }
            | EventData::QuestionDecision { .. }
            | EventData::PermissionRule(_)
            | EventData::CompactionPrune { .. }
            | EventData::Checkpoint { .. }
            | EventData::LlmRetry { .. }
            | EventData::HookResult(_)
            | EventData::HookConsent(_) => Vec::new(),
        }
    }
}

/// How a compaction shows: a "Compact conversation" tool call, with what
/// it did once it is done (`messages`, tokens before and after, summary).
pub fn compaction_view(done: Option<(u64, u64, u64, &String)>) -> ToolView {
    let content = match done {
        Some((messages, before, after, summary)) => vec![ToolContent::Text {
            text: format!(
                "Summarised {messages} messages: about {before} → {after} tokens.\n\n{}",
                dsh_protocol::content::truncate_chars(summary, 2000)
            ),
        }],
        None => Vec::new(),
    };
    ToolView {
        title: "Compact conversation".to_owned(),
        kind: Some(dsh_protocol::tool::ToolKind::Think),
        locations: Vec::new(),
        content,
    }
}

/// A compaction that replaced nothing, and why.
pub fn compaction_failed_view(message: &str) -> ToolView {
    ToolView {
        content: ToolView::text(message).content,
        ..compaction_view(None)
    }
}

/// A compact line for a hook that blocked or failed.
fn hook_note(run: &dsh_protocol::hook::HookRun) -> String {
    let what = match (&run.failure, run.exit_code) {
        (Some(failure), _) => failure.clone(),
        (None, Some(2)) | (None, Some(0)) => "blocked".to_owned(),
        (None, Some(code)) => format!("failed (exit {code})"),
        (None, None) => "failed".to_owned(),
    };
    let stderr = run.stderr.trim();
    let detail = if stderr.is_empty() {
        String::new()
    } else {
        format!(": {}", dsh_protocol::content::visible_title(stderr, 200))
    };
    format!(
        "\n\n_{} hook `{}` {what}{detail}_\n\n",
        run.event,
        dsh_protocol::content::visible_title(&run.command, 80)
    )
}

/// One line naming the instruction files the model was given.
fn instructions_note(files: &[InstructionFile]) -> String {
    let list = |status: InstructionStatus| {
        files
            .iter()
            .filter(|file| file.status == status)
            .map(|file| file.path.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    for (status, label) in [
        (InstructionStatus::Loaded, "Workspace instructions from"),
        (InstructionStatus::Truncated, "cut to fit"),
        (InstructionStatus::Omitted, "left out (over the budget)"),
        (InstructionStatus::Updated, "Updated instructions from"),
        (InstructionStatus::Removed, "Instructions removed"),
    ] {
        let names = list(status);
        if !names.is_empty() {
            parts.push(format!("{label}: {names}"));
        }
    }
    format!("{}.\n\n", parts.join("; "))
}

mod goal;
pub use goal::{note as goal_note, plain as goal_line};

#[cfg(test)]
mod tests;
