//! `todo_write`: the model's plan, sent whole each time; it becomes an ACP
//! `plan` update and a `plan` event in the session log.

use dsh_protocol::log::{PlanEntry, PlanPriority, PlanStatus};
use dsh_protocol::tool::ToolView;
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::Refusal;
use dsh_protocol::tool::ToolOutcome;

pub const DESCRIPTION: &str = "Write the task list for this work. Send the whole list every time (it replaces the previous one). Each item has content and status: pending, in_progress or completed.";

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
