//! The header line of a session log, and where a session comes from (a
//! fork, a subagent's call).

use serde::{Deserialize, Serialize};

use super::{FORMAT_NAME, FORMAT_VERSION};
use crate::ids::{SessionId, ToolCallId};

/// The first line of every session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// Format version.
    pub version: u32,
    /// Session id.
    pub id: SessionId,
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
    /// The session this one was forked from, and how far: its events up
    /// to `seq` (its last completed turn) begin this log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// A subagent's log: the session and call that started it (such a
    /// session is not listed unless asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_of: Option<SubagentOrigin>,
}

/// Where a subagent comes from: the `subagent` call of its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentOrigin {
    /// The parent session.
    pub session: SessionId,
    /// The parent's `subagent` call.
    pub call_id: ToolCallId,
    /// The call's description (for display).
    pub description: String,
    /// How deep it is: 1 for a child of a top-level session.
    pub depth: u32,
}

/// Where a fork comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The parent session.
    pub session: SessionId,
    /// The last of its events the fork took.
    pub seq: u64,
}

impl SessionHeader {
    /// A header for a new session.
    pub fn new(id: SessionId, created_at: u64, cwd: String, roots: Vec<String>) -> Self {
        SessionHeader {
            format: FORMAT_NAME.to_owned(),
            version: FORMAT_VERSION,
            id,
            created_at,
            cwd,
            roots,
            mcp_servers: serde_json::Value::Array(Vec::new()),
            forked_from: None,
            subagent_of: None,
        }
    }
}
