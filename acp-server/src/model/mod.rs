//! The model client: one provider-neutral request type, a stream of
//! [`StreamEvent`]s back, and the providers that produce it — an HTTP client
//! for DeepSeek and OpenAI-compatible endpoints, and a replay provider that
//! plays a scripted transcript (for `dsh demo` and tests).
//!
//! Retries live in [`retry`], outside the providers: one `start` is one
//! attempt.

pub mod http;
pub mod replay;
pub mod retry;
pub mod script;
pub mod sse;

use std::pin::Pin;
use std::time::Duration;

use dsh_protocol::model::{ChatMessage, StreamEvent};
use dsh_protocol::ErrorCode;
use futures::Stream;

use crate::config::{ModelInfo, ThoughtLevel};

/// A stream of model events; it ends after `Finish` or an error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ModelError>> + Send>>;

/// A tool the model may call, as a JSON schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}

/// One model call.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The model.
    pub model: ModelInfo,
    /// Reasoning effort.
    pub thought_level: ThoughtLevel,
    /// System prompt.
    pub system: String,
    /// Conversation, derived from the session log.
    pub messages: Vec<ChatMessage>,
    /// Tools offered.
    pub tools: Vec<ToolSchema>,
    /// The session, for provider-side correlation headers.
    pub session_id: String,
}

/// A failed model call with a stable code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// Stable code.
    pub code: ErrorCode,
    /// What happened and what to do.
    pub message: String,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    /// The provider's `Retry-After`.
    pub retry_after: Option<Duration>,
}

impl ModelError {
    /// A new error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ModelError {
            code,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }

    /// Whether a retry could succeed (rate limits, server faults, transport).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::ModelRateLimit
                | ErrorCode::ModelServer
                | ErrorCode::ModelTransport
                | ErrorCode::ModelTimeout
        )
    }

    /// Maps an HTTP error status and body to an error with advice.
    pub fn from_status(
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        base_url: &str,
    ) -> Self {
        let detail = provider_message(body);
        let (code, advice) = match status {
            401 | 403 => (
                ErrorCode::ModelAuth,
                "the API key was rejected; check DEEPSEEK_API_KEY (or the key variable set in config.toml)".to_owned(),
            ),
            402 => (ErrorCode::ModelQuota, "the account has no balance left; top it up with the provider".to_owned()),
            429 if detail.to_ascii_lowercase().contains("quota") => {
                (ErrorCode::ModelQuota, "the account's quota is used up".to_owned())
            }
            429 => (ErrorCode::ModelRateLimit, "the provider is rate limiting requests; wait a moment and try again".to_owned()),
            400 if is_context_overflow(&detail) => (
                ErrorCode::ModelContextWindowExceeded,
                "the conversation is longer than the model's context window; start a new session".to_owned(),
            ),
            400 | 422 => (ErrorCode::ModelInvalidRequest, "the provider rejected the request".to_owned()),
            404 => (
                ErrorCode::ModelInvalidRequest,
                format!("{base_url}/chat/completions was not found; check the base URL and the model id"),
            ),
            500..=599 => (ErrorCode::ModelServer, "the provider had a server error; try again shortly".to_owned()),
            _ => (ErrorCode::ModelHttp, "the provider answered with an unexpected status".to_owned()),
        };
        let message = if detail.is_empty() {
            format!("model request failed with HTTP {status}: {advice}")
        } else {
            format!("model request failed with HTTP {status}: {advice} (provider said: {detail})")
        };
        ModelError {
            code,
            message,
            status: Some(status),
            retry_after,
        }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn is_context_overflow(detail: &str) -> bool {
    let detail = detail.to_ascii_lowercase();
    detail.contains("context length")
        || detail.contains("context window")
        || detail.contains("maximum context")
}

/// Pulls `error.message` out of an OpenAI-style error body, else a short
/// prefix of the body.
fn provider_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(message) = value.pointer("/error/message").and_then(|m| m.as_str()) {
            return dsh_protocol::content::truncate_chars(message, 300);
        }
    }
    dsh_protocol::content::truncate_chars(body.trim(), 300)
}

/// The configured provider.
pub enum Provider {
    /// DeepSeek or OpenAI-compatible over HTTP.
    Http(http::HttpProvider),
    /// Scripted replay.
    Replay(replay::ReplayProvider),
}

impl Provider {
    /// Starts one attempt; errors before the first byte come back here so the
    /// caller can retry them.
    ///
    /// # Errors
    /// Missing credential, HTTP error status, transport failure.
    pub async fn start(&self, request: &ModelRequest) -> Result<EventStream, ModelError> {
        match self {
            Provider::Http(provider) => provider.start(request).await,
            Provider::Replay(provider) => provider.start(request).await,
        }
    }
}

/// `1.5 s`, `300 ms`.
pub(crate) fn human_duration(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}
