//! The model's view of a session, derived from its log as a fold: events go
//! in one at a time ([`History::apply`]), the conversation a request carries
//! comes out ([`History::messages`]). The same fold serves a live session
//! (one event at a time as they are recorded) and a log read from disk.
//!
//! [`Repair`] closes tool calls the log never answered (dsh died while they
//! ran): it is the one place that decides which calls were cut off, for the
//! model's history and the editor's view alike.
//!
//! The conversation is valid for every provider, strict chat templates
//! included:
//! - every tool call is answered (a cut-off one by "outcome unknown");
//! - roles alternate: a turn that ended without a reply (failed, cancelled,
//!   cut off by a crash) is closed with a short assistant note, so the next
//!   prompt never follows a user message directly;
//! - a turn that failed because the conversation outgrew the context window
//!   keeps only its prompt (replaced by a note when it is large), so it does
//!   not make the next request overflow too;
//! - a compaction summary replaces the events it covers;
//! - tool calls carry the model's own ids
//!   ([`ToolCallRequest::provider_id`]).

use std::sync::Arc;

use crate::content::UserContent;
use crate::error::ErrorCode;
use crate::ids::ToolCallId;
use crate::log::{Event, EventData, StopReason};
use crate::model::{ChatMessage, Message, ToolCallRequest};

pub use crate::repair::{Repair, OUTCOME_UNKNOWN};

/// Closes a turn that has no reply after its prompt or tool results.
const NOTE_NO_REPLY: &str = "[dsh: no reply was recorded for this turn.]";
/// Follows a compaction summary.
const NOTE_AFTER_SUMMARY: &str = "Understood; I will continue from this summary.";
/// Replaces a large prompt whose turn overflowed the context window.
const NOTE_DROPPED_PROMPT: &str = "[dsh: this message was removed from the conversation: together with what it produced it did not fit the model's context window.]";
/// Prompts up to this size are kept when their turn overflowed.
const KEEP_OVERFLOWED_PROMPT_BYTES: usize = 4096;

/// The conversation of a session, folded from its events (see the module
/// docs). Feed it the events [`Repair`] passes through.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Messages with the seq of the first event that produced each. Shared:
    /// every model request carries them all, without a copy.
    entries: Vec<(u64, Arc<Message>)>,
    /// Calls awaiting results: (dsh id, provider id).
    pending: Vec<(ToolCallId, String)>,
    /// Attachments follow the whole run of tool results: providers require
    /// tool messages to come straight after the assistant message.
    attachments: Vec<UserContent>,
    /// Where the current turn's prompt is in `entries`.
    turn_start: Option<usize>,
    /// What the user steered into the current turn: kept with its prompt
    /// when the turn's work is dropped.
    steered: Vec<UserContent>,
    /// Workspace instructions in effect: they open the conversation again
    /// after a summary replaced the prompt that carried them.
    instructions: Vec<String>,
    /// Instructions that came before any prompt: they open the next one.
    context: Vec<UserContent>,
    /// The seq of each tool result, by dsh call id (for pruning).
    results: std::collections::HashMap<ToolCallId, u64>,
}

/// Whether a prompt block is context dsh added (workspace instructions),
/// not the user's words.
fn is_context(block: &UserContent) -> bool {
    matches!(block, UserContent::Text { text } if text.starts_with(CONTEXT_OPEN))
}

/// How context blocks open (see [`is_context`]).
pub const CONTEXT_OPEN: &str = "<system-reminder>";

/// `text` made unable to open or close a context block it is quoted in
/// (`<` and `>` become `‹` and `›`): what the workspace, the model or a web
/// page wrote stays data inside dsh's own blocks.
pub fn inert(text: &str) -> String {
    text.replace('<', "‹").replace('>', "›")
}

impl History {
    /// Folds one event in.
    pub fn apply(&mut self, event: &Event) {
        let seq = event.seq;
        match &event.data {
            // Steered into the running turn: after the step's tool
            // results (with what else goes there), or after its reply.
            EventData::UserMessage {
                content,
                steered: true,
                source: crate::log::MessageSource::User,
                ..
            } => {
                match self.entries.last_mut() {
                    Some((_, message)) if matches!(message.message(), ChatMessage::Tool { .. }) => {
                        self.steered.extend(content.iter().cloned());
                        self.attachments.extend(content.iter().cloned());
                    }
                    // Right after a user message (the turn's prompt): one
                    // user message, as roles must alternate.
                    Some((_, message)) if matches!(message.message(), ChatMessage::User(_)) => {
                        edit(message, |message| {
                            if let ChatMessage::User(blocks) = message {
                                blocks.extend(content.iter().cloned());
                            }
                        });
                    }
                    _ => {
                        self.steered.extend(content.iter().cloned());
                        self.flush_attachments(seq);
                        self.entries
                            .push((seq, kept(ChatMessage::User(content.clone()))));
                    }
                }
            }
            EventData::UserMessage { content, .. } => {
                self.steered.clear();
                self.flush_attachments(seq);
                self.close_open_turn(NOTE_NO_REPLY);
                self.turn_start = Some(self.entries.len());
                let mut blocks = std::mem::take(&mut self.context);
                blocks.extend(content.iter().cloned());
                self.entries.push((seq, kept(ChatMessage::User(blocks))));
            }
            EventData::Instructions { text, .. } | EventData::Skills { text, .. } => {
                // Hooks' context (no files) is for its turn only.
                if !matches!(&event.data, EventData::Instructions { files, .. } if files.is_empty())
                {
                    self.instructions.push(text.clone());
                }
                let block = UserContent::text(text.clone());
                let last = self.entries.len().checked_sub(1);
                match self.entries.last_mut() {
                    // With tool results: after them, like attachments.
                    Some((_, message)) if matches!(message.message(), ChatMessage::Tool { .. }) => {
                        self.attachments.push(block);
                    }
                    // Right after this turn's prompt: before the user's
                    // words, after earlier context.
                    Some((_, message))
                        if last == self.turn_start
                            && matches!(message.message(), ChatMessage::User(_)) =>
                    {
                        edit(message, |message| {
                            if let ChatMessage::User(blocks) = message {
                                let at = blocks.iter().take_while(|b| is_context(b)).count();
                                blocks.insert(at, block);
                            }
                        });
                    }
                    _ => self.context.push(block),
                }
            }
            EventData::CompactionPrune {
                calls,
                head_chars,
                tail_chars,
            } => {
                for call in calls {
                    let Some(seq) = self.results.get(call).copied() else {
                        continue;
                    };
                    for (at, message) in self.entries.iter_mut() {
                        if *at != seq {
                            continue;
                        }
                        edit(message, |message| {
                            if let ChatMessage::Tool { content, .. } = message {
                                *content =
                                    crate::content::prune_middle(content, *head_chars, *tail_chars);
                            }
                        });
                    }
                }
            }
            EventData::AssistantMessage {
                text,
                reasoning,
                tool_calls,
                interrupted,
                ..
            } => {
                self.flush_attachments(seq);
                let tool_calls = if *interrupted {
                    &[][..]
                } else {
                    tool_calls.as_slice()
                };
                if text.is_empty() && tool_calls.is_empty() {
                    return;
                }
                self.pending.extend(
                    tool_calls
                        .iter()
                        .map(|call| (call.id.clone(), call.provider_id().to_owned())),
                );
                let tool_calls = tool_calls
                    .iter()
                    .map(|call| ToolCallRequest {
                        id: ToolCallId::new(call.provider_id()),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        provider_id: None,
                    })
                    .collect();
                self.entries.push((
                    seq,
                    kept(ChatMessage::Assistant {
                        text: text.clone(),
                        reasoning: reasoning.clone(),
                        tool_calls,
                    }),
                ));
            }
            EventData::ToolResult {
                call_id,
                output,
                attachments,
                ..
            } => {
                if let Some(at) = self.pending.iter().position(|(id, _)| id == call_id) {
                    let (_, provider_id) = self.pending.remove(at);
                    self.results.insert(call_id.clone(), seq);
                    self.entries.push((
                        seq,
                        kept(ChatMessage::Tool {
                            call_id: provider_id,
                            content: output.clone(),
                        }),
                    ));
                    self.attachments.extend(attachments.iter().cloned());
                }
            }
            EventData::TurnEnd { stop, error, .. } => {
                self.flush_attachments(seq);
                if error
                    .as_ref()
                    .is_some_and(|error| error.code == ErrorCode::ModelContextWindowExceeded)
                {
                    self.drop_overflowed_turn();
                }
                let note = match (stop, error) {
                    (Some(StopReason::Cancelled), _) => {
                        "[dsh: the user cancelled this turn before it was done.]".to_owned()
                    }
                    (_, Some(error)) => format!(
                        "[dsh: this turn failed ({}): {}]",
                        error.code.as_str(),
                        crate::content::truncate_chars(&error.message, 300)
                    ),
                    (Some(StopReason::MaxTurnRequests), _) => {
                        "[dsh: this turn stopped: it reached the limit of model calls per turn.]"
                            .to_owned()
                    }
                    _ => NOTE_NO_REPLY.to_owned(),
                };
                self.close_open_turn(&note);
                self.turn_start = None;
            }
            EventData::CompactionSummary {
                start,
                end,
                summary,
                ..
            } => {
                self.flush_attachments(seq);
                self.replace_range(*start, *end, summary);
            }
            // Settings, titles, turn starts, permissions, plans, dsh's own
            // notices, retries and compactions that replaced nothing are
            // not part of the conversation.
            EventData::CompactionStart { .. }
            | EventData::CompactionFailed { .. }
            | EventData::PlanDecision { .. }
            | EventData::QuestionDecision { .. }
            | EventData::Config { .. }
            | EventData::Title { .. }
            | EventData::TurnStart { .. }
            | EventData::ToolCall { .. }
            | EventData::PermissionDecision { .. }
            | EventData::PermissionRule(_)
            | EventData::Plan { .. }
            | EventData::Notice { .. }
            | EventData::Checkpoint { .. }
            | EventData::LlmRetry { .. }
            | EventData::HookResult(_)
            | EventData::HookConsent(_)
            | EventData::GoalChange { .. } => {}
            // The model learns of an undo with the next prompt.
            // A background job's end reaches the model at its next step:
            // after the tool results of the step under way, or else
            // opening the next prompt.
            EventData::JobEnd { summary, .. } => {
                let block =
                    UserContent::text(format!("{CONTEXT_OPEN}\n{summary}\n</system-reminder>"));
                let after_results = !self.pending.is_empty()
                    || self.entries.last().is_some_and(|(_, message)| {
                        matches!(message.message(), ChatMessage::Tool { .. })
                    });
                if after_results {
                    self.attachments.push(block);
                } else {
                    self.context.push(block);
                }
            }
            EventData::Undo { summary, .. } => {
                self.context.push(UserContent::text(format!(
                    "{CONTEXT_OPEN}\n{summary}\n</system-reminder>"
                )));
            }
        }
    }

    /// The conversation's messages, each with the seq of the first event
    /// that produced it (attachments not yet placed are not included).
    pub fn entries(&self) -> &[(u64, Arc<Message>)] {
        &self.entries
    }

    /// A rough count of the tokens the next request's conversation
    /// carries (see [`ChatMessage::estimated_tokens`]), without building
    /// it.
    pub fn estimated_tokens(&self) -> u64 {
        let placed: u64 = self.entries.iter().map(|(_, m)| m.estimated_tokens()).sum();
        placed + (crate::model::blocks_bytes(&self.attachments, |_| 4000) / 4) as u64
    }

    /// The bytes of text it holds (see [`ChatMessage::bytes`]), and
    /// whether something else still holds its messages (a request being
    /// made: dropping it now would free nothing until it lets go). One
    /// pass.
    pub fn footprint(&self) -> (usize, bool) {
        let mut shared = false;
        let placed: usize = self
            .entries
            .iter()
            .map(|(_, message)| {
                shared |= Arc::strong_count(message) > 1;
                message.bytes()
            })
            .sum();
        let attachments = crate::model::blocks_bytes(&self.attachments, str::len);
        (placed + attachments, shared)
    }

    /// The dsh call id of the tool result produced by event `seq`.
    pub fn call_of_result(&self, seq: u64) -> Option<&ToolCallId> {
        self.results
            .iter()
            .find(|(_, at)| **at == seq)
            .map(|(call, _)| call)
    }

    /// The conversation as the next request carries it.
    pub fn messages(&self) -> Vec<Arc<Message>> {
        let mut messages: Vec<Arc<Message>> = self
            .entries
            .iter()
            .map(|(_, message)| message.clone())
            .collect();
        if !self.attachments.is_empty() {
            messages.push(kept(ChatMessage::User(self.attachments.clone())));
        }
        messages
    }

    fn flush_attachments(&mut self, seq: u64) {
        if !self.attachments.is_empty() {
            let attachments = std::mem::take(&mut self.attachments);
            self.entries
                .push((seq, kept(ChatMessage::User(attachments))));
        }
    }

    /// Adds an assistant note when the conversation ends in a user or tool
    /// message, so a next user message keeps the roles alternating. The
    /// note belongs to the turn it closes (it goes where that turn goes when
    /// a summary replaces it).
    fn close_open_turn(&mut self, note: &str) {
        let Some((seq, last)) = self.entries.last() else {
            return;
        };
        if matches!(
            last.message(),
            ChatMessage::User(_) | ChatMessage::Tool { .. }
        ) {
            let seq = *seq;
            self.entries.push((
                seq,
                kept(ChatMessage::Assistant {
                    text: note.to_owned(),
                    reasoning: String::new(),
                    tool_calls: Vec::new(),
                }),
            ));
        }
    }

    /// Keeps only the prompt of a turn that overflowed the context window
    /// (and replaces the prompt too when it is large).
    fn drop_overflowed_turn(&mut self) {
        let Some(start) = self.turn_start else {
            return;
        };
        self.entries.truncate(start + 1);
        self.pending.clear();
        // What was steered in stays, with the prompt (and only there).
        let steered = std::mem::take(&mut self.steered);
        self.attachments.retain(|block| !steered.contains(block));
        let Some((_, message)) = self.entries.get_mut(start) else {
            return;
        };
        edit(message, |message| {
            let ChatMessage::User(content) = message else {
                return;
            };
            let size: usize = content
                .iter()
                .filter(|block| !is_context(block))
                .map(|block| match block {
                    UserContent::Text { text } => text.len(),
                    UserContent::Resource { text, .. } => text.len(),
                    UserContent::Image { data, .. } => data.len(),
                    _ => 0,
                })
                .sum();
            if size > KEEP_OVERFLOWED_PROMPT_BYTES {
                // Instructions dsh added stay; the user's words go.
                content.retain(is_context);
                content.push(UserContent::text(NOTE_DROPPED_PROMPT));
            }
            content.extend(steered);
        });
    }

    /// Replaces the messages that came from events `start..=end` with the
    /// summary and an acknowledgement.
    fn replace_range(&mut self, start: u64, end: u64, summary: &str) {
        let inside = |seq: &u64| (start..=end).contains(seq);
        let Some(first) = self.entries.iter().position(|(seq, _)| inside(seq)) else {
            return;
        };
        let last = self
            .entries
            .iter()
            .rposition(|(seq, _)| inside(seq))
            .unwrap_or(first);
        // The instructions in effect open the summary (the prompt that
        // carried them may be among what it replaces).
        let mut blocks: Vec<UserContent> = self
            .instructions
            .iter()
            .map(|text| UserContent::text(text.clone()))
            .collect();
        blocks.push(UserContent::text(format!(
            "<conversation-summary>\n{summary}\n</conversation-summary>"
        )));
        let mut replacement = vec![(start, kept(ChatMessage::User(blocks)))];
        // Roles alternate: the acknowledgement only when a user message (or
        // nothing) follows; a summary in the middle of a turn is followed
        // by the model's next tool calls.
        let next_is_assistant = matches!(
            self.entries
                .get(last + 1)
                .map(|(_, message)| message.message()),
            Some(ChatMessage::Assistant { .. })
        );
        if !next_is_assistant {
            replacement.push((
                start,
                kept(ChatMessage::Assistant {
                    text: NOTE_AFTER_SUMMARY.to_owned(),
                    reasoning: String::new(),
                    tool_calls: Vec::new(),
                }),
            ));
        }
        let added = replacement.len();
        self.entries.splice(first..=last, replacement);
        let removed = last + 1 - first;
        self.turn_start = match self.turn_start {
            Some(at) if at > last => Some(at - removed + added),
            Some(at) if at >= first => None,
            other => other,
        };
        // Calls whose request was summarized can no longer be answered.
        self.pending.clear();
    }
}

/// A message for the history to keep.
fn kept(message: ChatMessage) -> Arc<Message> {
    Arc::new(Message::new(message))
}

/// Changes a message the history holds (a copy of it when a request being
/// made holds it too).
fn edit(message: &mut Arc<Message>, change: impl FnOnce(&mut ChatMessage)) {
    Arc::make_mut(message).edit(change);
}

/// The conversation a whole log derives to (repairs included).
pub fn derive_history(events: &[Event]) -> Vec<ChatMessage> {
    let mut repair = Repair::default();
    let mut history = History::default();
    for event in events {
        for closed in repair.before(event) {
            history.apply(&closed);
        }
        history.apply(event);
    }
    for closed in repair.finish() {
        history.apply(&closed);
    }
    history
        .messages()
        .into_iter()
        .map(|message| Arc::unwrap_or_clone(message).into_message())
        .collect()
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
