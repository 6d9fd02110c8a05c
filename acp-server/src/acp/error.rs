//! The one place agent errors become JSON-RPC errors. The human message is
//! the JSON-RPC `message` (editors show it); `data` carries the stable code.

use agent_client_protocol::Error;

use crate::error::AgentError;

/// Converts an agent error.
pub fn to_acp(error: &AgentError) -> Error {
    Error::new(error.rpc_code(), error.to_string()).data(error.rpc_data())
}

/// Invalid params with a message.
pub fn invalid_params(message: impl Into<String>) -> Error {
    to_acp(&AgentError::InvalidParams(message.into()))
}
