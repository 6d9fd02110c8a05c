//! The result object `--json` ends with, and what a run's goal does to
//! its exit status.

use dsh_protocol::log::{Goal, GoalPhase};
use dsh_protocol::model::Usage;

use super::Seen;

/// The exit status of a run whose turn ended normally but whose goal (one
/// the run created or ran rounds of) is not complete: its cap reached,
/// blocked or paused. Distinct from 1 (failed): the work stopped by the
/// goal's rules, not by an error.
pub(super) const GOAL_NOT_COMPLETE: u8 = 3;

/// The result object `--json` ends with; `goal` (the whole goal, as in
/// its `goal/change`) when the run changed one.
pub(super) fn result_object(
    session: Option<&str>,
    stop: serde_json::Value,
    seen: Option<&Seen>,
    duration_ms: u64,
    error: Option<(&str, &str)>,
) -> serde_json::Value {
    let mut result = serde_json::json!({
        "type": "result",
        "sessionId": session,
        "stopReason": stop,
        "text": seen.map_or("", |seen| seen.text.as_str()),
        "usage": seen.map_or_else(Usage::default, |seen| seen.usage),
        "cost": seen.and_then(|seen| seen.cost.clone()),
        "durationMs": duration_ms,
        "error": error.map(|(code, message)| serde_json::json!({"code": code, "message": message})),
    });
    if let Some(goal) = seen.and_then(|seen| seen.goal.as_ref()) {
        result["goal"] = serde_json::to_value(goal).unwrap_or_default();
    }
    result
}

/// The exit status of a run whose turn ended normally: 0, or
/// [`GOAL_NOT_COMPLETE`] with a line on stderr saying why.
pub(super) fn ended(goal: Option<&Goal>) -> u8 {
    let Some(goal) = goal.filter(|goal| goal.phase != GoalPhase::Complete) else {
        return 0;
    };
    let mut line = format!(
        "dsh run: the goal is not complete ({}, {} of {} rounds used",
        goal.phase.as_str(),
        goal.rounds_used,
        goal.max_rounds
    );
    if let Some(reason) = &goal.blocked_reason {
        line.push_str(&format!("; blocked: {reason}"));
    }
    line.push(')');
    super::stderr_line(&line);
    GOAL_NOT_COMPLETE
}
