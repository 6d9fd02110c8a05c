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
/// they cover. A tool call without a logged result gets a synthetic
/// "outcome unknown" result so the history stays valid for the provider.
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
    let mut messages = Vec::new();
    let mut pending_calls: Vec<String> = Vec::new();
    // Attachments follow the whole run of tool results: providers require
    // tool messages to come straight after the assistant message.
    let mut attachments: Vec<UserContent> = Vec::new();
    let mut emitted_summaries = std::collections::HashSet::new();
    let flush_pending = |messages: &mut Vec<ChatMessage>,
                         pending: &mut Vec<String>,
                         attachments: &mut Vec<UserContent>| {
        for call_id in pending.drain(..) {
            messages.push(ChatMessage::Tool {
                call_id,
                content: OUTCOME_UNKNOWN.to_owned(),
            });
        }
        if !attachments.is_empty() {
            messages.push(ChatMessage::User(std::mem::take(attachments)));
        }
    };
    for event in events {
        if let Some(index) = compactions
            .iter()
            .rposition(|(start, end, _)| (*start..=*end).contains(&event.seq))
        {
            if emitted_summaries.insert(index) {
                flush_pending(&mut messages, &mut pending_calls, &mut attachments);
                messages.push(ChatMessage::User(vec![UserContent::text(format!(
                    "<conversation-summary>\n{}\n</conversation-summary>",
                    compactions[index].2
                ))]));
            }
            continue;
        }
        match &event.data {
            EventData::UserMessage { content, .. } => {
                flush_pending(&mut messages, &mut pending_calls, &mut attachments);
                messages.push(ChatMessage::User(content.clone()));
            }
            EventData::AssistantMessage {
                text,
                reasoning,
                tool_calls,
                interrupted,
                ..
            } => {
                flush_pending(&mut messages, &mut pending_calls, &mut attachments);
                let tool_calls = if *interrupted {
                    Vec::new()
                } else {
                    tool_calls.clone()
                };
                if text.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                pending_calls.extend(tool_calls.iter().map(|call| call.id.clone()));
                messages.push(ChatMessage::Assistant {
                    text: text.clone(),
                    reasoning: reasoning.clone(),
                    tool_calls,
                });
            }
            EventData::ToolResult {
                call_id,
                output,
                attachments: extra,
                ..
            } => {
                if let Some(pos) = pending_calls.iter().position(|id| id == call_id) {
                    pending_calls.remove(pos);
                    messages.push(ChatMessage::Tool {
                        call_id: call_id.clone(),
                        content: output.clone(),
                    });
                    attachments.extend(extra.iter().cloned());
                }
            }
            _ => {}
        }
    }
    flush_pending(&mut messages, &mut pending_calls, &mut attachments);
    messages
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
        assert_eq!(history.len(), 4);
        assert_eq!(
            history[2],
            ChatMessage::Tool {
                call_id: "c1".into(),
                content: OUTCOME_UNKNOWN.into()
            }
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
        assert_eq!(history.len(), 2);
        assert!(
            matches!(&history[0], ChatMessage::User(c) if matches!(&c[0], UserContent::Text{text} if text.contains("did one")))
        );
    }
}
