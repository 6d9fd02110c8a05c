//! A session's goal as the log records it (`goal/change`), and who sent a
//! `user/message` (the person, a goal round, a wake-up).

use serde::{Deserialize, Serialize};

/// A session's goal: one durable completion objective the session works
/// on over goal rounds (see `docs/interaction.md#goals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goal {
    /// Stable id (the tools name it).
    pub id: String,
    /// Grows by one with every change; an update names the one it read.
    pub revision: u64,
    /// What counts as done.
    pub objective: String,
    /// Where it is.
    pub phase: GoalPhase,
    /// Goal rounds run so far (the person's own turns do not count).
    pub rounds_used: u32,
    /// The most goal rounds it may run.
    pub max_rounds: u32,
    /// Goal rounds run since it was created, edited or resumed (`blocked`
    /// needs a few).
    pub consecutive_rounds: u32,
    /// Why it is blocked (phase `blocked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_reason: Option<String>,
}

/// A goal's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalPhase {
    /// Being worked on: rounds continue while the session may run them.
    Active,
    /// Paused by the person.
    Paused,
    /// The model reported it cannot go on (with a reason).
    Blocked,
    /// Done.
    Complete,
}

impl GoalPhase {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalPhase::Active => "active",
            GoalPhase::Paused => "paused",
            GoalPhase::Blocked => "blocked",
            GoalPhase::Complete => "complete",
        }
    }
}

/// What a `goal/change` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalChangeKind {
    /// A new goal.
    Created,
    /// Its objective or cap changed.
    Edited,
    /// The person paused it.
    Paused,
    /// The person resumed it.
    Resumed,
    /// It is done.
    Completed,
    /// The model reported it blocked.
    Blocked,
    /// A goal round starts (counted).
    Round,
    /// The person cleared it (the goal is a tombstone).
    Cleared,
}

/// Who sent a `user/message`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageSource {
    /// The person (a prompt of any front end).
    #[default]
    User,
    /// A goal round's continuation message (dsh, for an active goal).
    Goal,
    /// A background job's or child's end delivered to an idle session.
    Wakeup,
}

impl MessageSource {
    /// Whether it is the person's own message.
    pub fn is_user(&self) -> bool {
        *self == MessageSource::User
    }
}
