//! What the model is given besides the conversation: the instruction files
//! (AGENTS.md and the like) a `context/instructions` event names.

use serde::{Deserialize, Serialize};

/// One instruction file in a `context/instructions` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionFile {
    /// Absolute path.
    pub path: String,
    /// What happened to it.
    pub status: InstructionStatus,
    /// A fingerprint of its content as loaded (to notice a change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// What happened to an instruction file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstructionStatus {
    /// Loaded whole.
    Loaded,
    /// Loaded, cut to fit the budget.
    Truncated,
    /// Left out to fit the budget.
    Omitted,
    /// Loaded again: its content changed.
    Updated,
    /// It is gone.
    Removed,
}
