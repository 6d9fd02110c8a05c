//! How a goal's change shows: a line of its own, live and on load.

use dsh_protocol::log::{Goal, GoalChangeKind};

/// What a `goal/change` shows the person (a line of its own).
pub fn note(kind: GoalChangeKind, goal: &Goal) -> String {
    let objective = dsh_protocol::content::visible_title(&goal.objective, 200);
    let line = match kind {
        GoalChangeKind::Created => format!(
            "**Goal set** (up to {} rounds): {objective}",
            goal.max_rounds
        ),
        GoalChangeKind::Edited => format!(
            "**Goal changed** (up to {} rounds): {objective}",
            goal.max_rounds
        ),
        GoalChangeKind::Paused => {
            format!("**Goal paused**: {objective} — `/goal resume` continues it.")
        }
        GoalChangeKind::Resumed => format!("**Goal resumed**: {objective}"),
        GoalChangeKind::Completed => format!("**Goal complete**: {objective}"),
        GoalChangeKind::Blocked => format!(
            "**Goal blocked**: {objective} — {}",
            goal.blocked_reason.as_deref().map_or_else(
                || "no reason given".to_owned(),
                |reason| { dsh_protocol::content::visible_title(reason, 200) }
            )
        ),
        GoalChangeKind::Round => format!(
            "**Goal round {}/{}**: {objective}",
            goal.rounds_used, goal.max_rounds
        ),
        GoalChangeKind::Cleared => format!("**Goal cleared**: {objective}"),
    };
    format!("\n\n{line}\n\n")
}

/// [`note`] as a plain line (`dsh run`'s stderr).
pub fn plain(kind: GoalChangeKind, goal: &Goal) -> String {
    note(kind, goal).trim().replace("**", "")
}
