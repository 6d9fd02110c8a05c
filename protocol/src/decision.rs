//! How the user answered dsh's own questions: a permission prompt
//! (`permission/decision`) and a plan review (`plan/decision`). The
//! model's questions have theirs in [`crate::question`].

use serde::{Deserialize, Serialize};

/// How a permission prompt was answered. Anything but an allow denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOutcome {
    /// Run it this time.
    AllowOnce,
    /// Run this command this time, with network access its sandbox would
    /// otherwise deny.
    AllowOnceNetwork,
    /// Run it and remember for the session.
    AllowAlways,
    /// Do not run it.
    RejectOnce,
    /// Do not run it and remember.
    RejectAlways,
    /// The prompt was cancelled (the turn is cancelled).
    Cancelled,
    /// No answer could be had (no client, broken channel): denied.
    Unavailable,
}

impl PermissionOutcome {
    /// Whether the call may run.
    pub fn allows(self) -> bool {
        matches!(
            self,
            PermissionOutcome::AllowOnce
                | PermissionOutcome::AllowOnceNetwork
                | PermissionOutcome::AllowAlways
        )
    }
}

/// How the user answered a plan submitted with `exit_plan_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanOutcome {
    /// Start, in `accept-edits` mode.
    AcceptEdits,
    /// Start, in `ask` mode: each change is asked about.
    AskEach,
    /// Keep planning.
    KeepPlanning,
    /// The review was cancelled (so was the turn).
    Cancelled,
    /// No answer could be had (no editor, a broken channel): plan mode stays.
    Unavailable,
}

impl PlanOutcome {
    /// The three answers a person gives, in menu order.
    pub const CHOICES: [PlanOutcome; 3] = [
        PlanOutcome::AcceptEdits,
        PlanOutcome::AskEach,
        PlanOutcome::KeepPlanning,
    ];

    /// Its id on every wire: `accept_edits`, `ask_each`, `keep_planning`,
    /// `cancelled`, `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanOutcome::AcceptEdits => "accept_edits",
            PlanOutcome::AskEach => "ask_each",
            PlanOutcome::KeepPlanning => "keep_planning",
            PlanOutcome::Cancelled => "cancelled",
            PlanOutcome::Unavailable => "unavailable",
        }
    }
}
