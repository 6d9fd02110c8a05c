//! The continuable children's tools (seeds: `dsh-tool-subagent-control`:
//! `interrupt_agent`, `list_agents`, `send_message`; `dsh-tool-subagent`:
//! `list_subagent_models`): parsed and presented here; the turn runs them.

use dsh_protocol::tool::{ToolKind, ToolView};
use serde::Deserialize;

use super::{parse, Refusal, Tool};

pub const INTERRUPT_DESCRIPTION: &str = "Interrupt an agent.";
pub const LIST_DESCRIPTION: &str = "List agents.";
pub const SEND_DESCRIPTION: &str = "Send a message to an agent.";
pub const MODELS_DESCRIPTION: &str = "List subagent models.";

#[derive(Debug, Deserialize)]
pub struct AgentArgs {
    pub agent_id: String,
}

#[derive(Debug, Deserialize)]
pub struct ListArgs {
    #[serde(default)]
    pub scope: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct SendArgs {
    pub agent_id: String,
    pub message: String,
}

#[derive(Debug, Deserialize)]
pub struct ModelsArgs {
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// A continuable children's tool's call.
#[derive(Debug)]
pub enum AgentsCall {
    Interrupt(AgentArgs),
    List(ListArgs),
    Send(SendArgs),
    Models(ModelsArgs),
}

pub fn plan(tool: Tool, name: &str, arguments: &str) -> Result<(AgentsCall, ToolView), Refusal> {
    let call = match tool {
        Tool::InterruptAgent => AgentsCall::Interrupt(parse(name, arguments)?),
        Tool::SendMessage => AgentsCall::Send(parse(name, arguments)?),
        Tool::ListSubagentModels => AgentsCall::Models(parse(name, arguments)?),
        _ => AgentsCall::List(parse(name, arguments)?),
    };
    let view = ToolView {
        title: name.to_owned(),
        kind: Some(ToolKind::Other),
        ..ToolView::default()
    };
    Ok((call, view))
}
