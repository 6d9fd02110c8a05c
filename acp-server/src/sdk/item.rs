//! What `session.event` notifications carry: the SDK's own notification
//! vocabulary (versioned by `initialize`'s `protocolVersion`; docs/sdk.md),
//! each item serialized once for every subscriber.

use dsh_protocol::log::{Event, StopReason};
use dsh_protocol::question::UserQuestion;
use dsh_protocol::tool::{FileLocation, ToolContent, ToolKind};
use dsh_protocol::ToolCallId;
use serde::Serialize;
use serde_json::value::RawValue;

/// What `session.event` notifications carry.
#[derive(Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Item<'a> {
    /// A logged event, as stored.
    Event {
        /// The event.
        event: &'a Event,
    },
    /// Streamed text or reasoning.
    Delta {
        /// `text` or `thought`, or `output`: a running command's output.
        channel: &'static str,
        /// The chunk.
        text: &'a str,
        /// The call whose output it is (`output`).
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<&'a ToolCallId>,
    },
    /// Whether a prompt runs.
    Status {
        /// `queued`, `steering`, `running`, `idle` (its turn ended),
        /// `answered` (it ended without a turn of its own) or `closed`.
        status: &'static str,
        /// The prompt's receipt.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<&'a str>,
        /// How the prompt ended (idle after a prompt).
        #[serde(skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
        /// Why it failed (idle after a failed prompt).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<serde_json::Value>,
        /// What the session's model calls cost so far (`{amount,
        /// currency}`), once a priced model answered.
        #[serde(skip_serializing_if = "Option::is_none")]
        cost: Option<&'a dsh_protocol::model::Cost>,
        /// A wake-up turn's (`running` and `idle`): the jobs whose end
        /// started it, and its place among the wake-ups since the user's
        /// last prompt.
        #[serde(skip_serializing_if = "Option::is_none")]
        wakeup: Option<&'a WakeMark>,
    },
    /// A question for a client to answer with `session/respond`: a
    /// permission, or a plan review (`question`).
    Permission {
        /// The ask's id.
        request_id: &'a str,
        /// `permission` or `plan`.
        question: &'static str,
        /// The call.
        tool_call: AskedCall<'a>,
        /// The answers offered.
        options: Vec<OfferedOption>,
    },
    /// The goal's status, after each `goal/change`: `change` is `round`
    /// as a goal round starts (the goal counts it), else what changed.
    Goal {
        /// What changed.
        change: dsh_protocol::log::GoalChangeKind,
        /// The goal after it.
        goal: &'a dsh_protocol::log::Goal,
    },
    /// The model's questions (`ask_user_question`), for a client to
    /// answer with `session/answer`.
    Question {
        /// The ask's id.
        request_id: &'a str,
        /// The call.
        tool_call: AskedCall<'a>,
        /// The questions, in order.
        questions: &'a [UserQuestion],
    },
}

/// What marks a wake-up turn's status (a turn a job's end started).
#[derive(Debug, Clone, Serialize)]
pub struct WakeMark {
    /// The jobs whose end started it.
    pub jobs: Vec<String>,
    /// Its place among the wake-ups since the user's last prompt
    /// (1-based; at most `[jobs] max_consecutive_wakes`).
    pub count: u32,
}

/// The tool call a question is about, as the SDK shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedCall<'a> {
    /// Its id.
    pub call_id: &'a ToolCallId,
    /// Its title.
    pub title: &'a str,
    /// Its kind.
    pub kind: ToolKind,
    /// Its arguments.
    pub raw_input: &'a serde_json::Value,
    /// The files it touches.
    pub locations: &'a [FileLocation],
    /// What it will do.
    pub content: &'a [ToolContent],
}

/// One answer a question offers, as the SDK shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferedOption {
    /// What `session/respond` answers with.
    pub option_id: &'static str,
    /// What to show.
    pub label: String,
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`: a
    /// hint for the UI; the id carries the meaning.
    pub kind: &'static str,
}

impl Item<'_> {
    /// Serializes the item (a bug if it fails: every part is plain data).
    pub fn to_raw(&self) -> Box<RawValue> {
        serde_json::value::to_raw_value(self).unwrap_or_else(|err| {
            tracing::error!(%err, "cannot serialize an SDK notice");
            RawValue::from_string("{\"kind\":\"error\"}".to_owned()).unwrap_or_default()
        })
    }
}
