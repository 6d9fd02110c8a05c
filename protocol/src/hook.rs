//! What the session log keeps of hooks: each run (`hook/result`) and the
//! user's answer about a project's hooks file (`hook/consent`).

use serde::{Deserialize, Serialize};

use crate::ids::ToolCallId;

/// One hook run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRun {
    /// The hook event (`PreToolUse`, ...).
    pub event: String,
    /// The command, cut to one line.
    pub command: String,
    /// `user` or `project`.
    pub source: String,
    /// The tool call it ran for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<ToolCallId>,
    /// Its exit code (absent: it did not start, timed out or died).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why there is no exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// It blocked (exit 2, or a `block` or `deny` answer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocked: bool,
    /// Wall-clock run time.
    pub duration_ms: u64,
    /// The end of its stderr, bounded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

impl HookRun {
    /// It failed: no exit code, or one other than 0 and 2.
    pub fn failed(&self) -> bool {
        !matches!(self.exit_code, Some(0 | 2))
    }
}

/// The user's answer to "Run this project's hooks?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookConsent {
    /// The hooks file.
    pub path: String,
    /// SHA-256 of the content answered about, hex.
    pub hash: String,
    /// Allowed (else refused).
    pub allow: bool,
    /// Given in `read-only` or `plan` mode: only such an allow covers
    /// those modes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}
