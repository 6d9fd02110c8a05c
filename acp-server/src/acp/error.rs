//! The one place agent errors become JSON-RPC errors. The human message is
//! the JSON-RPC `message` (editors show it); `data` carries the stable code.

use agent_client_protocol::Error;

use crate::error::AgentError;

/// Converts an agent error.
pub fn to_acp(error: &AgentError) -> Error {
    let code: i32 = match error {
        AgentError::AuthRequired(_) => -32000,
        AgentError::SessionNotFound(_) | AgentError::SessionClosed(_) => -32002,
        AgentError::InvalidParams(_)
        | AgentError::SessionBusy(_)
        | AgentError::SessionLocked { .. } => -32602,
        AgentError::Model(_)
        | AgentError::Log(_)
        | AgentError::LogWrite { .. }
        | AgentError::Config(_)
        | AgentError::Internal(_) => -32603,
    };
    let message = error.to_string();
    Error::new(code, message.clone())
        .data(serde_json::json!({ "code": error.code().as_str(), "message": message }))
}

/// Invalid params with a message.
pub fn invalid_params(message: impl Into<String>) -> Error {
    to_acp(&AgentError::InvalidParams(message.into()))
}
