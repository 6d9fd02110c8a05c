//! The session-query tools (seeds: `dsh-tool-session-query`, opt-in):
//! `session_search`, `session_event_search`, `session_event_read`,
//! `session_trace`, `session_event_trace`. Read-only recall of earlier
//! sessions: every result authorized against the calling session.

use dsh_protocol::tool::{ToolKind, ToolView};
use serde::Deserialize;

use super::{parse, Refusal, Tool, ToolOutcome};

pub const EVENT_READ_DESCRIPTION: &str = "Read one whole, unabridged event from an authorized session, with optional summaries of the raw events just before and after it.";
pub const EVENT_SEARCH_DESCRIPTION: &str = "Search earlier events within one authorized session; when searching the current session, the step making this call is left out.";
pub const EVENT_TRACE_DESCRIPTION: &str = "Read every direct replacement relation of an event in an authorized session, and the relations between the event and the source events it references.";
pub const SEARCH_DESCRIPTION: &str = "Search prior sessions in the caller's workspace and return the best-matching event from each session.";
pub const TRACE_DESCRIPTION: &str = "Read the authorized lineage around a session, including its fully visible ancestors and descendants.";

/// `session_search`'s arguments.
#[derive(Debug, Deserialize)]
pub struct SearchArgs {
    pub query: String,
}

/// A session-query tool's call.
#[derive(Debug)]
pub enum SessionQueryCall {
    Search(SearchArgs),
}

pub fn plan(
    tool: Tool,
    name: &str,
    arguments: &str,
) -> Result<(SessionQueryCall, ToolView), Refusal> {
    let _ = tool;
    let call = SessionQueryCall::Search(parse(name, arguments)?);
    let view = ToolView {
        title: "Search earlier sessions".to_owned(),
        kind: Some(ToolKind::Search),
        ..ToolView::default()
    };
    Ok((call, view))
}

pub async fn run(call: &SessionQueryCall, env: &super::ToolEnv<'_>) -> ToolOutcome {
    let _ = (call, env);
    ToolOutcome::failed(
        dsh_protocol::ErrorCode::Internal,
        "the session-query tools are being built",
    )
}
