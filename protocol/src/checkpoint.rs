//! Checkpoints: what a turn's file changes replaced, so `/undo` can put it
//! back. The log records which files changed and their content hashes; the
//! earlier contents are kept beside the logs (`$DSH_HOME/checkpoints/`).

use serde::{Deserialize, Serialize};

/// One file a turn changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointFile {
    /// Absolute path.
    pub path: String,
    /// SHA-256 (hex) of the content before the turn; `None`: the file did
    /// not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// SHA-256 (hex) of the content the turn left; `None`: it deleted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Whether the earlier content was kept (not when it was too large, or
    /// a command changed the file before dsh could copy it); the reason
    /// when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

impl CheckpointFile {
    /// Whether `/undo` can put this file back as it was.
    pub fn restorable(&self) -> bool {
        self.lost.is_none()
    }
}
