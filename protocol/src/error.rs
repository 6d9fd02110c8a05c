//! Stable error codes. Codes are append-only: a code, once shipped, keeps its
//! meaning forever. `docs/error-codes.md` lists them and a test pins the table.

use serde::{Deserialize, Serialize};

/// A stable, machine-readable error code carried in JSON-RPC error `data`
/// and in the session log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No API key could be resolved for the model provider.
    #[serde(rename = "auth.missing_credential")]
    MissingCredential,
    /// The provider rejected the credential (401/403).
    #[serde(rename = "model.auth")]
    ModelAuth,
    /// The provider rate-limited us and retries were exhausted.
    #[serde(rename = "model.rate_limit")]
    ModelRateLimit,
    /// The account has no quota or balance left (402 or a quota 429).
    #[serde(rename = "model.quota")]
    ModelQuota,
    /// The provider failed (5xx) and retries were exhausted.
    #[serde(rename = "model.server")]
    ModelServer,
    /// The provider could not be reached.
    #[serde(rename = "model.transport")]
    ModelTransport,
    /// The stream went idle past the configured timeout.
    #[serde(rename = "model.timeout")]
    ModelTimeout,
    /// The stream ended before the provider said it was done.
    #[serde(rename = "model.stream_closed")]
    ModelStreamClosed,
    /// The provider sent something that is not valid for the protocol.
    #[serde(rename = "model.malformed_response")]
    ModelMalformedResponse,
    /// The provider rejected the request (400).
    #[serde(rename = "model.invalid_request")]
    ModelInvalidRequest,
    /// The conversation no longer fits the model's context window.
    #[serde(rename = "model.context_window_exceeded")]
    ModelContextWindowExceeded,
    /// Any other HTTP status from the provider.
    #[serde(rename = "model.http")]
    ModelHttp,
    /// The session does not exist.
    #[serde(rename = "session.not_found")]
    SessionNotFound,
    /// The session already runs a prompt.
    #[serde(rename = "session.busy")]
    SessionBusy,
    /// The session log could not be read.
    #[serde(rename = "session.log_corrupt")]
    SessionLogCorrupt,
    /// The session log could not be written.
    #[serde(rename = "session.log_write")]
    SessionLogWrite,
    /// The session log was written by a newer dsh.
    #[serde(rename = "session.log_version")]
    SessionLogVersion,
    /// Request parameters are invalid.
    #[serde(rename = "request.invalid_params")]
    InvalidParams,
    /// A frame could not be parsed.
    #[serde(rename = "request.parse_error")]
    ParseError,
    /// A frame exceeded the size limit.
    #[serde(rename = "request.too_large")]
    RequestTooLarge,
    /// A tool name the model used does not exist.
    #[serde(rename = "tool.unknown")]
    UnknownTool,
    /// A tool was called with arguments that do not match its schema.
    #[serde(rename = "tool.invalid_args")]
    InvalidToolArgs,
    /// A tool call was logged but its outcome never was (crash or kill).
    #[serde(rename = "tool.outcome_unknown")]
    ToolOutcomeUnknown,
    /// A bug: something that should not happen.
    #[serde(rename = "internal")]
    Internal,
    /// The permission policy denied the call (mode or a reject rule).
    #[serde(rename = "permission.denied")]
    PermissionDenied,
    /// The user rejected the call.
    #[serde(rename = "permission.rejected")]
    PermissionRejected,
    /// The permission prompt was cancelled (the turn is cancelled).
    #[serde(rename = "permission.cancelled")]
    PermissionCancelled,
    /// No answer could be had; denied (fail closed).
    #[serde(rename = "permission.unavailable")]
    PermissionUnavailable,
    /// The call was cancelled before or while it ran.
    #[serde(rename = "tool.aborted")]
    ToolAborted,
    /// No language server handles the file type.
    #[serde(rename = "lsp.unavailable")]
    LspUnavailable,
    /// The language server is still indexing.
    #[serde(rename = "lsp.not_ready")]
    LspNotReady,
    /// The language server did not answer in time.
    #[serde(rename = "lsp.timed_out")]
    LspTimedOut,
    /// The language server crashed.
    #[serde(rename = "lsp.crashed")]
    LspCrashed,
    /// The language server answered with an error.
    #[serde(rename = "lsp.failed")]
    LspFailed,
    /// Another dsh process is writing the session's log.
    #[serde(rename = "session.locked")]
    SessionLocked,
    /// A web fetch or search failed (refused address, timeout, HTTP error,
    /// not text).
    #[serde(rename = "web.failed")]
    WebFailed,
    /// `dsh run --timeout` passed before the task finished; the turn was
    /// cancelled.
    #[serde(rename = "run.timeout")]
    RunTimeout,
    /// A subagent ended without an answer (its step limit, the output
    /// limit, a refusal).
    #[serde(rename = "subagent.no_answer")]
    SubagentNoAnswer,
}

impl ErrorCode {
    /// Every code, in declaration order (for documentation and the pin test).
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::MissingCredential,
        ErrorCode::ModelAuth,
        ErrorCode::ModelRateLimit,
        ErrorCode::ModelQuota,
        ErrorCode::ModelServer,
        ErrorCode::ModelTransport,
        ErrorCode::ModelTimeout,
        ErrorCode::ModelStreamClosed,
        ErrorCode::ModelMalformedResponse,
        ErrorCode::ModelInvalidRequest,
        ErrorCode::ModelContextWindowExceeded,
        ErrorCode::ModelHttp,
        ErrorCode::SessionNotFound,
        ErrorCode::SessionBusy,
        ErrorCode::SessionLogCorrupt,
        ErrorCode::SessionLogWrite,
        ErrorCode::SessionLogVersion,
        ErrorCode::InvalidParams,
        ErrorCode::ParseError,
        ErrorCode::RequestTooLarge,
        ErrorCode::UnknownTool,
        ErrorCode::InvalidToolArgs,
        ErrorCode::ToolOutcomeUnknown,
        ErrorCode::Internal,
        ErrorCode::PermissionDenied,
        ErrorCode::PermissionRejected,
        ErrorCode::PermissionCancelled,
        ErrorCode::PermissionUnavailable,
        ErrorCode::ToolAborted,
        ErrorCode::LspUnavailable,
        ErrorCode::LspNotReady,
        ErrorCode::LspTimedOut,
        ErrorCode::LspCrashed,
        ErrorCode::LspFailed,
        ErrorCode::SessionLocked,
        ErrorCode::WebFailed,
        ErrorCode::RunTimeout,
        ErrorCode::SubagentNoAnswer,
    ];

    /// The wire string, e.g. `"model.rate_limit"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MissingCredential => "auth.missing_credential",
            ErrorCode::ModelAuth => "model.auth",
            ErrorCode::ModelRateLimit => "model.rate_limit",
            ErrorCode::ModelQuota => "model.quota",
            ErrorCode::ModelServer => "model.server",
            ErrorCode::ModelTransport => "model.transport",
            ErrorCode::ModelTimeout => "model.timeout",
            ErrorCode::ModelStreamClosed => "model.stream_closed",
            ErrorCode::ModelMalformedResponse => "model.malformed_response",
            ErrorCode::ModelInvalidRequest => "model.invalid_request",
            ErrorCode::ModelContextWindowExceeded => "model.context_window_exceeded",
            ErrorCode::ModelHttp => "model.http",
            ErrorCode::SessionNotFound => "session.not_found",
            ErrorCode::SessionBusy => "session.busy",
            ErrorCode::SessionLogCorrupt => "session.log_corrupt",
            ErrorCode::SessionLogWrite => "session.log_write",
            ErrorCode::SessionLogVersion => "session.log_version",
            ErrorCode::InvalidParams => "request.invalid_params",
            ErrorCode::ParseError => "request.parse_error",
            ErrorCode::RequestTooLarge => "request.too_large",
            ErrorCode::UnknownTool => "tool.unknown",
            ErrorCode::InvalidToolArgs => "tool.invalid_args",
            ErrorCode::ToolOutcomeUnknown => "tool.outcome_unknown",
            ErrorCode::Internal => "internal",
            ErrorCode::PermissionDenied => "permission.denied",
            ErrorCode::PermissionRejected => "permission.rejected",
            ErrorCode::PermissionCancelled => "permission.cancelled",
            ErrorCode::PermissionUnavailable => "permission.unavailable",
            ErrorCode::ToolAborted => "tool.aborted",
            ErrorCode::LspUnavailable => "lsp.unavailable",
            ErrorCode::LspNotReady => "lsp.not_ready",
            ErrorCode::LspTimedOut => "lsp.timed_out",
            ErrorCode::LspCrashed => "lsp.crashed",
            ErrorCode::LspFailed => "lsp.failed",
            ErrorCode::SessionLocked => "session.locked",
            ErrorCode::WebFailed => "web.failed",
            ErrorCode::RunTimeout => "run.timeout",
            ErrorCode::SubagentNoAnswer => "subagent.no_answer",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as recorded in the log and shown to users: a stable code and a
/// message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Stable code.
    pub code: ErrorCode,
    /// Human-readable message.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Codes are a wire format: this pins the table so renaming one fails.
    #[test]
    fn codes_are_stable() {
        let names: Vec<String> = ErrorCode::ALL
            .iter()
            .map(|code| {
                serde_json::to_value(code)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let expected = [
            "auth.missing_credential",
            "model.auth",
            "model.rate_limit",
            "model.quota",
            "model.server",
            "model.transport",
            "model.timeout",
            "model.stream_closed",
            "model.malformed_response",
            "model.invalid_request",
            "model.context_window_exceeded",
            "model.http",
            "session.not_found",
            "session.busy",
            "session.log_corrupt",
            "session.log_write",
            "session.log_version",
            "request.invalid_params",
            "request.parse_error",
            "request.too_large",
            "tool.unknown",
            "tool.invalid_args",
            "tool.outcome_unknown",
            "internal",
            "permission.denied",
            "permission.rejected",
            "permission.cancelled",
            "permission.unavailable",
            "tool.aborted",
            "lsp.unavailable",
            "lsp.not_ready",
            "lsp.timed_out",
            "lsp.crashed",
            "lsp.failed",
            "session.locked",
            "web.failed",
            "run.timeout",
            "subagent.no_answer",
        ];
        assert_eq!(names, expected);
        for code in ErrorCode::ALL {
            assert_eq!(
                code.as_str(),
                serde_json::to_value(code).unwrap().as_str().unwrap()
            );
        }
    }
}
