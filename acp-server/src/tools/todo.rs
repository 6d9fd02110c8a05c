//! `todo_write`: the model's plan, sent whole each time; it becomes an ACP
//! `plan` update and a `plan` event in the session log.

use dsh_protocol::log::{PlanEntry, PlanPriority, PlanStatus};
use dsh_protocol::tool::ToolView;
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::Refusal;
use dsh_protocol::tool::ToolOutcome;

pub const DESCRIPTION: &str = "Record and update a structured task list for the current work. Send the COMPLETE list on every call: it REPLACES the previous list; there are no partial updates or per-item edits. Use it to plan multi-step work and show progress: before starting, add a todo for each concrete step. Mark every todo you are working on as in_progress: several at once when work truly runs in parallel (for example concurrent subagents or background commands), one for sequential work. While work remains, at least one task should be in_progress. Mark a todo completed as soon as it is done; do not batch completions. Only when all work is done may no item be in_progress. Simple single-step tasks need no list. Statuses: pending (not started), in_progress (being worked on), completed (done).";

#[derive(Debug, Deserialize)]
pub struct TodoArgs {
    pub todos: Vec<Todo>,
}

#[derive(Debug, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: String,
}

pub fn validate(args: &TodoArgs) -> Result<(), Refusal> {
    for (index, todo) in args.todos.iter().enumerate() {
        if !matches!(
            todo.status.as_str(),
            "pending" | "in_progress" | "completed"
        ) {
            return Err(Refusal::new(
                ErrorCode::InvalidToolArgs,
                format!(
                    "todos[{index}].status is {:?}; use pending, in_progress or completed.",
                    todo.status
                ),
            ));
        }
        if todo.content.trim().is_empty() {
            return Err(Refusal::new(
                ErrorCode::InvalidToolArgs,
                format!("todos[{index}].content is empty."),
            ));
        }
    }
    Ok(())
}

/// The status a validated todo names.
fn status(name: &str) -> PlanStatus {
    match name {
        "in_progress" => PlanStatus::InProgress,
        "completed" => PlanStatus::Completed,
        _ => PlanStatus::Pending,
    }
}

pub fn run(args: &TodoArgs) -> ToolOutcome {
    let entries: Vec<PlanEntry> = args
        .todos
        .iter()
        .map(|todo| PlanEntry {
            content: todo.content.clone(),
            status: status(&todo.status),
            priority: PlanPriority::Medium,
        })
        .collect();
    let count = |status: PlanStatus| entries.iter().filter(|e| e.status == status).count();
    let output = format!(
        "Plan updated: {} items ({} completed, {} in progress, {} pending).",
        entries.len(),
        count(PlanStatus::Completed),
        count(PlanStatus::InProgress),
        count(PlanStatus::Pending)
    );
    ToolOutcome {
        plan: Some(entries),
        ..ToolOutcome::ok(output, ToolView::default())
    }
}
