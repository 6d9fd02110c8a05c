//! The agent's plan: entries the model keeps with `todo_write`, shown by
//! editors as a checklist (logged in `plan` events, shown in tool views).

use serde::{Deserialize, Serialize};

/// Where a plan entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// How much a plan entry matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    /// First.
    High,
    /// The default.
    #[default]
    Medium,
    /// Last.
    Low,
}

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// Where it stands.
    pub status: PlanStatus,
    /// How much it matters.
    #[serde(default)]
    pub priority: PlanPriority,
}
