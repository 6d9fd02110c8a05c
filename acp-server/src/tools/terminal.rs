//! The `terminal_*` tools (seeds: `dsh-tool-terminal`, opt-in): persistent
//! shells on pseudo-terminals the model opens, feeds, reads and closes.

use dsh_protocol::tool::{ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{parse, PlanEnv, Refusal, Tool, ToolEnv};
use crate::permission::Access;

pub const CLOSE_DESCRIPTION: &str = "Close a terminal.";
pub const LIST_DESCRIPTION: &str = "List terminals.";
pub const OPEN_DESCRIPTION: &str = "Open a terminal.";
pub const READ_DESCRIPTION: &str = "Read a terminal.";
pub const SEND_DESCRIPTION: &str = "Send text to a terminal.";
pub const SIGNAL_DESCRIPTION: &str = "Signal a terminal.";

#[derive(Debug, Deserialize)]
pub struct OpenArgs {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A terminal tool's call.
#[derive(Debug)]
pub enum TerminalCall {
    Open(OpenArgs),
    Other(serde_json::Value),
}

pub fn plan(
    tool: Tool,
    name: &str,
    arguments: &str,
    _env: &PlanEnv<'_>,
) -> Result<(TerminalCall, ToolView, Access), Refusal> {
    let call = match tool {
        Tool::TerminalOpen => TerminalCall::Open(parse(name, arguments)?),
        _ => TerminalCall::Other(parse(name, arguments)?),
    };
    let view = ToolView {
        title: name.to_owned(),
        kind: Some(ToolKind::Execute),
        ..ToolView::default()
    };
    Ok((call, view, Access::None))
}

pub async fn run(_call: &TerminalCall, _env: &ToolEnv<'_>) -> ToolOutcome {
    ToolOutcome::failed(ErrorCode::Internal, "terminals are not built yet")
}
