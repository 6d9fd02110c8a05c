//! The agent's one domain error. Every variant has a stable code; the ACP
//! adapter turns it into a JSON-RPC error in one place (`acp::error`).

use dsh_protocol::log::LogError;
use dsh_protocol::ErrorCode;

use crate::model::ModelError;

/// Anything a front end can get back from the agent core.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Bad request parameters; the message names the offending value.
    #[error("{0}")]
    InvalidParams(String),
    /// No such session.
    #[error("session {0} not found")]
    SessionNotFound(String),
    /// The session's turn is in the way (the message says how: a full
    /// line of prompts behind it, or a load while it writes).
    #[error("{0}")]
    SessionBusy(String),
    /// Another process writes the session's log.
    #[error("session {id} is open in another dsh process{}; close it there (or quit that editor window) first", holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default())]
    SessionLocked {
        /// The session.
        id: String,
        /// The process holding the log's lock, when known.
        holder: Option<u32>,
    },
    /// The session was closed while a turn still ran.
    #[error("session {0} was closed; load it again to continue")]
    SessionClosed(String),
    /// No API key.
    #[error("{0}")]
    AuthRequired(String),
    /// The model call failed.
    #[error("{0}")]
    Model(ModelError),
    /// The log could not be read.
    #[error("cannot open session: {0}")]
    Log(LogError),
    /// The log could not be written.
    #[error("cannot write the session log {path}: {source}; check that DSH_HOME is writable and the disk is not full")]
    LogWrite {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The configuration is invalid.
    #[error("dsh is misconfigured: {0}")]
    Config(String),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
    /// The turn a steered prompt joined failed: that turn's error, as its
    /// own prompt was answered.
    #[error("{}", .0.message)]
    Joined(dsh_protocol::error::ErrorInfo),
}

impl AgentError {
    /// The error for a bug caught as a panic in a `what` ("request",
    /// "turn"); `detail` (the panic message) goes to the log, not the user.
    pub fn bug(what: &str, detail: &dyn std::fmt::Display) -> AgentError {
        tracing::error!(%detail, "the {what} panicked");
        AgentError::Internal(format!(
            "the {what} failed unexpectedly (a bug in dsh, details in its log); the session is still usable"
        ))
    }

    /// The message of a panic payload (`&str` or `String`), else empty.
    pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    }

    /// The JSON-RPC error code every wire front end (ACP, the SDK)
    /// answers this error with; the stable code goes in `data.code`.
    pub fn rpc_code(&self) -> i32 {
        match self {
            AgentError::AuthRequired(_) => -32000,
            AgentError::SessionNotFound(_) | AgentError::SessionClosed(_) => -32002,
            AgentError::InvalidParams(_)
            | AgentError::SessionBusy(_)
            | AgentError::SessionLocked { .. } => -32602,
            AgentError::Model(_)
            | AgentError::Log(_)
            | AgentError::LogWrite { .. }
            | AgentError::Config(_)
            | AgentError::Internal(_)
            | AgentError::Joined(_) => -32603,
        }
    }

    /// The JSON-RPC error `data`: the stable code and the message.
    pub fn rpc_data(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code().as_str(), "message": self.to_string() })
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            AgentError::InvalidParams(_) => ErrorCode::InvalidParams,
            AgentError::SessionNotFound(_) => ErrorCode::SessionNotFound,
            AgentError::SessionBusy(_) => ErrorCode::SessionBusy,
            AgentError::SessionLocked { .. } => ErrorCode::SessionLocked,
            AgentError::SessionClosed(_) => ErrorCode::SessionNotFound,
            AgentError::AuthRequired(_) => ErrorCode::MissingCredential,
            AgentError::Model(error) => error.code,
            AgentError::Log(error) => error.code,
            AgentError::LogWrite { .. } => ErrorCode::SessionLogWrite,
            AgentError::Config(_) | AgentError::Internal(_) => ErrorCode::Internal,
            AgentError::Joined(info) => info.code,
        }
    }
}

impl From<ModelError> for AgentError {
    fn from(error: ModelError) -> Self {
        if error.code == ErrorCode::MissingCredential {
            AgentError::AuthRequired(error.message)
        } else {
            AgentError::Model(error)
        }
    }
}
