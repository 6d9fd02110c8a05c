//! The session event log: one JSONL file per session, a header line then one
//! event per line. The log is the truth: model history and replayed editor
//! updates are derived from it (see [`derive_history`]).
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
use crate::model::{ChatMessage, FinishReason, ToolCallRequest, Usage};
use crate::tool::{ToolStatus, ToolView};

/// The log format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
/// The `format` marker in every header.
pub const FORMAT_NAME: &str = "dsh-session";

/// The first line of every session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// Format version.
    pub version: u32,
    /// Session id.
    pub id: String,
    /// Creation time, epoch ms.
    pub created_at: u64,
    /// Absolute working directory.
    pub cwd: String,
    /// Extra workspace roots (ACP `additionalDirectories`).
    #[serde(default)]
    pub roots: Vec<String>,
    /// MCP servers the client passed, as it passed them.
    #[serde(default)]
    pub mcp_servers: serde_json::Value,
}

impl SessionHeader {
    /// A header for a new session.
    pub fn new(id: String, created_at: u64, cwd: String, roots: Vec<String>) -> Self {
        SessionHeader {
            format: FORMAT_NAME.to_owned(),
            version: FORMAT_VERSION,
            id,
            created_at,
            cwd,
            roots,
            mcp_servers: serde_json::Value::Array(Vec::new()),
        }
    }
}

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

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnStop {
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
    /// The turn failed; see the error.
    Error,
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

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
    /// `high`, `medium` or `low`.
    #[serde(default = "default_priority")]
    pub priority: String,
}

fn default_priority() -> String {
    "medium".to_owned()
}

/// Event types and payloads. The `type` strings are the wire names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
#[non_exhaustive]
pub enum EventData {
    /// A session setting changed (`model`, `thought_level`, `mode`).
    #[serde(rename = "session/config")]
    Config {
        /// Option id.
        key: String,
        /// New value id.
        value: String,
    },
    /// The session title.
    #[serde(rename = "session/title")]
    Title {
        /// Title text.
        title: String,
    },
    /// A user prompt.
    #[serde(rename = "user/message")]
    UserMessage {
        /// Turn number this prompt opens.
        turn: u64,
        /// The prompt.
        content: Vec<UserContent>,
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
        /// Why it ended.
        stop: TurnStop,
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
        call_id: String,
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
        call_id: String,
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
    },
    /// A permission prompt was answered (or failed closed).
    #[serde(rename = "permission/decision")]
    PermissionDecision {
        /// Call id.
        call_id: String,
        /// `allow_once`, `allow_always`, `reject_once`, `reject_always`,
        /// `cancelled` or `unavailable`.
        outcome: String,
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
    "permission/decision",
    "permission/rule",
    "plan",
    "compaction/summary",
    "llm/retry",
];

impl EventData {
    /// True for events no reader needs to rebuild the model history; they
    /// are written with `ignorable: true` so older readers skip them.
    pub fn is_ignorable(&self) -> bool {
        matches!(self, EventData::LlmRetry { .. })
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

/// Parses a whole log. A torn last line is tolerated (`valid_len` excludes
/// it); every other bad line is an error naming the line.
///
/// # Errors
/// A bad header, a newer format, an unknown required event or a corrupt line
/// that is not the last.
pub fn parse_log(bytes: &[u8]) -> Result<ParsedLog, LogError> {
    let mut offset = 0usize;
    let mut line_no = 0usize;
    let mut header: Option<SessionHeader> = None;
    let mut events = Vec::new();
    let mut last_seq = 0u64;
    let mut valid_len = 0usize;
    while offset < bytes.len() {
        let (line, next, terminated) = match bytes[offset..].iter().position(|b| *b == b'\n') {
            Some(pos) => (&bytes[offset..offset + pos], offset + pos + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        line_no += 1;
        let is_last = next >= bytes.len();
        let torn = |message: String| -> Result<(), LogError> {
            if is_last {
                Ok(())
            } else {
                Err(LogError {
                    code: ErrorCode::SessionLogCorrupt,
                    message,
                })
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            offset = next;
            if terminated {
                valid_len = next;
            }
            continue;
        }
        if header.is_some() {
            // Fast path: a known event parses straight into its type.
            if let Ok(event) = serde_json::from_slice::<Event>(line) {
                last_seq = last_seq.max(event.seq);
                events.push(event);
                offset = next;
                valid_len = next;
                continue;
            }
        }
        let value: serde_json::Value = match serde_json::from_slice(line) {
            Ok(value) => value,
            Err(err) => {
                torn(format!(
                    "session log line {line_no} is not valid JSON: {err}"
                ))?;
                break;
            }
        };
        if header.is_none() {
            let parsed: SessionHeader = serde_json::from_value(value).map_err(|err| LogError {
                code: ErrorCode::SessionLogCorrupt,
                message: format!("session log header is invalid: {err}"),
            })?;
            if parsed.format != FORMAT_NAME {
                return Err(LogError {
                    code: ErrorCode::SessionLogCorrupt,
                    message: format!("not a dsh session log (format {:?})", parsed.format),
                });
            }
            if parsed.version > FORMAT_VERSION {
                return Err(LogError {
                    code: ErrorCode::SessionLogVersion,
                    message: format!(
                        "session log format version {} is newer than this dsh understands ({FORMAT_VERSION}); upgrade dsh",
                        parsed.version
                    ),
                });
            }
            header = Some(parsed);
        } else {
            let kind = value
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_owned();
            let ignorable = value
                .get("ignorable")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            let seq = value.get("seq").and_then(|v| v.as_u64()).unwrap_or(0);
            if KNOWN_TYPES.contains(&kind.as_str()) {
                // Known type, but the fast path failed: the payload is bad.
                let err = serde_json::from_value::<Event>(value)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                torn(format!(
                    "session log line {line_no} ({kind}) is invalid: {err}"
                ))?;
                break;
            }
            if !ignorable {
                return Err(LogError {
                    code: ErrorCode::SessionLogVersion,
                    message: format!(
                        "session log line {line_no} has event type {kind:?}, which this dsh does not know and which is not marked ignorable; it was probably written by a newer dsh — upgrade dsh to open this session"
                    ),
                });
            }
            last_seq = last_seq.max(seq);
        }
        // A complete value without its newline is used (every byte arrived);
        // the writer adds the missing newline before its next append.
        offset = next;
        valid_len = next;
    }
    let header = header.ok_or_else(|| LogError {
        code: ErrorCode::SessionLogCorrupt,
        message: "session log is empty (no header)".to_owned(),
    })?;
    Ok(ParsedLog {
        header,
        events,
        last_seq,
        valid_len,
    })
}

/// Text the model sees for a tool call whose outcome was never logged
/// (the process died while it ran).
pub const OUTCOME_UNKNOWN: &str = "The outcome of this tool call is unknown: dsh stopped while it was running. Check the current state before relying on it.";

/// Derives the model conversation from the log: user prompts, assistant
/// replies (interrupted ones keep their delivered text and lose undispatched
/// tool calls), tool results, with compaction summaries replacing the range
/// they cover. Tool calls carry the model's own ids (see
/// [`ToolCallRequest::provider_id`]).
///
/// The result is valid for every provider, strict chat templates included:
/// - a tool call without a logged result (dsh died while it ran) gets a
///   synthetic "outcome unknown" result;
/// - roles alternate: a turn that ended without a reply (failed,
///   cancelled, cut off by a crash) is closed with a short assistant note,
///   so the next prompt never follows a user message directly;
/// - a turn that failed because the conversation outgrew the context
///   window keeps only its prompt (replaced by a note when it is large), so
///   it does not make the next request overflow too.
pub fn derive_history(events: &[Event]) -> Vec<ChatMessage> {
    // Latest compaction wins for overlapping ranges; ranges are by seq.
    let compactions: Vec<(u64, u64, &str)> = events
        .iter()
        .filter_map(|event| match &event.data {
            EventData::CompactionSummary {
                start,
                end,
                summary,
            } => Some((*start, *end, summary.as_str())),
            _ => None,
        })
        .collect();
    let mut history = History::default();
    let mut emitted_summaries = std::collections::HashSet::new();
    for event in events {
        if let Some(index) = compactions
            .iter()
            .rposition(|(start, end, _)| (*start..=*end).contains(&event.seq))
        {
            if emitted_summaries.insert(index) {
                history.flush_pending();
                history.close_open_turn(NOTE_AFTER_SUMMARY);
                history
                    .messages
                    .push(ChatMessage::User(vec![UserContent::text(format!(
                        "<conversation-summary>\n{}\n</conversation-summary>",
                        compactions[index].2
                    ))]));
                history.messages.push(ChatMessage::Assistant {
                    text: NOTE_AFTER_SUMMARY.to_owned(),
                    reasoning: String::new(),
                    tool_calls: Vec::new(),
                });
            }
            continue;
        }
        match &event.data {
            EventData::UserMessage { content, .. } => {
                history.flush_pending();
                history.close_open_turn(NOTE_NO_REPLY);
                history.turn_start = Some(history.messages.len());
                history.messages.push(ChatMessage::User(content.clone()));
            }
            EventData::AssistantMessage {
                text,
                reasoning,
                tool_calls,
                interrupted,
                ..
            } => {
                history.flush_pending();
                let tool_calls = if *interrupted {
                    &[][..]
                } else {
                    tool_calls.as_slice()
                };
                if text.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                history.pending.extend(
                    tool_calls
                        .iter()
                        .map(|call| (call.id.clone(), call.provider_id().to_owned())),
                );
                history.messages.push(ChatMessage::Assistant {
                    text: text.clone(),
                    reasoning: reasoning.clone(),
                    tool_calls: tool_calls
                        .iter()
                        .map(|call| ToolCallRequest {
                            id: call.provider_id().to_owned(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                            provider_id: None,
                        })
                        .collect(),
                });
            }
            EventData::ToolResult {
                call_id,
                output,
                attachments: extra,
                ..
            } => {
                if let Some(pos) = history.pending.iter().position(|(id, _)| id == call_id) {
                    let (_, provider_id) = history.pending.remove(pos);
                    history.messages.push(ChatMessage::Tool {
                        call_id: provider_id,
                        content: output.clone(),
                    });
                    history.attachments.extend(extra.iter().cloned());
                }
            }
            EventData::TurnEnd { stop, error, .. } => {
                history.flush_pending();
                if error
                    .as_ref()
                    .is_some_and(|error| error.code == ErrorCode::ModelContextWindowExceeded)
                {
                    history.drop_overflowed_turn();
                }
                let note = match (stop, error) {
                    (TurnStop::Cancelled, _) => {
                        "[dsh: the user cancelled this turn before it was done.]".to_owned()
                    }
                    (_, Some(error)) => format!(
                        "[dsh: this turn failed ({}): {}]",
                        error.code.as_str(),
                        crate::content::truncate_chars(&error.message, 300)
                    ),
                    (TurnStop::MaxTurnRequests, _) => {
                        "[dsh: this turn stopped: it reached the limit of model calls per turn.]"
                            .to_owned()
                    }
                    _ => NOTE_NO_REPLY.to_owned(),
                };
                history.close_open_turn(&note);
                history.turn_start = None;
            }
            _ => {}
        }
    }
    history.flush_pending();
    history.messages
}

/// Closes a turn that has no reply after its prompt or tool results.
const NOTE_NO_REPLY: &str = "[dsh: no reply was recorded for this turn.]";
/// Follows a compaction summary.
const NOTE_AFTER_SUMMARY: &str = "Understood; I will continue from this summary.";
/// Replaces a large prompt whose turn overflowed the context window.
const NOTE_DROPPED_PROMPT: &str = "[dsh: this message was removed from the conversation: together with what it produced it did not fit the model's context window.]";
/// Prompts up to this size are kept when their turn overflowed.
const KEEP_OVERFLOWED_PROMPT_BYTES: usize = 4096;

/// The conversation being derived.
#[derive(Default)]
struct History {
    messages: Vec<ChatMessage>,
    /// Calls awaiting results: (dsh id, provider id).
    pending: Vec<(String, String)>,
    /// Attachments follow the whole run of tool results: providers require
    /// tool messages to come straight after the assistant message.
    attachments: Vec<UserContent>,
    /// Where the current turn's prompt is in `messages`.
    turn_start: Option<usize>,
}

impl History {
    fn flush_pending(&mut self) {
        for (_, provider_id) in self.pending.drain(..) {
            self.messages.push(ChatMessage::Tool {
                call_id: provider_id,
                content: OUTCOME_UNKNOWN.to_owned(),
            });
        }
        if !self.attachments.is_empty() {
            self.messages
                .push(ChatMessage::User(std::mem::take(&mut self.attachments)));
        }
    }

    /// Adds an assistant note when the conversation ends in a user or tool
    /// message, so a next user message keeps the roles alternating.
    fn close_open_turn(&mut self, note: &str) {
        if matches!(
            self.messages.last(),
            Some(ChatMessage::User(_) | ChatMessage::Tool { .. })
        ) {
            self.messages.push(ChatMessage::Assistant {
                text: note.to_owned(),
                reasoning: String::new(),
                tool_calls: Vec::new(),
            });
        }
    }

    /// Keeps only the prompt of a turn that overflowed the context window
    /// (and replaces the prompt too when it is large).
    fn drop_overflowed_turn(&mut self) {
        let Some(start) = self.turn_start else {
            return;
        };
        self.messages.truncate(start + 1);
        if let Some(ChatMessage::User(content)) = self.messages.get_mut(start) {
            let size: usize = content
                .iter()
                .map(|block| match block {
                    UserContent::Text { text } => text.len(),
                    UserContent::Resource { text, .. } => text.len(),
                    UserContent::Image { data, .. } => data.len(),
                    _ => 0,
                })
                .sum();
            if size > KEEP_OVERFLOWED_PROMPT_BYTES {
                *content = vec![UserContent::text(NOTE_DROPPED_PROMPT)];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(value: serde_json::Value) -> String {
        format!("{value}\n")
    }

    fn header() -> String {
        line(
            serde_json::to_value(SessionHeader::new("s1".into(), 1, "/tmp".into(), vec![]))
                .unwrap(),
        )
    }

    fn user(seq: u64, text: &str) -> String {
        let event = Event {
            seq,
            time: 0,
            ignorable: false,
            data: EventData::UserMessage {
                turn: 1,
                content: vec![UserContent::text(text)],
            },
        };
        format!("{}\n", serde_json::to_string(&event).unwrap())
    }

    #[test]
    fn event_wire_shape() {
        let json = user(1, "hi");
        assert_eq!(
            json.trim(),
            r#"{"seq":1,"time":0,"type":"user/message","data":{"turn":1,"content":[{"type":"text","text":"hi"}]}}"#
        );
    }

    #[test]
    fn torn_last_line_is_dropped() {
        let good = format!("{}{}", header(), user(1, "a"));
        let torn = format!("{good}{{\"seq\":2,\"time\":0,\"type\":\"user/mes");
        let parsed = parse_log(torn.as_bytes()).unwrap();
        assert_eq!(parsed.events.len(), 1);
        assert_eq!(parsed.valid_len, good.len());
    }

    #[test]
    fn corrupt_middle_line_is_refused() {
        let log = format!("{}garbage\n{}", header(), user(2, "b"));
        let err = parse_log(log.as_bytes()).unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionLogCorrupt);
        assert!(err.message.contains("line 2"), "{}", err.message);
    }

    #[test]
    fn unknown_required_event_is_refused_and_ignorable_skipped() {
        let ignorable = line(
            serde_json::json!({"seq":2,"time":0,"type":"future/thing","data":{},"ignorable":true}),
        );
        let log = format!("{}{}{ignorable}{}", header(), user(1, "a"), user(3, "b"));
        let parsed = parse_log(log.as_bytes()).unwrap();
        assert_eq!(parsed.events.len(), 2);
        assert_eq!(parsed.last_seq, 3);

        let required = line(serde_json::json!({"seq":2,"time":0,"type":"future/thing","data":{}}));
        let log = format!("{}{}{required}", header(), user(1, "a"));
        let err = parse_log(log.as_bytes()).unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionLogVersion);
        assert!(err.message.contains("future/thing"));
    }

    #[test]
    fn newer_version_is_refused() {
        let mut header = SessionHeader::new("s".into(), 0, "/".into(), vec![]);
        header.version = FORMAT_VERSION + 1;
        let err = parse_log(line(serde_json::to_value(header).unwrap()).as_bytes()).unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionLogVersion);
    }

    #[test]
    fn history_repairs_unfinished_calls_and_applies_compaction() {
        let call = ToolCallRequest {
            id: "c1".into(),
            name: "read".into(),
            arguments: "{}".into(),
            provider_id: None,
        };
        let mk = |seq, data| Event {
            seq,
            time: 0,
            ignorable: false,
            data,
        };
        let events = vec![
            mk(
                1,
                EventData::UserMessage {
                    turn: 1,
                    content: vec![UserContent::text("one")],
                },
            ),
            mk(
                2,
                EventData::AssistantMessage {
                    turn: 1,
                    step: 1,
                    text: String::new(),
                    reasoning: "r".into(),
                    tool_calls: vec![call],
                    usage: None,
                    estimated_context: None,
                    finish: FinishReason::ToolCalls,
                    interrupted: false,
                    model: String::new(),
                },
            ),
            mk(
                3,
                EventData::UserMessage {
                    turn: 2,
                    content: vec![UserContent::text("two")],
                },
            ),
        ];
        let history = derive_history(&events);
        assert_eq!(history.len(), 5);
        assert_eq!(
            history[2],
            ChatMessage::Tool {
                call_id: "c1".into(),
                content: OUTCOME_UNKNOWN.into()
            }
        );
        assert!(
            matches!(&history[3], ChatMessage::Assistant { text, .. } if text == NOTE_NO_REPLY)
        );

        let mut compacted = events.clone();
        compacted.push(mk(
            4,
            EventData::CompactionSummary {
                start: 1,
                end: 2,
                summary: "did one".into(),
            },
        ));
        let history = derive_history(&compacted);
        assert_eq!(history.len(), 3);
        assert!(
            matches!(&history[0], ChatMessage::User(c) if matches!(&c[0], UserContent::Text{text} if text.contains("did one")))
        );
    }

    fn mk(seq: u64, data: EventData) -> Event {
        Event {
            seq,
            time: 0,
            ignorable: false,
            data,
        }
    }

    fn prompt(turn: u64, text: &str) -> EventData {
        EventData::UserMessage {
            turn,
            content: vec![UserContent::text(text)],
        }
    }

    fn failed(turn: u64, code: ErrorCode) -> EventData {
        EventData::TurnEnd {
            turn,
            stop: TurnStop::Error,
            error: Some(ErrorInfo {
                code,
                message: "it failed".into(),
            }),
        }
    }

    fn roles(history: &[ChatMessage]) -> Vec<&'static str> {
        history
            .iter()
            .map(|message| match message {
                ChatMessage::System(_) => "system",
                ChatMessage::User(_) => "user",
                ChatMessage::Assistant { .. } => "assistant",
                ChatMessage::Tool { .. } => "tool",
            })
            .collect()
    }

    /// Issue 10, item 19: failed and cancelled turns, and a crash, never
    /// leave two user messages in a row.
    #[test]
    fn failed_turns_keep_roles_alternating() {
        let events = vec![
            mk(1, prompt(1, "one")),
            mk(2, failed(1, ErrorCode::ModelServer)),
            mk(3, prompt(2, "two")),
            mk(
                4,
                EventData::TurnEnd {
                    turn: 2,
                    stop: TurnStop::Cancelled,
                    error: None,
                },
            ),
            mk(5, prompt(3, "three")),
            // dsh died here: no turn/end.
            mk(6, prompt(4, "four")),
        ];
        let history = derive_history(&events);
        assert_eq!(
            roles(&history),
            [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant",
                "user"
            ]
        );
        assert!(
            matches!(&history[1], ChatMessage::Assistant { text, .. } if text.contains("model.server"))
        );
        assert!(
            matches!(&history[3], ChatMessage::Assistant { text, .. } if text.contains("cancelled"))
        );
    }

    /// Issue 10, item 19: a turn that overflowed the window keeps a short
    /// prompt, drops a large one and everything the turn produced.
    #[test]
    fn an_overflowed_turn_does_not_overflow_the_next() {
        let call = ToolCallRequest {
            id: "c1".into(),
            name: "read".into(),
            arguments: "{}".into(),
            provider_id: None,
        };
        let big = "x".repeat(100_000);
        let events = vec![
            mk(1, prompt(1, &big)),
            mk(
                2,
                EventData::AssistantMessage {
                    turn: 1,
                    step: 1,
                    text: String::new(),
                    reasoning: String::new(),
                    tool_calls: vec![call],
                    usage: None,
                    estimated_context: None,
                    finish: FinishReason::ToolCalls,
                    interrupted: false,
                    model: String::new(),
                },
            ),
            mk(
                3,
                EventData::ToolResult {
                    turn: 1,
                    call_id: "c1".into(),
                    status: ToolStatus::Completed,
                    output: big.clone(),
                    error: None,
                    view: ToolView::default(),
                    attachments: Vec::new(),
                },
            ),
            mk(4, failed(1, ErrorCode::ModelContextWindowExceeded)),
            mk(5, prompt(2, "short again")),
        ];
        let history = derive_history(&events);
        assert_eq!(roles(&history), ["user", "assistant", "user"]);
        assert!(
            matches!(&history[0], ChatMessage::User(c) if matches!(&c[0], UserContent::Text { text } if text == NOTE_DROPPED_PROMPT))
        );
        let size: usize = history
            .iter()
            .map(|m| match m {
                ChatMessage::User(c) => c
                    .iter()
                    .map(|b| match b {
                        UserContent::Text { text } => text.len(),
                        _ => 0,
                    })
                    .sum(),
                ChatMessage::Assistant { text, .. } => text.len(),
                ChatMessage::Tool { content, .. } => content.len(),
                ChatMessage::System(t) => t.len(),
            })
            .sum();
        assert!(size < 2000, "{size}");
    }

    /// Issue 10, item 16: a renamed call keeps the model's id in the history.
    #[test]
    fn renamed_calls_keep_the_models_id_for_the_provider() {
        let calls = vec![
            ToolCallRequest {
                id: "call_1".into(),
                name: "read".into(),
                arguments: "{}".into(),
                provider_id: None,
            },
            ToolCallRequest {
                id: "call_1~2".into(),
                name: "read".into(),
                arguments: "{}".into(),
                provider_id: Some("call_1".into()),
            },
        ];
        let result = |seq, id: &str| {
            mk(
                seq,
                EventData::ToolResult {
                    turn: 1,
                    call_id: id.into(),
                    status: ToolStatus::Completed,
                    output: id.into(),
                    error: None,
                    view: ToolView::default(),
                    attachments: Vec::new(),
                },
            )
        };
        let events = vec![
            mk(1, prompt(1, "go")),
            mk(
                2,
                EventData::AssistantMessage {
                    turn: 1,
                    step: 1,
                    text: String::new(),
                    reasoning: String::new(),
                    tool_calls: calls,
                    usage: None,
                    estimated_context: None,
                    finish: FinishReason::ToolCalls,
                    interrupted: false,
                    model: String::new(),
                },
            ),
            result(3, "call_1"),
            result(4, "call_1~2"),
        ];
        let history = derive_history(&events);
        assert!(
            matches!(&history[1], ChatMessage::Assistant { tool_calls, .. } if tool_calls.iter().all(|c| c.id == "call_1"))
        );
        assert_eq!(
            history[2],
            ChatMessage::Tool {
                call_id: "call_1".into(),
                content: "call_1".into()
            }
        );
        assert_eq!(
            history[3],
            ChatMessage::Tool {
                call_id: "call_1".into(),
                content: "call_1~2".into()
            }
        );
    }
}
