//! What the editor is shown, in the core's own words: the updates every
//! front end renders (ACP `session/update`s today). They come from the one
//! projection of logged events ([`crate::projection`]), except the transient
//! ones listed there.

use std::sync::Arc;

use dsh_protocol::error::ErrorInfo;
use dsh_protocol::log::{ConfigKey, PlanEntry};
use dsh_protocol::tool::{ToolStatus, ToolView};
use dsh_protocol::{ToolCallId, UserContent};

use dsh_protocol::Mode;

/// Something the editor should show.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentUpdate {
    /// A block of the user's prompt (replay only: live, the client sent it).
    UserChunk(UserContent),
    /// Visible model text, with the id of the assistant message it belongs
    /// to (none: dsh's own text, a notice).
    MessageChunk(String, Option<String>),
    /// Model reasoning, with the id of its assistant message (none: dsh's
    /// own notes).
    ThoughtChunk(String, Option<String>),
    /// Context use after a model call.
    Usage {
        /// Tokens in the context window.
        used: u64,
        /// Window size.
        size: u64,
        /// What the session's model calls cost so far (none: no priced
        /// model answered yet). Set by the session's fold.
        cost: Option<dsh_protocol::model::Cost>,
    },
    /// The session title changed, and when (epoch milliseconds: the time
    /// its event was logged).
    Title(String, u64),
    /// A tool call appeared.
    ToolCall {
        /// Call id.
        call_id: ToolCallId,
        /// Raw JSON arguments.
        arguments: String,
        /// Presentation.
        view: ToolView,
        /// Status.
        status: ToolStatus,
    },
    /// A tool call progressed or finished.
    ToolCallUpdate {
        /// Call id.
        call_id: ToolCallId,
        /// Status.
        status: ToolStatus,
        /// Presentation (replaces the call's content and locations when set).
        view: ToolView,
        /// What the call gave the model, on the update that ends it (none:
        /// still running, or not a tool's result).
        raw_output: Option<Arc<RawOutput>>,
    },
    /// The plan (whole list).
    Plan(Vec<PlanEntry>),
    /// The settings changed: every option with its current value.
    ConfigOptions(Vec<ConfigOption>),
    /// The permission mode changed (for clients that track the legacy
    /// current mode rather than config options).
    Mode(Mode),
    /// The slash commands the session offers (when it opens, and when the
    /// files behind them changed).
    Commands(Vec<crate::context::commands::Offered>),
}

/// A finished tool call's result as the model got it (ACP `rawOutput`):
/// from its `tool/result`, or a background job's `job/end`; past
/// [`RawOutput::MAX_CHARS`] only the first and the last half of that are
/// kept (a file read is up to 256 KiB, and every load sends it again).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RawOutput {
    /// The text the model was given (a job: what it is told of the end).
    pub output: String,
    /// The error, when the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// The background job that ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// How it ended: `exited N`, `killed` or `signal N`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_status: Option<String>,
}

impl RawOutput {
    /// The most of the model's text it carries, in characters.
    pub const MAX_CHARS: usize = 16 * 1024;

    /// What the model got, its middle cut past [`Self::MAX_CHARS`].
    pub fn of(output: &str, error: Option<ErrorInfo>) -> RawOutput {
        let half = Self::MAX_CHARS / 2;
        RawOutput {
            output: dsh_protocol::content::prune_middle(output, half, half),
            error,
            job_id: None,
            job_status: None,
        }
    }
}

/// The id of the assistant message of a turn's step: known when the step
/// starts streaming and derived from the logged `assistant/message` on
/// replay, so live chunks and replayed ones carry the same id.
pub fn message_id(turn: u64, step: u64) -> String {
    format!("{turn}-{step}")
}

/// One selectable value of a setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    /// Value id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
}

/// One session setting with its choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigOption {
    /// Which setting (also its menu: mode, model, thought level).
    pub key: ConfigKey,
    /// Display name.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Current value id.
    pub current: String,
    /// An on/off switch: its values are `on` and `off` (a client that
    /// shows toggles shows one).
    pub toggle: bool,
    /// Choices.
    pub values: Vec<ConfigValue>,
}
