//! The session event log: one JSONL file per session, a header line then one
//! event per line. The log is the truth: the model's history
//! ([`crate::history`]) and the editor's view are derived from it.
//!
//! Format rules (documented in `docs/session-log.md`):
//! - the header carries `format: "dsh-session"` and `version`; a reader
//!   refuses a version newer than [`FORMAT_VERSION`];
//! - events carry a monotonic `seq` (1-based), `time` (epoch ms), `type`,
//!   `data` and optionally `ignorable: true`;
//! - a reader that meets an unknown `type` without `ignorable` refuses the
//!   log; an unknown ignorable event is skipped;
//! - a torn last line (a crash mid-write) is dropped.

use serde::{Deserialize, Serialize};

use crate::content::UserContent;
use crate::error::{ErrorCode, ErrorInfo};
use crate::ids::ToolCallId;
use crate::model::{FinishReason, ToolCallRequest, Usage};
pub use crate::plan::{PlanEntry, PlanPriority, PlanStatus};
use crate::tool::{ToolStatus, ToolView};

pub use crate::context::{InstructionFile, InstructionStatus};
pub use crate::decision::{PermissionOutcome, PlanOutcome};

/// The log format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
/// The `format` marker in every header.
pub const FORMAT_NAME: &str = "dsh-session";

/// One logged event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Monotonic sequence number, 1-based.
    pub seq: u64,
    /// Epoch milliseconds.
    pub time: u64,
    /// Readers that do not know this event may skip it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignorable: bool,
    /// Type and payload.
    #[serde(flatten)]
    pub data: EventData,
}

/// Why a turn stopped without an error. The one stop vocabulary: front
/// ends map it to their own (ACP's `StopReason`) at their edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished.
    EndTurn,
    /// The output limit was hit.
    MaxTokens,
    /// Too many model calls in one turn.
    MaxTurnRequests,
    /// The provider refused (content filter).
    Refusal,
    /// The user cancelled.
    Cancelled,
}

/// `turn/end.stop`: a [`StopReason`], or `"error"` for a failed turn.
mod turn_stop {
    use super::StopReason;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(stop: &Option<StopReason>, out: S) -> Result<S::Ok, S::Error> {
        match stop {
            Some(reason) => reason.serialize(out),
            None => out.serialize_str("error"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        input: D,
    ) -> Result<Option<StopReason>, D::Error> {
        let text = String::deserialize(input)?;
        if text == "error" {
            return Ok(None);
        }
        StopReason::deserialize(serde::de::value::StringDeserializer::<D::Error>::new(text))
            .map(Some)
    }
}

/// A permission rule remembered for the session ("always" answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    /// Tool the rule applies to.
    pub tool: String,
    /// Scope: a path or a command prefix; `None` for the whole tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Allow (true) or reject (false).
    pub allow: bool,
}

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionReason {
    /// The context was over the threshold before a model call.
    Pressure,
    /// The provider said the conversation is too long.
    Overflow,
    /// The user asked (`/compact`).
    Asked,
}

/// A session setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigKey {
    /// The model.
    Model,
    /// The reasoning effort.
    ThoughtLevel,
    /// The permission mode.
    Mode,
    /// Whether the session offers `web_fetch` and `web_search`: `on`/`off`.
    Web,
    /// A key written by a newer dsh: ignored.
    #[serde(other)]
    Unknown,
}

impl ConfigKey {
    /// The option id (`mode`, `model`, `thought_level`, `web`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKey::Model => "model",
            ConfigKey::ThoughtLevel => "thought_level",
            ConfigKey::Mode => "mode",
            ConfigKey::Web => "web",
            ConfigKey::Unknown => "unknown",
        }
    }

    /// Parses an option id.
    pub fn parse(id: &str) -> Option<ConfigKey> {
        [Self::Mode, Self::Model, Self::ThoughtLevel, Self::Web]
            .into_iter()
            .find(|key| key.as_str() == id)
    }
}

/// Event types and payloads. The `type` strings are the wire names.
///
/// Not `#[non_exhaustive]`, on purpose: every consumer (the model's
/// history, the editor's projection) matches it exhaustively, so a new
/// event type cannot be added without deciding what each of them makes of
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum EventData {
    /// A session setting changed (`model`, `thought_level`, `mode`).
    #[serde(rename = "session/config")]
    Config {
        /// Which setting.
        key: ConfigKey,
        /// New value id.
        value: String,
    },
    /// The session title.
    #[serde(rename = "session/title")]
    Title {
        /// Title text.
        title: String,
        /// What the model call that wrote it used (a title from the
        /// model; none for the first-prompt fallback).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A user prompt.
    #[serde(rename = "user/message")]
    UserMessage {
        /// Turn number this prompt opens (a steered one: the turn it
        /// joined).
        turn: u64,
        /// The prompt.
        content: Vec<UserContent>,
        /// Sent while the turn ran and delivered into it at a step
        /// boundary, after the step's tool results (it opens no turn).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        steered: bool,
        /// Who sent it: the user (the default, not written), or dsh on
        /// the user's behalf (a goal round's continuation, a wake-up).
        #[serde(default, skip_serializing_if = "MessageSource::is_user")]
        source: MessageSource,
    },
    /// A turn began.
    #[serde(rename = "turn/start")]
    TurnStart {
        /// Turn number.
        turn: u64,
    },
    /// A turn ended.
    #[serde(rename = "turn/end")]
    TurnEnd {
        /// Turn number.
        turn: u64,
        /// Why it stopped; `None` (written `"error"`) when it failed.
        #[serde(with = "turn_stop")]
        stop: Option<StopReason>,
        /// The failure, when `stop` is `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorInfo>,
    },
    /// One model reply (a step), with what was delivered even when
    /// interrupted.
    #[serde(rename = "assistant/message")]
    AssistantMessage {
        /// Turn number.
        turn: u64,
        /// Step within the turn, 1-based.
        step: u64,
        /// Visible text.
        #[serde(default)]
        text: String,
        /// Reasoning text.
        #[serde(default)]
        reasoning: String,
        /// Tool calls (absent when interrupted before dispatch).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallRequest>,
        /// Provider usage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Tokens in the context window as dsh estimated them, when the
        /// provider sent no usage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        estimated_context: Option<u64>,
        /// Why the call finished.
        finish: FinishReason,
        /// True when the stream was cut (cancel or failure) and this is the
        /// delivered prefix.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
        /// The model used.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        model: String,
    },
    /// A tool call is about to be decided and run.
    #[serde(rename = "tool/call")]
    ToolCall {
        /// Turn number.
        turn: u64,
        /// Call id.
        call_id: ToolCallId,
        /// Tool name.
        name: String,
        /// Raw JSON arguments.
        arguments: String,
        /// How the call is presented.
        #[serde(default)]
        view: ToolView,
    },
    /// The outcome of a tool call.
    #[serde(rename = "tool/result")]
    ToolResult {
        /// Turn number.
        turn: u64,
        /// Call id.
        call_id: ToolCallId,
        /// Completed or failed.
        status: ToolStatus,
        /// What the model sees.
        output: String,
        /// Error, when failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorInfo>,
        /// Final presentation (diffs, locations).
        #[serde(default)]
        view: ToolView,
        /// Content the model sees after the tool results (images a tool
        /// read), in a user message.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<UserContent>,
        /// The client terminal that showed the command live (its id is good
        /// for that connection only: replay shows `view` instead).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        live_terminal: Option<String>,
        /// The background job the call started: the call stays in
        /// progress until its `job/end`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job: Option<String>,
        /// Tokens the call spent on model requests of its own (a
        /// subagent's), counted in the session's usage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A background job ended (exited, was killed, or died with dsh's
    /// session closing).
    #[serde(rename = "job/end")]
    JobEnd {
        /// The job id.
        job_id: String,
        /// The call that started it.
        call_id: ToolCallId,
        /// `exited N`, `killed` or `signal N`.
        status: String,
        /// It failed (a non-zero exit, a signal, killed).
        failed: bool,
        /// What the model is told at its next step.
        summary: String,
        /// The call's final presentation (the output's tail).
        #[serde(default)]
        view: ToolView,
        /// Tokens the job spent on model requests (a background
        /// subagent's), counted in the session's usage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A permission prompt was answered (or failed closed).
    #[serde(rename = "permission/decision")]
    PermissionDecision {
        /// Call id.
        call_id: ToolCallId,
        /// The answer.
        outcome: PermissionOutcome,
    },
    /// A session rule from an "always" answer.
    #[serde(rename = "permission/rule")]
    PermissionRule(PermissionRule),
    /// The latest plan (the whole list).
    #[serde(rename = "plan")]
    Plan {
        /// Entries.
        entries: Vec<PlanEntry>,
    },
    /// A summary that replaces events `start..=end` for the model; the full
    /// transcript stays in the log for replay.
    #[serde(rename = "compaction/summary")]
    CompactionSummary {
        /// First replaced seq.
        start: u64,
        /// Last replaced seq.
        end: u64,
        /// The summary text.
        summary: String,
        /// What the editor was shown it as (a tool call id), when dsh
        /// showed it (absent in logs before 2026-12).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<ToolCallId>,
        /// Messages the summary replaced.
        #[serde(default, skip_serializing_if = "is_zero")]
        messages: u64,
        /// Estimated tokens of the conversation before and after.
        #[serde(default, skip_serializing_if = "is_zero")]
        tokens_before: u64,
        /// See `tokens_before`.
        #[serde(default, skip_serializing_if = "is_zero")]
        tokens_after: u64,
    },
    /// The user's answer to a plan (`exit_plan_mode`); an approval is
    /// followed by the mode's `session/config` (ignorable: nothing is
    /// derived from it).
    #[serde(rename = "plan/decision")]
    PlanDecision {
        /// The `exit_plan_mode` call.
        call_id: ToolCallId,
        /// The answer.
        outcome: PlanOutcome,
        /// What the user wants changed (keep planning, from a form).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// The user's answers to an `ask_user_question` call (ignorable: the
    /// model and the editor get them from the call's `tool/result`).
    #[serde(rename = "question/decision")]
    QuestionDecision {
        /// The `ask_user_question` call.
        call_id: ToolCallId,
        /// Answered, declined, cancelled or unavailable.
        outcome: crate::question::QuestionOutcome,
        /// One per question, in order, when answered.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        answers: Vec<crate::question::QuestionAnswer>,
    },
    /// A summary of the conversation was started (shown as a "Compact
    /// conversation" tool call until its `compaction/summary` or
    /// `compaction/failed`; ignorable).
    #[serde(rename = "compaction/start")]
    CompactionStart {
        /// The tool call the editor is shown.
        call_id: ToolCallId,
        /// Why it runs.
        reason: CompactionReason,
    },
    /// A started summary replaced nothing (nothing to summarize, no
    /// summarization model, an empty or failed summary call, a cancel);
    /// ignorable.
    #[serde(rename = "compaction/failed")]
    CompactionFailed {
        /// The tool call of its `compaction/start`.
        call_id: ToolCallId,
        /// What the user is told.
        message: String,
    },
    /// Old tool results cut to their head and tail for the model (no model
    /// call); the log keeps them whole.
    #[serde(rename = "compaction/prune")]
    CompactionPrune {
        /// The calls whose results were cut.
        calls: Vec<ToolCallId>,
        /// Code points kept from the start of each.
        head_chars: usize,
        /// Code points kept from the end of each.
        tail_chars: usize,
    },
    /// Workspace instructions (AGENTS.md and the like) handed to the model
    /// as user-role context: the text it sees, and the files it came from.
    #[serde(rename = "context/instructions")]
    Instructions {
        /// The rendered `<system-reminder>` block.
        text: String,
        /// The files, with what happened to each.
        files: Vec<InstructionFile>,
    },
    /// The session's skill catalog (names and descriptions of the
    /// `SKILL.md` files found), handed to the model once, with the first
    /// prompt, as user-role context like the instructions.
    #[serde(rename = "context/skills")]
    Skills {
        /// The rendered `<system-reminder>` block.
        text: String,
        /// The skills it lists, by name.
        skills: Vec<String>,
    },
    /// The files a turn changed, with their hashes before and after
    /// (recorded before its `turn/end`; `/undo` puts them back).
    #[serde(rename = "checkpoint")]
    Checkpoint {
        /// The turn.
        turn: u64,
        /// The files.
        files: Vec<crate::checkpoint::CheckpointFile>,
    },
    /// `/undo` put back the files of a turn's checkpoint. The editor sees
    /// it as a tool call with a diff per file; the model is told before
    /// the next prompt.
    #[serde(rename = "undo")]
    Undo {
        /// The turn whose changes were reverted.
        turn: u64,
        /// The tool call the editor is shown.
        call_id: ToolCallId,
        /// What it shows: the diffs, or what could not be done.
        view: ToolView,
        /// What the model is told.
        summary: String,
    },
    /// What dsh itself says to the user (a command's answer): shown as a
    /// message, never part of the model's history (ignorable).
    #[serde(rename = "agent/notice")]
    Notice {
        /// Markdown text.
        text: String,
    },
    /// A model request is retried (log-only, ignorable).
    #[serde(rename = "llm/retry")]
    LlmRetry {
        /// Attempt number (1 = first retry).
        attempt: u32,
        /// Wait before the retry.
        delay_ms: u64,
        /// What failed.
        error: ErrorInfo,
    },
    /// A hook ran (log-only, ignorable; shown when it blocked or failed).
    #[serde(rename = "hook/result")]
    HookResult(crate::hook::HookRun),
    /// The answer to "Run this project's hooks?" for one content of the
    /// file (ignorable: an older reader asks again).
    #[serde(rename = "hook/consent")]
    HookConsent(crate::hook::HookConsent),
    /// The session's goal changed: its whole state after the change, or
    /// (`change: cleared`) the goal that was cleared, as a tombstone
    /// (log-only, ignorable: the model's history is not made of it).
    #[serde(rename = "goal/change")]
    GoalChange {
        /// What happened.
        change: GoalChangeKind,
        /// The goal after it (cleared: as it was).
        goal: Goal,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Every event type this build understands.
pub const KNOWN_TYPES: &[&str] = &[
    "session/config",
    "session/title",
    "user/message",
    "turn/start",
    "turn/end",
    "assistant/message",
    "tool/call",
    "tool/result",
    "job/end",
    "permission/decision",
    "permission/rule",
    "plan",
    "compaction/summary",
    "compaction/prune",
    "compaction/start",
    "compaction/failed",
    "plan/decision",
    "question/decision",
    "context/instructions",
    "context/skills",
    "agent/notice",
    "checkpoint",
    "undo",
    "llm/retry",
    "hook/result",
    "hook/consent",
    "goal/change",
];

impl EventData {
    /// True for events no reader needs to rebuild the model history; they
    /// are written with `ignorable: true` so older readers skip them.
    pub fn is_ignorable(&self) -> bool {
        matches!(
            self,
            EventData::LlmRetry { .. }
                | EventData::Notice { .. }
                | EventData::CompactionStart { .. }
                | EventData::CompactionFailed { .. }
                | EventData::PlanDecision { .. }
                | EventData::QuestionDecision { .. }
                | EventData::HookResult(_)
                | EventData::HookConsent(_)
                | EventData::GoalChange { .. }
        )
    }
}

/// Why a log could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    /// Stable code.
    pub code: ErrorCode,
    /// Explanation with the line number.
    pub message: String,
}

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LogError {}

/// A parsed log.
#[derive(Debug, Clone)]
pub struct ParsedLog {
    /// The header.
    pub header: SessionHeader,
    /// Known events, in order (unknown ignorable ones dropped).
    pub events: Vec<Event>,
    /// The highest seq seen, ignorable unknowns included.
    pub last_seq: u64,
    /// Byte length of the valid prefix; anything after it is a torn line.
    pub valid_len: usize,
}

/// What one line of a log was.
#[derive(Debug)]
pub enum LogLine {
    /// The header (the first non-blank line).
    Header(SessionHeader),
    /// A known event.
    Event(Event),
    /// A blank line or an unknown ignorable event: nothing to use.
    Skipped,
    /// A torn last line (a crash mid-write): the log ends before it.
    Torn,
}

/// Reads a log one line at a time, so a reader never holds more than a
/// line of it: the header first, then events. A torn last line is
/// tolerated; every other bad line is an error naming the line.
#[derive(Debug, Default)]
pub struct LogParser {
    line_no: usize,
    has_header: bool,
    /// The highest seq seen, ignorable unknowns included.
    pub last_seq: u64,
}

impl LogParser {
    /// Parses the next line (without its newline); `last` says whether
    /// nothing follows it.
    ///
    /// # Errors
    /// A bad header, a newer format, an unknown required event or a corrupt
    /// line that is not the last.
    pub fn line(&mut self, line: &[u8], last: bool) -> Result<LogLine, LogError> {
        self.line_no += 1;
        let line_no = self.line_no;
        let torn = |message: String| -> Result<LogLine, LogError> {
            if last {
                Ok(LogLine::Torn)
            } else {
                Err(LogError {
                    code: ErrorCode::SessionLogCorrupt,
                    message,
                })
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(LogLine::Skipped);
        }
        if self.has_header {
            // Fast path: a known event parses straight into its type (in
            // one pass; the derived reader, which copies the line into a
            // tree first, for anything that one does not take).
            if let Ok(event) =
                Event::from_json(line).or_else(|_| serde_json::from_slice::<Event>(line))
            {
                self.last_seq = self.last_seq.max(event.seq);
                return Ok(LogLine::Event(event));
            }
        }
        let value: serde_json::Value = match serde_json::from_slice(line) {
            Ok(value) => value,
            Err(err) => {
                return torn(format!(
                    "session log line {line_no} is not valid JSON: {err}"
                ))
            }
        };
        if !self.has_header {
            let header: SessionHeader = serde_json::from_value(value).map_err(|err| LogError {
                code: ErrorCode::SessionLogCorrupt,
                message: format!("session log header is invalid: {err}"),
            })?;
            if header.format != FORMAT_NAME {
                return Err(LogError {
                    code: ErrorCode::SessionLogCorrupt,
                    message: format!("not a dsh session log (format {:?})", header.format),
                });
            }
            if header.version > FORMAT_VERSION {
                return Err(LogError {
                    code: ErrorCode::SessionLogVersion,
                    message: format!(
                        "session log format version {} is newer than this dsh understands ({FORMAT_VERSION}); upgrade dsh",
                        header.version
                    ),
                });
            }
            self.has_header = true;
            return Ok(LogLine::Header(header));
        }
        let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("");
        if KNOWN_TYPES.contains(&kind) {
            // Known type, but the fast path failed: the payload is bad.
            let kind = kind.to_owned();
            let err = serde_json::from_value::<Event>(value)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return torn(format!(
                "session log line {line_no} ({kind}) is invalid: {err}"
            ));
        }
        if !value
            .get("ignorable")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
        {
            return Err(LogError {
                code: ErrorCode::SessionLogVersion,
                message: format!(
                    "session log line {line_no} has event type {kind:?}, which this dsh does not know and which is not marked ignorable; it was probably written by a newer dsh — upgrade dsh to open this session"
                ),
            });
        }
        let seq = value.get("seq").and_then(|v| v.as_u64()).unwrap_or(0);
        self.last_seq = self.last_seq.max(seq);
        Ok(LogLine::Skipped)
    }

    /// The error for a log that ended without a header.
    pub fn no_header() -> LogError {
        LogError {
            code: ErrorCode::SessionLogCorrupt,
            message: "session log is empty (no header)".to_owned(),
        }
    }
}

/// Parses a whole log held in memory (tests and tools; dsh itself reads
/// logs a line at a time with [`LogParser`]).
///
/// # Errors
/// As [`LogParser::line`], and a log without a header.
pub fn parse_log(bytes: &[u8]) -> Result<ParsedLog, LogError> {
    let mut parser = LogParser::default();
    let mut header = None;
    let mut events = Vec::new();
    let mut valid_len = 0usize;
    let mut offset = 0usize;
    while offset < bytes.len() {
        let (line, next, terminated) = match bytes[offset..].iter().position(|b| *b == b'\n') {
            Some(pos) => (&bytes[offset..offset + pos], offset + pos + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        let blank = line.iter().all(u8::is_ascii_whitespace);
        match parser.line(line, next >= bytes.len())? {
            LogLine::Header(parsed) => header = Some(parsed),
            LogLine::Event(event) => events.push(event),
            LogLine::Skipped => {}
            LogLine::Torn => break,
        }
        // A complete value without its newline is used (every byte
        // arrived); the writer adds the missing newline before its next
        // append. A blank line counts once it is terminated.
        if terminated || !blank {
            valid_len = next;
        }
        offset = next;
    }
    Ok(ParsedLog {
        header: header.ok_or_else(LogParser::no_header)?,
        events,
        last_seq: parser.last_seq,
        valid_len,
    })
}

#[path = "log_read.rs"]
mod read;

#[path = "log_header.rs"]
mod header;
pub use header::{ForkOrigin, SessionHeader, SubagentOrigin};

#[path = "log_goal.rs"]
mod goal;
pub use goal::{Goal, GoalChangeKind, GoalPhase, MessageSource};

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
