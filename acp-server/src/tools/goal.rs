//! `create_goal`, `get_goal`, `update_goal` (seeds: `dsh-tool-goal`):
//! parsed and presented here; the turn runs them (they need the session's
//! goal and the turn's authority).

use dsh_protocol::tool::{ToolKind, ToolView};
use serde::Deserialize;

use super::{parse, Refusal, Tool};

pub const CREATE_DESCRIPTION: &str = "Create a goal.";
pub const GET_DESCRIPTION: &str = "Get the goal.";
pub const UPDATE_DESCRIPTION: &str = "Update the goal.";

#[derive(Debug, Deserialize)]
pub struct CreateArgs {
    pub objective: String,
    #[serde(default)]
    pub max_goal_rounds: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct UpdateArgs {
    pub goal_id: String,
    pub revision: f64,
    pub action: String,
    #[serde(default)]
    pub objective: Option<String>,
    #[serde(default)]
    pub max_goal_rounds: Option<f64>,
    #[serde(default)]
    pub blocked_reason: Option<String>,
}

/// A goal tool's call.
#[derive(Debug)]
pub enum GoalCall {
    Create(CreateArgs),
    Get,
    Update(UpdateArgs),
}

pub fn plan(tool: Tool, name: &str, arguments: &str) -> Result<(GoalCall, ToolView), Refusal> {
    let call = match tool {
        Tool::CreateGoal => GoalCall::Create(parse(name, arguments)?),
        Tool::UpdateGoal => GoalCall::Update(parse(name, arguments)?),
        _ => GoalCall::Get,
    };
    let view = ToolView {
        title: name.to_owned(),
        kind: Some(ToolKind::Think),
        ..ToolView::default()
    };
    Ok((call, view))
}
